package firstboot

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/internal/testutil"
)

// fbDirs is a device's tree for firstboot in a temporary directory.
type fbDirs struct {
	root, etc, state, issue string
}

func newFBDirs(t *testing.T) fbDirs {
	root := t.TempDir()
	return fbDirs{
		root:  root,
		etc:   filepath.Join(root, "etc", "kvmd"),
		state: filepath.Join(root, "var", "lib", "kvmd"),
		issue: filepath.Join(root, "etc", "issue.d", "kvmd.issue"),
	}
}

// config is the Config for the tree, with the daemon's group.
func (d fbDirs) config(group string) Config {
	return Config{Etc: d.etc, State: d.state, Issue: d.issue, Hostname: "kvm-test", Group: group}
}

// run runs firstboot on the tree.
func (d fbDirs) run(group string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = Run(d.config(group), &o, &e)
	return o.String(), e.String(), err
}

// firstbootGroup is a group other than the caller's own that the test may
// give files to: root can give them to any.
func firstbootGroup(t *testing.T) (name string, gid uint32) {
	t.Helper()
	name = "nogroup"
	if os.Geteuid() != 0 {
		g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
		if err != nil {
			t.Fatal(err)
		}
		name = g.Name
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.Atoi(g.Gid)
	return name, uint32(id)
}

func runFirstboot(t *testing.T, d fbDirs, group string) string {
	t.Helper()
	stdout, stderr, err := d.run(group)
	if err != nil {
		t.Fatalf("firstboot: %v\n%s%s", err, stdout, stderr)
	}
	return stdout
}

// fileState is what a second run must not change.
type fileState struct {
	mode  fs.FileMode
	gid   uint32
	mtime time.Time
	data  string
}

// snapshot records every file and directory under root.
func snapshot(t *testing.T, root string) map[string]fileState {
	t.Helper()
	snap := map[string]fileState{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), gid: fi.Sys().(*syscall.Stat_t).Gid, mtime: fi.ModTime()}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			st.data = string(data)
		}
		snap[strings.TrimPrefix(path, root)] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnapshots(before, after map[string]fileState) []string {
	var diffs []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			diffs = append(diffs, "removed "+p)
		case a != b:
			diffs = append(diffs, fmt.Sprintf("changed %s: %+v -> %+v", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// says reports whether firstboot's output has a line "verb path ...".
func says(out, verb, path string) bool {
	return regexp.MustCompile(`(?m)^` + verb + ` ` + regexp.QuoteMeta(path) + `( |$)`).MatchString(out)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func checkOwnership(t *testing.T, path string, perm fs.FileMode, gid uint32) {
	t.Helper()
	checkMode(t, path, perm)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Sys().(*syscall.Stat_t).Gid; got != gid {
		t.Errorf("group of %s = %d, want %d", path, got, gid)
	}
}

func TestFresh(t *testing.T) {
	d := newFBDirs(t)
	group, gid := firstbootGroup(t)
	out := runFirstboot(t, d, group)
	p := func(dir, name string) string { return filepath.Join(dir, name) }

	// Modes: the secrets the daemon reads are its group's; the rest are
	// root's alone or public.
	ownGID := uint32(os.Getegid())
	for _, f := range []struct {
		path string
		perm fs.FileMode
		gid  uint32
	}{
		{p(d.etc, "htpasswd"), 0o640, gid},
		{p(d.etc, "totp.secret"), 0o640, gid},
		{p(d.etc, "tls.key"), 0o640, gid},
		{p(d.etc, "tls.crt"), 0o644, ownGID},
		{p(d.etc, "kvmd.yaml"), 0o644, ownGID},
		{p(d.state, "admin-password"), 0o600, ownGID},
		{p(d.state, "secret"), 0o600, ownGID},
		{d.issue, 0o600, ownGID},
		{d.state, stateMode(), stateGID(gid)},
		{d.etc, 0o775, gid}, // the daemon writes here
	} {
		checkOwnership(t, f.path, f.perm, f.gid)
		if f.path != d.state && f.path != d.etc && !says(out, "created", f.path) {
			t.Errorf("output does not say %s was created:\n%s", f.path, out)
		}
	}
	if s := readFile(t, p(d.etc, "totp.secret")); s != "" {
		t.Errorf("totp.secret = %q, want empty (2FA off)", s)
	}
	if s := readFile(t, p(d.state, "secret")); !regexp.MustCompile(`^[0-9a-f]{64}\n$`).MatchString(s) {
		t.Errorf("secret = %q, want 32 bytes in hex", s)
	}

	// The stored password opens the admin account; the banner shows it.
	passwd := strings.TrimSuffix(readFile(t, p(d.state, "admin-password")), "\n")
	if !regexp.MustCompile(`^[` + passwdAlphabet + `]{16}$`).MatchString(passwd) {
		t.Errorf("admin password %q: want 16 characters of %s", passwd, passwdAlphabet)
	}
	checkPasswd(t, p(d.etc, "htpasswd"), "admin", passwd)
	if strings.Contains(out, passwd) {
		t.Error("the password is in the output, which goes to the journal")
	}
	banner := readFile(t, d.issue)
	for _, want := range []string{passwd, `https://\4/`, "kvmd user set admin --users " + p(d.etc, "htpasswd"), p(d.state, "admin-password")} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}

	checkCert(t, p(d.etc, "tls.crt"), p(d.etc, "tls.key"), "kvm-test")

	// A second run changes nothing, not even a modification time.
	before := snapshot(t, d.root)
	out = runFirstboot(t, d, group)
	if diffs := diffSnapshots(before, snapshot(t, d.root)); len(diffs) > 0 {
		t.Errorf("a second run changed files:\n%s", strings.Join(diffs, "\n"))
	}
	if !strings.Contains(out, "nothing changed") || strings.Contains(out, "created") {
		t.Errorf("second run's output: %q", out)
	}

	t.Run("agetty shows it", func(t *testing.T) {
		// agetty renders the issue.d directory, escapes expanded, to a
		// terminal: script(1) gives it one.
		testutil.NeedTool(t, "util-linux", "agetty")
		testutil.NeedTool(t, "bsdutils", "script")
		out, err := exec.Command("script", "-qec", "agetty --show-issue --issue-file "+filepath.Dir(d.issue), "/dev/null").CombinedOutput()
		if err != nil {
			t.Fatalf("agetty: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "password "+passwd) || !regexp.MustCompile(`https://\d+\.\d+\.\d+\.\d+/`).Match(out) {
			t.Errorf("agetty shows no password or no IPv4 address:\n%s", out)
		}
	})
}

// checkCert checks the certificate and key firstboot made for host.
func checkCert(t *testing.T, certPath, keyPath, host string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", cert.PublicKey)
	}
	for _, name := range []string{host, host + ".local", "localhost"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Error(err)
		}
	}
	want := []string{"127.0.0.1", "::1"}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			want = append(want, n.IP.String())
		}
	}
	for _, ip := range want {
		if err := cert.VerifyHostname(ip); err != nil {
			t.Error(err)
		}
	}
	if err := cert.VerifyHostname("other.example"); err == nil {
		t.Error("the certificate is valid for any name")
	}
	if years := time.Until(cert.NotAfter).Hours() / 24 / 365; years < 9.9 || years > 10.1 {
		t.Errorf("valid until %s: want 10 years", cert.NotAfter)
	}
	if !cert.NotBefore.Before(time.Now()) {
		t.Errorf("not valid before %s", cert.NotBefore)
	}
	// A leaf, not a CA: trusting it lets the device's key vouch for this
	// device only.
	if cert.IsCA {
		t.Error("the certificate is a CA")
	}
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("extended key usage %v, want server auth", cert.ExtKeyUsage)
	}
}

