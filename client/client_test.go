package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/client"
	"kvmd/client/clienttest"
	"kvmd/journal/journaltest"
)

// kvmdBin is the real daemon, built once by TestMain.
var kvmdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmd-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvmdBin, err = clienttest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recorder is a RoundTripper that notes what the client sent.
type recorder struct {
	rt http.RoundTripper

	// clock, when set, is read as each request is sent, into at.
	clock func() time.Time

	mu       sync.Mutex
	passwds  []string    // X-KVMD-Passwd of each request
	cookies  []string    // Cookie of each request
	at       []time.Time // clock() at each request
	statuses []int       // the daemon's answer to each, 0 for none
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.passwds = append(r.passwds, req.Header.Get("X-KVMD-Passwd"))
	r.cookies = append(r.cookies, req.Header.Get("Cookie"))
	if r.clock != nil {
		r.at = append(r.at, r.clock())
	}
	r.mu.Unlock()
	resp, err := r.rt.RoundTrip(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	r.mu.Lock()
	r.statuses = append(r.statuses, status)
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) sent() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.passwds)
}

// newClient returns a client of d whose requests rec records.
func newClient(d *clienttest.Daemon, user, passwd string) (*client.Client, *recorder) {
	rec := &recorder{rt: client.NewHTTPClient(d.URL, false).Transport}
	return &client.Client{BaseURL: d.URL, User: user, Password: passwd, HTTPClient: &http.Client{Transport: rec}}, rec
}

func apiError(t *testing.T, err error, status int, name string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *client.Error %d %s", err, err, status, name)
	}
	if e.Status != status || e.Name != name || e.Msg == "" {
		t.Fatalf("error %+v, want status %d, name %s and a message", e, status, name)
	}
	return e
}

func TestSession(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	d := clienttest.Start(t, kvmdBin, nil, "--users", users, "--demo")
	ctx := context.Background()

	c, rec := newClient(d, "admin", "s3cret")
	if err := c.Check(ctx); err != nil {
		t.Fatalf("check with the password: %v", err)
	}
	if got := rec.sent(); !slices.Equal(got, []string{"s3cret"}) {
		t.Errorf("X-KVMD-Passwd sent: %q", got)
	}
	token, err := c.Login(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) || c.Token != token {
		t.Fatalf("token %q, c.Token %q", token, c.Token)
	}

	// The session alone authenticates: no password is sent with it.
	s, rec := newClient(d, "", "")
	s.Token = token
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check with the session: %v", err)
	}
	info, err := s.Info(ctx, "auth", "node")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(info, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["auth"]) != `{"enabled":true,"totp":false}` || got["node"] == nil {
		t.Errorf("info auth,node: %s", info)
	}
	if rec.cookies[0] != "auth_token="+token || rec.passwds[0] != "" {
		t.Errorf("the session request sent cookie %q, password %q", rec.cookies[0], rec.passwds[0])
	}
	_, err = s.Info(ctx, "hw", "bogus")
	if e := apiError(t, err, 400, "ValidatorError"); !strings.Contains(e.Msg, "bogus") {
		t.Errorf("unknown category: message %q does not name it", e.Msg)
	}

	if err := s.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Token != "" {
		t.Error("Logout kept the token")
	}
	s.Token = token
	apiError(t, s.Check(ctx), 403, "ForbiddenError")
	apiError(t, s.Logout(ctx), 403, "ForbiddenError")
	if s.Token != token {
		t.Error("a failed Logout cleared the token")
	}
}

