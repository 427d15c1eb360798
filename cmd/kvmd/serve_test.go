package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// proc is a kvmd serve process of the real binary.
type proc struct {
	cmd    *exec.Cmd
	stdout *lineLog
	stderr *lineLog
	done   chan error
}

// lineLog collects a stream's lines and lets a test wait for one.
type lineLog struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
	eof   chan struct{} // closed when the stream has ended
}

func newLineLog(r io.Reader) *lineLog {
	l := &lineLog{more: make(chan struct{}, 1), eof: make(chan struct{})}
	go func() {
		defer close(l.eof)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// wait returns the first submatch of re in a line, waiting up to 5 s.
func (l *lineLog) wait(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(5 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if m := rx.FindStringSubmatch(line); m != nil {
				l.mu.Unlock()
				if len(m) > 1 {
					return m[1]
				}
				return m[0]
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no line matching %q in:\n%s", re, l)
		}
	}
}

func startDaemon(t *testing.T, env []string, extra []*os.File, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(kvmdBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = extra
	// Pipes of our own, not cmd.StdoutPipe: Wait closes those as soon as
	// the process exits, losing what it wrote last (the log buffer's
	// final flush). Ours end at EOF, when the last writer has gone.
	so, sow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	se, sew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = sow, sew
	d := &proc{cmd: cmd, stdout: newLineLog(so), stderr: newLineLog(se), done: make(chan error, 1)}
	err = cmd.Start()
	sow.Close()
	sew.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { so.Close(); se.Close() })
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.done
	})
	return d
}

// stop sends SIGTERM and returns the exit error, failing after 5 s.
func (d *proc) stop(t *testing.T) error {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		// Then its output to the end (a child that outlives it and
		// holds the pipes is not waited for long).
		for _, l := range []*lineLog{d.stdout, d.stderr} {
			select {
			case <-l.eof:
			case <-time.After(2 * time.Second):
			}
		}
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("daemon did not exit within 5 s of SIGTERM")
		return nil
	}
}

func get(t *testing.T, client *http.Client, url string, hdr map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func basicAuth(user, passwd string) map[string]string {
	return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+passwd))}
}

func usersFile(t *testing.T, user, passwd string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htpasswd")
	if _, stderr, err := runKvmd(t, passwd+"\n", "user", "add", user, "--users", path); err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
	return path
}

func TestServeDemo(t *testing.T) {
	addr := testutil.FreeAddr(t)
	start := time.Now()
	d := startDaemon(t, nil, nil, "serve", "--demo", "--listen", addr)
	passwd := d.stdout.wait(t, `user admin, password (\S+)`)
	d.stderr.wait(t, `kvmd listening`)
	t.Logf("demo ready in %s", time.Since(start))
	c := &http.Client{}
	if st := get(t, c, "http://"+addr+"/api/auth/check", basicAuth("admin", passwd)); st != 200 {
		t.Errorf("demo credentials: %d", st)
	}
	if st := get(t, c, "http://"+addr+"/api/auth/check", basicAuth("admin", passwd+"x")); st != 403 {
		t.Errorf("wrong demo password: %d", st)
	}
	if !strings.Contains(d.stdout.String(), "curl -u admin:"+passwd+" http://"+addr+"/api/auth/check") {
		t.Errorf("demo does not print a working curl line:\n%s", d.stdout)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, d.stderr)
	}
	// Written on the way out, not lost in the log buffer: the access
	// line of the last request and what follows it.
	if !regexp.MustCompile(`(?s)path=/api/auth/check status=403 .*shutting down`).MatchString(d.stderr.String()) {
		t.Errorf("the last lines were not written before exit:\n%s", d.stderr)
	}
}