func ecKeyPEM(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// TestKeepsExisting runs firstboot with some files already there:
// they stay as they are, byte for byte and modification time, and the
// missing ones are made.
func TestKeepsExisting(t *testing.T) {
	bobHash, err := auth.NewHash("bobs password")
	if err != nil {
		t.Fatal(err)
	}
	const stored = "ABCDEFGHJKLMNPQR"
	tests := []struct {
		name    string
		pre     map[string]string // under root: etc/kvmd/..., var/lib/kvmd/...
		changed string            // the one file of pre that is meant to change
		wantErr string
		check   func(t *testing.T, d fbDirs)
	}{
		{
			name: "users file with a user",
			pre:  map[string]string{"etc/kvmd/htpasswd": "# mine\nbob:" + bobHash + "\n"},
			check: func(t *testing.T, d fbDirs) {
				for _, p := range []string{filepath.Join(d.state, "admin-password"), d.issue} {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("%s made although the users file has a user", p)
					}
				}
			},
		},
		{
			name:    "users file with comments only",
			pre:     map[string]string{"etc/kvmd/htpasswd": "# no one yet\n"},
			changed: "etc/kvmd/htpasswd",
			check: func(t *testing.T, d fbDirs) {
				f := readFile(t, filepath.Join(d.etc, "htpasswd"))
				if !strings.HasPrefix(f, "# no one yet\nadmin:") {
					t.Errorf("users file %q: want the comment kept and admin added", f)
				}
			},
		},
		{
			name: "password stored by an interrupted run",
			pre:  map[string]string{"var/lib/kvmd/admin-password": stored + "\n"},
			check: func(t *testing.T, d fbDirs) {
				checkPasswd(t, filepath.Join(d.etc, "htpasswd"), "admin", stored)
				if !strings.Contains(readFile(t, d.issue), stored) {
					t.Error("the banner does not show the stored password")
				}
			},
		},
		{
			name:    "unusable stored password",
			pre:     map[string]string{"var/lib/kvmd/admin-password": "\n"},
			wantErr: "holds no usable password",
			check: func(t *testing.T, d fbDirs) {
				if _, err := os.Stat(filepath.Join(d.etc, "htpasswd")); err == nil {
					t.Error("a users file was made without a usable password")
				}
			},
		},
		{
			name: "config, secrets and other files",
			pre: map[string]string{
				"etc/kvmd/kvmd.yaml":       "users: /somewhere/else\n",
				"etc/kvmd/totp.secret":     "JBSWY3DPEHPK3PXP\n",
				"var/lib/kvmd/secret":      "mine\n",
				"etc/issue.d/other.issue":  "hello\n",
				"etc/kvmd/meta.yaml":       "server: {host: x}\n",
				"var/lib/kvmd/unrelated":   "x",
				"etc/kvmd/htpasswd.backup": "x",
			},
		},
		{
			name: "certificate and key",
			pre:  map[string]string{"etc/kvmd/tls.crt": "my cert\n", "etc/kvmd/tls.key": "my key\n"},
		},
		{
			name: "key without certificate",
			pre:  map[string]string{"etc/kvmd/tls.key": ecKeyPEM(t)},
			check: func(t *testing.T, d fbDirs) {
				checkCert(t, filepath.Join(d.etc, "tls.crt"), filepath.Join(d.etc, "tls.key"), "kvm-test")
			},
		},
		{
			name:    "certificate without key",
			pre:     map[string]string{"etc/kvmd/tls.crt": "my cert\n"},
			wantErr: "exists without its key",
			check: func(t *testing.T, d fbDirs) {
				if _, err := os.Stat(filepath.Join(d.etc, "tls.key")); err == nil {
					t.Error("a key was made for someone else's certificate")
				}
				// The other steps ran.
				checkMode(t, filepath.Join(d.etc, "htpasswd"), 0o600)
			},
		},
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFBDirs(t)
			for rel, data := range tt.pre {
				path := filepath.Join(d.root, rel)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(path, old, old); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, d.root)
			stdout, stderr, err := d.run("")
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("firstboot: %v\n%s", err, stderr)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("firstboot: err %v, stderr %q: want a failure saying %q", err, stderr, tt.wantErr)
			}
			after := snapshot(t, d.root)
			for rel := range tt.pre {
				if rel == tt.changed {
					continue
				}
				p := "/" + rel
				if before[p] != after[p] {
					t.Errorf("%s changed: %+v -> %+v", rel, before[p], after[p])
				}
				if says(stdout, "created", filepath.Join(d.root, rel)) {
					t.Errorf("output names %s, which existed:\n%s", rel, stdout)
				}
			}
			for _, name := range []string{"kvmd.yaml", "totp.secret", "htpasswd", "tls.crt"} {
				if _, ok := after["/etc/kvmd/"+name]; !ok && tt.wantErr == "" {
					t.Errorf("etc/kvmd/%s was not made", name)
				}
			}
			if tt.check != nil {
				tt.check(t, d)
			}
		})
	}
}

