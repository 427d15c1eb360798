package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"kvmd/firstboot"
	"kvmd/internal/testutil"
)

// TestFirstbootServe runs "kvmd firstboot" with every flag (package
// firstboot tests what it makes): the daemon then starts on what it made
// and accepts the generated password over HTTPS, with the certificate
// verified as a client that trusts it would.
func TestFirstbootServe(t *testing.T) {
	root := t.TempDir()
	etc, state := filepath.Join(root, "etc", "kvmd"), filepath.Join(root, "var", "lib", "kvmd")
	issue := filepath.Join(root, "etc", "issue.d", "kvmd.issue")
	g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runKvmd(t, "", "firstboot", "--etc", etc, "--state", state, "--issue", issue,
		"--hostname", "kvm-test", "--group", g.Name)
	if err != nil {
		t.Fatalf("firstboot: %v\n%s%s", err, stdout, stderr)
	}
	for _, p := range []string{filepath.Join(etc, "htpasswd"), filepath.Join(state, "admin-password"), issue} {
		if !strings.Contains(stdout, "created "+p) {
			t.Errorf("output does not say %s was created:\n%s", p, stdout)
		}
	}
	if fi, err := os.Stat(filepath.Join(etc, "htpasswd")); err != nil || fi.Mode().Perm() != 0o640 ||
		fi.Sys().(*syscall.Stat_t).Gid != uint32(os.Getegid()) {
		t.Errorf("htpasswd: %v %v: want 0640, group %s (--group)", fi.Mode(), err, g.Name)
	}

	// The config is one kvmd serve takes, naming the files made here.
	p := func(name string) string { return filepath.Join(etc, name) }
	cfg, err := parseServe([]string{"--config", p("kvmd.yaml")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := []string{":443", "unix:" + firstboot.DefaultSocket, p("htpasswd"), p("totp.secret"), p("tls.crt"), p("tls.key")}
	gotCfg := append(slices.Clone(cfg.Listen), cfg.Users, cfg.TOTPSecret, cfg.TLSCert, cfg.TLSKey)
	if !slices.Equal(gotCfg, wantCfg) {
		t.Errorf("config: listen, users, totp-secret, tls-cert, tls-key = %q, want %q", gotCfg, wantCfg)
	}

	passwd := strings.TrimSpace(readFile(t, filepath.Join(state, "admin-password")))
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(readFile(t, p("tls.crt")))) {
		t.Fatal("tls.crt holds no certificate")
	}

	addr := testutil.FreeAddr(t)
	dm := startDaemon(t, nil, nil, "serve", "--config", p("kvmd.yaml"), "--listen", addr)
	dm.stderr.wait(t, `kvmd listening.*tls=true`)
	_, port, _ := net.SplitHostPort(addr)
	for _, serverName := range []string{"", "kvm-test.local", "localhost"} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}}}
		url := "https://127.0.0.1:" + port + "/api/auth/check"
		if st := get(t, c, url, basicAuth("admin", passwd)); st != 200 {
			t.Errorf("%s as %q with the generated password: %d", url, serverName, st)
		}
		if st := get(t, c, url, basicAuth("admin", passwd+"x")); st != 403 {
			t.Errorf("wrong password: %d", st)
		}
	}
	if err := dm.stop(t); err != nil {
		t.Errorf("exit: %v\n%s", err, dm.stderr)
	}
}

func TestFirstbootBadArgs(t *testing.T) {
	_, stderr, err := runKvmd(t, "", "firstboot", "extra")
	if err == nil || !strings.Contains(stderr, "unexpected argument") {
		t.Errorf("err %v, stderr %q", err, stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