func TestServeConfigFile(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvmd.sock")
	cfg := filepath.Join(dir, "kvmd.yaml")
	os.WriteFile(cfg, []byte("listen:\n  - unix:"+sock+"\nusers: "+users+"\naccess-log: false\n"), 0o600)
	addr := testutil.FreeAddr(t)
	// The file's unix socket is replaced by the flag's TCP address.
	d := startDaemon(t, nil, nil, "serve", "--config", cfg, "--listen", addr)
	d.stderr.wait(t, `kvmd listening.*tcp:`+regexp.QuoteMeta(addr))
	if st := get(t, &http.Client{}, "http://"+addr+"/api/auth/check", basicAuth("admin", "pw")); st != 200 {
		t.Errorf("check: %d", st)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("the config file's socket was opened although --listen replaced it")
	}
	d.stop(t) // log lines wait in a buffer until exit at the latest
	if strings.Contains(d.stderr.String(), "path=/api/auth/check") {
		t.Error("access-log: false in the file was not honoured")
	}

	// Without the flag, the file's socket is used.
	d = startDaemon(t, nil, nil, "serve", "--config", cfg)
	d.stderr.wait(t, `kvmd listening.*unix:`+regexp.QuoteMeta(sock))
	uc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	// Not /api/auth/check: it never takes peer credentials.
	if st := get(t, uc, "http://kvmd/api/info?fields=auth", nil); st != 200 {
		t.Errorf("root over the unix socket: %d", st)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket file mode: %v %v, want 0660", fi.Mode(), err)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("exit: %v", err)
	}

	// With --unix-group the socket belongs to that group.
	d = startDaemon(t, nil, nil, "serve", "--config", cfg, "--unix-group", "nogroup")
	d.stderr.wait(t, `kvmd listening`)
	if fi, err := os.Stat(sock); err != nil {
		t.Error(err)
	} else if g, _ := user.LookupGroupId(strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Gid))); g == nil || g.Name != "nogroup" {
		t.Errorf("socket group %v, want nogroup", g)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("exit: %v", err)
	}
}

func TestServeBadSetup(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("listen: [x]\nno-such-key: 1\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no users file", []string{"serve"}, "no users file"},
		{"missing users file", []string{"serve", "--users", filepath.Join(dir, "nope")}, "no such file"},
		{"cert without key", []string{"serve", "--users", users, "--tls-cert", "x.pem"}, "go together"},
		{"unknown config key", []string{"serve", "--config", badYAML}, "no-such-key"},
		{"bad listen address", []string{"serve", "--users", users, "--listen", "not-an-address"}, "listen"},
		{"stray argument", []string{"serve", "--users", users, "extra"}, "no arguments"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := runKvmd(t, "", tt.args...)
			if err == nil || !strings.Contains(stderr, tt.want) {
				t.Errorf("err %v, stderr %q: want a failure saying %q", err, stderr, tt.want)
			}
		})
	}
}

func TestServeSystemd(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	dir := t.TempDir()
	notify := filepath.Join(dir, "notify")
	nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := nc.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	expect := func(want string) {
		t.Helper()
		deadline := time.After(3 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.Contains(m, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q from the daemon on NOTIFY_SOCKET", want)
			}
		}
	}

	// A socket made here and passed as systemd passes it: fd 3,
	// LISTEN_FDS=1 and LISTEN_PID of the daemon itself (sh execs it).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmdline := []string{"-c", `export LISTEN_PID=$$; exec "$0" "$@"`, kvmdBin, "serve", "--users", users, "--listen", "127.0.0.1:1"}
	cmd := exec.Command("sh", cmdline...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=300000", "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{f}
	errOut := &strings.Builder{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()

	expect("READY=1")
	if st := get(t, &http.Client{}, "http://"+addr+"/api/auth/check", basicAuth("admin", "pw")); st != 200 {
		t.Errorf("check on the activated socket: %d", st)
	}
	expect("WATCHDOG=1")
	expect("WATCHDOG=1")
	cmd.Process.Signal(syscall.SIGTERM)
	expect("STOPPING=1")
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Errorf("exit: %v\n%s", err, errOut)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(errOut.String(), "sockets passed by systemd") {
		t.Errorf("the daemon did not say it used the passed socket:\n%s", errOut)
	}
}
