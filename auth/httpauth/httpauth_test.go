package httpauth

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/auth/backend"
)

const secret = "s3cr3t-t0ken"

// service is a fake authentication service: one user, alice, password
// "right". It checks the request as the package promises to send it.
type service struct {
	calls atomic.Int32
	bad   atomic.Value // string: what was wrong with the last request
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	fail := func(why string) {
		s.bad.Store(why)
		http.Error(w, why, http.StatusBadRequest)
	}
	if r.Method != http.MethodPost {
		fail("method " + r.Method)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+secret {
		fail("Authorization " + got)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		fail("Content-Type " + ct)
		return
	}
	var body map[string]any
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&body); err != nil || len(body) != 2 {
		fail("body is not {user, passwd}")
		return
	}
	user, _ := body["user"].(string)
	passwd, _ := body["passwd"].(string)
	switch {
	case user == "alice" && passwd == "right":
		io.WriteString(w, `{"ok":true}`)
	case user == "alice":
		http.Error(w, `{"ok":false}`, http.StatusForbidden)
	default:
		http.Error(w, `{"error":"no such user"}`, http.StatusUnauthorized)
	}
}

func writeSecret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newBackend(t *testing.T, cfg Config) *Backend {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s: %v, want nil", what, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("%s: %v, want %v", what, err, want)
	}
	if err != nil && strings.Contains(err.Error(), "right") {
		t.Errorf("%s: the error %q shows the password", what, err)
	}
}

func TestVerify(t *testing.T) {
	svc := &service{}
	plain := httptest.NewServer(svc)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(svc)
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o644)

	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"http, secret file", Config{URL: plain.URL + "/auth", SecretFile: writeSecret(t)}},
		{"https, CA file", Config{URL: tlsSrv.URL + "/auth", Secret: []byte(" " + secret + "\n"), CAFile: ca}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, tc.cfg)
			ctx := context.Background()
			for _, c := range []struct {
				user, passwd string
				want         error
			}{
				{"alice", "right", nil},
				{"alice", "wrong", backend.ErrRejected},
				{"bob", "right", backend.ErrRejected},
				{"alice", `"right","user":"x`, backend.ErrRejected}, // JSON-escaped, not injected
			} {
				wantErr(t, c.user+"/"+c.passwd, b.Verify(ctx, c.user, c.passwd), c.want)
			}
			if bad := svc.bad.Load(); bad != nil {
				t.Errorf("the service saw a bad request: %s", bad)
			}
		})
	}

	// The system's roots do not know the test server's certificate.
	b := newBackend(t, Config{URL: tlsSrv.URL, Secret: []byte(secret)})
	wantErr(t, "https without the CA", b.Verify(context.Background(), "alice", "right"), backend.ErrUnavailable)
}

func TestVerifyStatuses(t *testing.T) {
	status := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
		io.WriteString(w, strings.Repeat("x", 100<<10)) // more than is drained
	}))
	defer srv.Close()
	b := newBackend(t, Config{URL: srv.URL, Secret: []byte(secret)})
	for code, want := range map[int]error{
		200: nil, 204: backend.ErrUnavailable,
		400: backend.ErrRejected, 401: backend.ErrRejected, 403: backend.ErrRejected, 404: backend.ErrRejected,
		408: backend.ErrUnavailable, 429: backend.ErrUnavailable,
		500: backend.ErrUnavailable, 502: backend.ErrUnavailable, 503: backend.ErrUnavailable,
	} {
		status.Store(int32(code))
		wantErr(t, http.StatusText(code), b.Verify(context.Background(), "alice", "right"), want)
	}
}

func TestVerifyRedirectNotFollowed(t *testing.T) {
	var followed atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed.Add(1)
	}))
	defer target.Close()
	for _, code := range []int{301, 302, 307, 308} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, code)
		}))
		b := newBackend(t, Config{URL: srv.URL, Secret: []byte(secret)})
		wantErr(t, "redirect", b.Verify(context.Background(), "alice", "right"), backend.ErrUnavailable)
		srv.Close()
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("redirect followed %d times", n)
	}
}

func TestVerifySlow(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	const timeout = 200 * time.Millisecond
	b := newBackend(t, Config{URL: srv.URL, Secret: []byte(secret), Timeout: timeout})

	start := time.Now()
	err := b.Verify(context.Background(), "alice", "right")
	took := time.Since(start)
	wantErr(t, "slow service", err, backend.ErrUnavailable)
	if took < timeout || took > timeout+300*time.Millisecond {
		t.Errorf("slow service answered after %s, want about %s", took, timeout)
	}

	// The caller's context ends it sooner.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start = time.Now()
	wantErr(t, "caller's deadline", b.Verify(ctx, "alice", "right"), backend.ErrUnavailable)
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Errorf("the caller's 50ms deadline took %s", took)
	}
}

func TestVerifyConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b := newBackend(t, Config{URL: "http://" + addr + "/auth", Secret: []byte(secret), Timeout: time.Second})
	start := time.Now()
	wantErr(t, "refused", b.Verify(context.Background(), "alice", "right"), backend.ErrUnavailable)
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("a refused connection took %s", took)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	notPEM := filepath.Join(dir, "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no URL", Config{Secret: []byte(secret)}, "not an absolute"},
		{"relative URL", Config{URL: "/auth", Secret: []byte(secret)}, "not an absolute"},
		{"ftp", Config{URL: "ftp://auth.example.com/", Secret: []byte(secret)}, "scheme"},
		{"plain http to another host", Config{URL: "http://auth.example.com/", Secret: []byte(secret)}, "loopback"},
		{"user info", Config{URL: "https://u:p@auth.example.com/", Secret: []byte(secret)}, "user information"},
		{"no secret", Config{URL: "https://auth.example.com/"}, "no shared secret"},
		{"empty secret file", Config{URL: "https://auth.example.com/", SecretFile: empty}, "no shared secret"},
		{"missing secret file", Config{URL: "https://auth.example.com/", SecretFile: filepath.Join(dir, "nope")}, "no such file"},
		{"two words", Config{URL: "https://auth.example.com/", Secret: []byte("a b")}, "one word"},
		{"CA not PEM", Config{URL: "https://auth.example.com/", Secret: []byte(secret), CAFile: notPEM}, "no PEM"},
		{"negative timeout", Config{URL: "https://auth.example.com/", Secret: []byte(secret), Timeout: -1}, "negative"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("%s: the error shows the URL's password: %v", tc.name, err)
		}
	}
	for _, u := range []string{"http://localhost:1/", "http://127.0.0.1/", "http://[::1]:8/x", "https://auth.example.com/check"} {
		if _, err := New(Config{URL: u, Secret: []byte(secret)}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
