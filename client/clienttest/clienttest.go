// Package clienttest runs the real kvmd daemon for the tests of its
// clients (package client, kvmctl): it builds the binary once, makes a
// users file with `kvmd user add` and a 2FA secret file, and starts
// `kvmd serve` on a free loopback port.
package clienttest

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// Build builds kvmd (CGO_ENABLED=0, as shipped, plus --demo: -tags demo)
// into dir and returns the binary's path. Call it once from TestMain.
func Build(dir string) (string, error) {
	return BuildPackage(dir, "kvmd/cmd/kvmd", "kvmd", "-tags", "demo")
}

// BuildPackage builds the main package pkg of module kvmd into dir/name,
// with flags given to go build. It builds in kvmd's own module, whichever
// module the test is in: the tools module's tests get kvmd built with
// kvmd's go.mod, as it ships, not with the tools module's requirements.
func BuildPackage(dir, pkg, name string, flags ...string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "kvmd").Output()
	if err != nil {
		return "", fmt.Errorf("finding module kvmd: %w", err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, pkg)...)
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// Users writes a users file with one user through `kvmd user add` (which
// reads the password from stdin) and returns its path.
func Users(t testing.TB, bin, user, passwd string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htpasswd")
	cmd := exec.Command(bin, "user", "add", user, "--users", path)
	cmd.Stdin = strings.NewReader(passwd + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kvmd user add: %v\n%s", err, out)
	}
	return path
}

// TOTPSecret writes a new random 2FA secret file (160 bits, base32, one
// line, as `kvmd totp init` writes) and returns its path and the secret.
func TOTPSecret(t testing.TB) (path, secret string) {
	t.Helper()
	raw := make([]byte, 20)
	rand.Read(raw)
	secret = base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw)
	path = filepath.Join(t.TempDir(), "totp.secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, secret
}

// Daemon is a running `kvmd serve`.
type Daemon struct {
	Addr   string // host:port of its TCP listener
	URL    string // http://Addr
	Stderr *testutil.SyncBuffer
	Stdout *testutil.SyncBuffer

	cmd  *exec.Cmd
	done chan error
}

// Start runs `kvmd serve --listen ADDR args...` with a free loopback ADDR
// and waits until it listens (10 s at most). env is added to the
// process's environment. The daemon is killed when the test ends.
func Start(t testing.TB, bin string, env []string, args ...string) *Daemon {
	t.Helper()
	d := &Daemon{Addr: testutil.FreeAddr(t), Stderr: &testutil.SyncBuffer{}, Stdout: &testutil.SyncBuffer{}, done: make(chan error, 1)}
	d.URL = "http://" + d.Addr
	d.cmd = exec.Command(bin, append([]string{"serve", "--listen", d.Addr}, args...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.Stdout, d.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("kvmd stderr:\n%s", d.Stderr)
		}
	})
	d.WaitLog(t, `kvmd listening`, 10*time.Second)
	return d
}

// Stop sends SIGTERM and returns how the daemon exited, failing the test
// if it is still running 5 s later.
func (d *Daemon) Stop(t testing.TB) error {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("kvmd did not exit within 5 s of SIGTERM")
		return nil
	}
}

// WaitLog waits until the daemon's stderr has a line matching re, failing
// the test after timeout or when the daemon exits.
func (d *Daemon) WaitLog(t testing.TB, re string, timeout time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for !rx.MatchString(d.Stderr.String()) {
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("kvmd exited (%v) before logging %q:\n%s", err, re, d.Stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kvmd did not log %q within %s:\n%s", re, timeout, d.Stderr)
		}
	}
}