// TestChangedPassword: once the admin changes the generated
// password, the banner showing it goes at the next run, and only a banner
// as firstboot wrote it.
func TestChangedPassword(t *testing.T) {
	d := newFBDirs(t)
	runFirstboot(t, d, "")
	users := filepath.Join(d.etc, "htpasswd")
	// As kvmd user set admin does.
	hash, err := auth.NewHash("a new password")
	if err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(users, auth.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Edit(nil, func(e *auth.Edit) error { e.Users.Set("admin", hash); return nil }); err != nil {
		t.Fatalf("user set: %v", err)
	}
	out := runFirstboot(t, d, "")
	if _, err := os.Stat(d.issue); err == nil {
		t.Error("the banner still shows the generated password after it was changed")
	}
	if !says(out, "removed", d.issue+":") {
		t.Errorf("output: %q", out)
	}
	checkPasswd(t, users, "admin", "a new password")
	if out := runFirstboot(t, d, ""); !strings.Contains(out, "nothing changed") {
		t.Errorf("third run: %q", out)
	}

	// The admin's own banner stays.
	if err := os.WriteFile(d.issue, []byte("my banner\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runFirstboot(t, d, "")
	if got := readFile(t, d.issue); got != "my banner\n" {
		t.Errorf("the admin's banner was changed to %q", got)
	}
}

func TestNewPassword(t *testing.T) {
	seen := map[rune]bool{}
	for range 1000 {
		p := newPassword()
		if len(p) != passwdLen {
			t.Fatalf("%q: length %d", p, len(p))
		}
		for _, c := range p {
			if !strings.ContainsRune(passwdAlphabet, c) {
				t.Fatalf("%q has %q, outside the alphabet", p, c)
			}
			seen[c] = true
		}
	}
	if len(seen) != len(passwdAlphabet) {
		t.Errorf("1000 passwords use %d of the %d symbols", len(seen), len(passwdAlphabet))
	}
	if strings.ContainsAny(passwdAlphabet, "01IO") || len(passwdAlphabet) != 32 {
		t.Errorf("alphabet %q: want 32 symbols, none of 0 1 I O", passwdAlphabet)
	}
}

// checkPasswd fails unless user's entry in the users file verifies passwd
// and not a near miss.
func checkPasswd(t *testing.T, path, user, passwd string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := auth.ParseHtpasswd(data)
	text, ok := f.Lookup(user)
	if !ok {
		t.Fatalf("no user %q in %q", user, data)
	}
	h, err := auth.ParseHash(text)
	if err != nil {
		t.Fatalf("hash of %s: %v", user, err)
	}
	if !h.Verify(passwd) {
		t.Errorf("password of %s does not verify", user)
	}
	if h.Verify(passwd + "x") {
		t.Errorf("a wrong password of %s verifies", user)
	}
}

// stateMode and stateGID are STATE's: root:kvmd 0710 when firstboot runs
// as root (the daemon passes through to STATE/msd), else as made.
func stateMode() fs.FileMode {
	if os.Geteuid() == 0 {
		return 0o710
	}
	return 0o700
}

func stateGID(gid uint32) uint32 {
	if os.Geteuid() == 0 {
		return gid
	}
	return uint32(os.Getegid())
}

// TestMSDDir: as root, firstboot makes the image storage STATE/msd
// root:kvmd 0770, and puts an existing one (a partition mounted there)
// right, once.
func TestMSDDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root gives a directory to a group")
	}
	d := newFBDirs(t)
	group, gid := firstbootGroup(t)
	out := runFirstboot(t, d, group)
	dir := filepath.Join(d.state, "msd")
	checkOwnership(t, dir, 0o770, gid)
	if !says(out, "created", dir) {
		t.Errorf("output does not say %s was created:\n%s", dir, out)
	}
	os.WriteFile(filepath.Join(dir, "image.iso"), []byte("x"), 0o600)
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out = runFirstboot(t, d, group)
	checkOwnership(t, dir, 0o770, gid)
	if !says(out, "changed", dir) {
		t.Errorf("output does not say %s was changed:\n%s", dir, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "image.iso")); err != nil {
		t.Errorf("the image in it: %v", err)
	}
	if out := runFirstboot(t, d, group); !strings.Contains(out, "nothing changed") {
		t.Errorf("third run's output: %q", out)
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("mode of %s = %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// TestRepairsOwners: a device whose kvmd.service had StateDirectory=
// (systemd gave /var/lib/kvmd and its files to the daemon's user) and
// whose /etc/kvmd is root's alone gets both put right, once.
func TestRepairsOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give files away and take them back")
	}
	d := newFBDirs(t)
	group, gid := firstbootGroup(t)
	runFirstboot(t, d, group)

	const nobody = 65534
	pw, secret := filepath.Join(d.state, "admin-password"), filepath.Join(d.state, "secret")
	for _, p := range []string{d.state, pw, secret} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d.state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pw, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d.etc, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.etc, 0o755); err != nil {
		t.Fatal(err)
	}

	out := runFirstboot(t, d, group)
	for _, f := range []struct {
		path string
		perm fs.FileMode
		gid  uint32
	}{{d.state, 0o710, gid}, {pw, 0o600, 0}, {secret, 0o600, 0}, {d.etc, 0o775, gid}} {
		checkOwnership(t, f.path, f.perm, f.gid)
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 {
			t.Errorf("owner of %s = %d, want root", f.path, uid)
		}
		if !says(out, "changed", f.path) {
			t.Errorf("output does not say %s was changed:\n%s", f.path, out)
		}
	}
	if out := runFirstboot(t, d, group); !strings.Contains(out, "nothing changed") {
		t.Errorf("third run's output: %q", out)
	}
}
