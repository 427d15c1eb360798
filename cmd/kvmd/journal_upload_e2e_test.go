package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// shippedUploadConf is the systemd-journal-upload configuration the Debian
// package and the image install as
// /etc/systemd/journal-upload.conf.d/kvmd.conf.
const shippedUploadConf = "../../systemd/journal-upload.conf.d/kvmd.conf"

// TestShippedUploadConf: the configuration ships off (no URL) and never
// turns off the checking of the server's certificate.
func TestShippedUploadConf(t *testing.T) {
	b, err := os.ReadFile(shippedUploadConf)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	section := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "[Upload]" {
			t.Errorf("not a setting of [Upload]: %q", line)
		}
		settings[k] = v
	}
	if u, ok := settings["URL"]; ok {
		t.Errorf("URL=%s set: the shipped configuration must be off until the operator points it at a server", u)
	}
	for _, k := range []string{"ServerKeyFile", "ServerCertificateFile", "TrustedCertificateFile"} {
		if v := settings[k]; !strings.HasPrefix(v, "/etc/kvmd/journal-upload/") {
			t.Errorf("%s=%q, want a file in /etc/kvmd/journal-upload/", k, v)
		}
	}
	if !strings.Contains(string(b), "\n#URL=https://") {
		t.Error("no commented URL=https://... line for the operator to set")
	}
}

// certs are a test PKI: a CA, and leaf certificates and keys it signs.
type certs struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func newCA(t *testing.T, dir, name string) *certs {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c := &certs{dir: dir, caCert: cert, caKey: key}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", der, 0o644)
	return c
}

// leaf writes dir/name.crt and dir/name.key, signed by the CA, for a
// server (on 127.0.0.1) or a client.
func (c *certs) leaf(t *testing.T, name string, server bool) (crt, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.caCert, &k.PublicKey, c.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	crt, key = filepath.Join(c.dir, name+".crt"), filepath.Join(c.dir, name+".key")
	writePEM(t, crt, "CERTIFICATE", der, 0o644)
	writePEM(t, key, "PRIVATE KEY", kder, 0o600)
	return crt, key
}

