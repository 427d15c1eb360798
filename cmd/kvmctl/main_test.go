package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kvmd/client/clienttest"
	"kvmd/internal/testutil"
)

// The tests run the real kvmctl against the real daemon, both built once
// by TestMain.
var kvmdBin, kvmctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvmdBin, err = clienttest.Build(dir)
	if err == nil {
		kvmctlBin, err = clienttest.BuildPackage(dir, "kvmd/cmd/kvmctl", "kvmctl")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// home is one user of kvmctl: a home directory of their own, and the
// environment kvmctl runs with (nothing of the test's own, but PATH).
type home struct {
	t   *testing.T
	dir string
	env map[string]string
}

func newHome(t *testing.T) *home {
	dir := t.TempDir()
	return &home{t: t, dir: dir, env: map[string]string{
		"HOME":            dir,
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"XDG_STATE_HOME":  filepath.Join(dir, "state"),
		"PATH":            os.Getenv("PATH"),
	}}
}

// with returns a copy of h's environment with vars ("K=V", or "K" to
// remove K) applied.
func (h *home) with(vars ...string) *home {
	c := &home{t: h.t, dir: h.dir, env: map[string]string{}}
	for k, v := range h.env {
		c.env[k] = v
	}
	for _, kv := range vars {
		if k, v, ok := strings.Cut(kv, "="); ok {
			c.env[k] = v
		} else {
			delete(c.env, kv)
		}
	}
	return c
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func (h *home) command(args ...string) *exec.Cmd {
	cmd := exec.Command(kvmctlBin, args...)
	for k, v := range h.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// run runs kvmctl to its end (30 s at most).
func (h *home) run(args ...string) result {
	h.t.Helper()
	cmd := h.command(args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		h.t.Fatalf("kvmctl %q did not end within 30 s", args)
	}
	r := result{stdout: o.String(), stderr: e.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// must runs kvmctl and fails the test unless it exits with code.
func (h *home) must(code int, args ...string) result {
	h.t.Helper()
	r := h.run(args...)
	if r.code != code {
		h.t.Fatalf("kvmctl %q: want exit %d, got %s", args, code, r)
	}
	return r
}

func (h *home) sessionsFile() string { return filepath.Join(h.dir, "state", "kvmctl", "sessions.json") }

// sessions reads the stored sessions.
func (h *home) sessions() map[string]session {
	h.t.Helper()
	data, err := os.ReadFile(h.sessionsFile())
	if err != nil {
		h.t.Fatal(err)
	}
	m := map[string]session{}
	if err := json.Unmarshal(data, &m); err != nil {
		h.t.Fatalf("sessions file: %v\n%s", err, data)
	}
	return m
}

// setToken replaces the token stored for url.
func (h *home) setToken(url, token string) {
	h.t.Helper()
	m := h.sessions()
	s := m[url]
	s.Token = token
	m[url] = s
	data, _ := json.Marshal(m)
	if err := os.WriteFile(h.sessionsFile(), data, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string, perm os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// closedURL is a URL nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (cert, key string) {
	return testutil.WriteCertPEM(t, t.TempDir(), testutil.SelfSigned(t))
}

var tokenPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