func TestErrors(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	d := clienttest.Start(t, kvmdBin, nil, "--users", users)
	ctx := context.Background()

	none, _ := newClient(d, "", "")
	apiError(t, none.Check(ctx), 401, "UnauthorizedError")

	// Without 2FA a 403 is not retried.
	c, rec := newClient(d, "admin", "wrong")
	apiError(t, c.Check(ctx), 403, "ForbiddenError")
	if n := len(rec.sent()); n != 1 {
		t.Errorf("%d attempts without 2FA, want 1", n)
	}
	_, err := c.Login(ctx)
	apiError(t, err, 403, "ForbiddenError")

	// Five failures are free, the sixth blocks the address.
	var e *client.Error
	for i := 0; i < 10; i++ {
		if err := c.Check(ctx); errors.As(err, &e) && e.Status == 429 {
			break
		}
	}
	if e == nil || e.Status != 429 || e.Name != "TooManyRequestsError" || e.RetryAfter < time.Second || e.RetryAfter > time.Minute {
		t.Errorf("after repeated failures: %+v, want a 429 with a Retry-After", e)
	}

	u, _ := newClient(&clienttest.Daemon{URL: "http://127.0.0.1:1"}, "admin", "s3cret")
	if err := u.Check(ctx); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("closed port: %v, want ErrUnreachable", err)
	}
	sock := &client.Client{BaseURL: "unix:" + filepath.Join(t.TempDir(), "none.sock")}
	if err := sock.Check(ctx); !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("missing socket: %v, want ErrUnreachable", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Check(cctx); !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrUnreachable) {
		t.Errorf("cancelled: %v, want context.Canceled and not ErrUnreachable", err)
	}
	for _, bad := range []string{"", "kvm.local", "ftp://kvm.local", "unix:", "http://h/?q=1"} {
		if client.ValidURL(bad) == nil {
			t.Errorf("ValidURL(%q) accepted it", bad)
		}
	}
}

// TestUnixSocket: over the daemon's unix socket, a trusted peer needs no
// password.
func TestUnixSocket(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	sock := filepath.Join(t.TempDir(), "kvmd.sock")
	g, err := user.LookupGroupId(fmt.Sprint(os.Getgid()))
	if err != nil {
		t.Skip(err)
	}
	clienttest.Start(t, kvmdBin, nil, "--users", users, "--listen", "unix:"+sock, "--unix-group", g.Name)
	c := &client.Client{BaseURL: "unix:" + sock}
	if err := c.Check(context.Background()); err != nil {
		t.Fatalf("peer credentials: %v", err)
	}
	c.User, c.Password = "admin", "wrong"
	apiError(t, c.Check(context.Background()), 403, "ForbiddenError")
}

func TestLog(t *testing.T) {
	journaltest.Require(t)
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	dir := t.TempDir()
	now := time.Now()
	w := journaltest.Start(t, dir, "system")
	w.Append(
		journaltest.Entry{Time: now.Add(-2 * time.Hour), Unit: "kvmd.service", Message: "two hours ago"},
		journaltest.Entry{Time: now.Add(-30 * time.Second), Unit: "kvmd.service", Message: "half a minute ago"},
	)
	w.Sync()
	d := clienttest.Start(t, kvmdBin, []string{"TZ=UTC"}, "--users", users, "--journal-dir", dir)
	c, _ := newClient(d, "admin", "s3cret")
	ctx := context.Background()

	read := func(seek int) string {
		t.Helper()
		body, err := c.Log(ctx, seek, false)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	stamp := func(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05") }
	recent := "[" + stamp(now.Add(-30*time.Second)) + " kvmd.service] --- half a minute ago\r\n"
	if got, want := read(0), "["+stamp(now.Add(-2*time.Hour))+" kvmd.service] --- two hours ago\r\n"+recent; got != want {
		t.Errorf("whole boot:\n%q\nwant\n%q", got, want)
	}
	if got := read(60); got != recent {
		t.Errorf("seek 60:\n%q\nwant\n%q", got, recent)
	}
	if _, err := c.Log(ctx, -1, false); err == nil {
		t.Error("negative seek accepted")
	}
	bad, _ := newClient(d, "admin", "wrong")
	if _, err := bad.Log(ctx, 0, false); err == nil {
		t.Error("log with a wrong password")
	} else {
		apiError(t, err, 403, "ForbiddenError")
	}

	// Follow: an entry appended now arrives; cancelling ends the stream.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, err := c.Log(fctx, 60, true)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	br := bufio.NewReader(body)
	if l, err := br.ReadString('\n'); l != recent {
		t.Fatalf("follow began with %q, %v", l, err)
	}
	lines := make(chan string)
	go func() {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "written while following"})
	select {
	case l := <-lines:
		if !strings.HasSuffix(l, " kvmd.service] --- written while following\r\n") {
			t.Errorf("followed line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the appended line did not arrive within 5 s")
	}
	cancel()
	select {
	case l, ok := <-lines:
		if ok {
			t.Errorf("after cancel: line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end within 5 s of cancelling")
	}
}