func writePEM(t *testing.T, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// startJournalRemote runs a real systemd-journal-remote receiving over
// HTTPS on addr with the server certificate and key, writing what it
// receives to out. It does not check the client's certificate: Debian's
// is built without --trust ("Option --trust is not available"; the
// client's certificate is checked only by builds with GnuTLS).
func startJournalRemote(t *testing.T, addr, crt, key, out string) *testutil.SyncBuffer {
	t.Helper()
	cmd := exec.Command(journaltest.Remote, "--listen-https="+addr, "--cert="+crt, "--key="+key,
		"--output="+out, "--split-mode=none", "--seal=no")
	log := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return log
		}
		select {
		case <-done:
			t.Fatalf("systemd-journal-remote exited:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-journal-remote not listening on %s after 5 s:\n%s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// upload runs the real systemd-journal-upload on the journal files of
// jdir, configured as the device is: /etc is etc (a private bind mount, in
// a user and mount namespace of its own, so the test changes nothing of
// this machine's /etc), which holds the shipped configuration with URL set
// and the certificates where it expects them. Nothing but the
// configuration tells it where to send or which certificates to use.
func upload(t *testing.T, unshare, bin, etc, jdir string) (string, error) {
	t.Helper()
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
		`mount --bind "$1" /etc && exec "$2" --directory="$3" --follow=no`, "sh", etc, bin, jdir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("systemd-journal-upload still running after 20 s:\n%s", out.String())
		return "", nil
	}
}

// deviceEtc lays out the device's /etc for upload: the shipped
// configuration with the one setting an operator makes (URL), and the
// client certificate, key and CA in /etc/kvmd/journal-upload.
func deviceEtc(t *testing.T, url, clientCrt, clientKey, ca string) string {
	t.Helper()
	etc := filepath.Join(t.TempDir(), "etc")
	b, err := os.ReadFile(shippedUploadConf)
	if err != nil {
		t.Fatal(err)
	}
	conf := regexp.MustCompile(`(?m)^#URL=.*$`).ReplaceAllString(string(b), "URL="+url)
	if conf == string(b) {
		t.Fatal("no #URL= line to set in the shipped configuration")
	}
	p := filepath.Join(etc, "systemd", "journal-upload.conf.d", "kvmd.conf")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(etc, "kvmd", "journal-upload")
	copyFile(t, clientCrt, filepath.Join(dir, "client.crt"), 0o644)
	copyFile(t, clientKey, filepath.Join(dir, "client.key"), 0o640)
	copyFile(t, ca, filepath.Join(dir, "ca.crt"), 0o644)
	return etc
}

// remoteMessages returns the MESSAGE of every entry of unit in the journal
// file path, read with the real journalctl.
func remoteMessages(t *testing.T, path, unit string) []string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	out, err := exec.Command("journalctl", "--file="+path, "-o", "json", "--no-pager").Output()
	if err != nil {
		t.Fatalf("journalctl --file=%s: %v", path, err)
	}
	var msgs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("journalctl JSON: %v: %s", err, sc.Bytes())
		}
		if e["_SYSTEMD_UNIT"] == unit {
			m, _ := e["MESSAGE"].(string)
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// TestJournalUploadEndToEnd: the daemon's log, as journald keeps it,
// reaches a real systemd-journal-remote over HTTPS, sent by a real
// systemd-journal-upload that reads nothing but the shipped configuration
// with URL set; and a server whose certificate the device's CA did not
// sign gets nothing, as the upload checks it.
func TestJournalUploadEndToEnd(t *testing.T) {
	journaltest.Require(t)
	uploader := testutil.NeedTool(t, "systemd-journal-remote",
		"/usr/lib/systemd/systemd-journal-upload", "/lib/systemd/systemd-journal-upload")
	unshare := testutil.NeedTool(t, "util-linux", "unshare")
	testutil.NeedTool(t, "systemd", "journalctl")
	if out, err := exec.Command(unshare, "--user", "--map-root-user", "--mount", "true").CombinedOutput(); err != nil {
		testutil.Missing(t, "unshare --user --mount: "+strings.TrimSpace(string(out))+
			" (user namespaces disabled? sysctl kernel.unprivileged_userns_clone=1)")
	}

	// The daemon's own lines, as journald stores a service's stderr.
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr)
	d.stderr.wait(t, `kvmd listening`)
	d.stop(t)
	lines := strings.Split(d.stderr.String(), "\n")
	if len(lines) < 2 {
		t.Fatalf("the daemon logged %d lines", len(lines))
	}
	jdir := t.TempDir()
	var entries []journaltest.Entry
	for _, l := range lines {
		entries = append(entries, journaltest.Entry{Unit: "kvmd.service", Message: l,
			Fields: map[string]string{"SYSLOG_IDENTIFIER": "kvmd", "_COMM": "kvmd", "_TRANSPORT": "stdout"}})
	}
	journaltest.Write(t, jdir, "system", entries)

	pki := t.TempDir()
	ca := newCA(t, pki, "fleet-ca")
	srvCrt, srvKey := ca.leaf(t, "logs", true)
	cliCrt, cliKey := ca.leaf(t, "kvm-rack1", false)
	caCrt := filepath.Join(pki, "fleet-ca.crt")

	t.Run("delivered", func(t *testing.T) {
		raddr := testutil.FreeAddr(t)
		out := filepath.Join(t.TempDir(), "remote.journal")
		rlog := startJournalRemote(t, raddr, srvCrt, srvKey, out)
		etc := deviceEtc(t, "https://"+raddr, cliCrt, cliKey, caCrt)
		if msg, err := upload(t, unshare, uploader, etc, jdir); err != nil {
			t.Fatalf("systemd-journal-upload: %v\n%s\njournal-remote:\n%s", err, msg, rlog)
		}
		var got []string
		deadline := time.Now().Add(5 * time.Second)
		for {
			if got = remoteMessages(t, out, "kvmd.service"); len(got) >= len(lines) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if strings.Join(got, "\n") != strings.Join(lines, "\n") {
			t.Errorf("journal-remote received (-want +got):\n%s\njournal-remote:\n%s", lineDiff(strings.Join(lines, "\n"), strings.Join(got, "\n")), rlog)
		}
	})

	t.Run("server not trusted", func(t *testing.T) {
		other := newCA(t, t.TempDir(), "other-ca")
		oCrt, oKey := other.leaf(t, "impostor", true)
		raddr := testutil.FreeAddr(t)
		out := filepath.Join(t.TempDir(), "remote.journal")
		// Only the device's check of the server's certificate can stop
		// the upload.
		rlog := startJournalRemote(t, raddr, oCrt, oKey, out)
		etc := deviceEtc(t, "https://"+raddr, cliCrt, cliKey, caCrt)
		msg, err := upload(t, unshare, uploader, etc, jdir)
		if err == nil {
			t.Errorf("systemd-journal-upload succeeded against a server the CA did not sign:\n%s", msg)
		}
		time.Sleep(200 * time.Millisecond)
		if got := remoteMessages(t, out, "kvmd.service"); len(got) > 0 {
			t.Errorf("the impostor received %d entries:\n%s", len(got), rlog)
		}
		t.Logf("refused as it should be: %v: %s", err, strings.TrimSpace(msg))
	})
}
