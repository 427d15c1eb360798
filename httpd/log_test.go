package httpd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLog writes numbered lines, then with follow one more every 10 ms.
type fakeLog struct {
	open   atomic.Int32
	closed atomic.Int32
	err    error
	got    chan [2]any // seek, follow
}

func (f *fakeLog) Open(ctx context.Context, seek time.Duration, follow bool) (LogStream, error) {
	if f.got != nil {
		f.got <- [2]any{seek, follow}
	}
	if f.err != nil {
		return nil, f.err
	}
	f.open.Add(1)
	return &fakeStream{f: f, follow: follow}, nil
}

type fakeStream struct {
	f      *fakeLog
	follow bool
}

func (s *fakeStream) Stream(ctx context.Context, w io.Writer, flush func() error, setDeadline func(time.Time) error) error {
	for i := 0; ; i++ {
		if i == 3 && !s.follow {
			return nil
		}
		setDeadline(time.Now().Add(time.Second))
		if _, err := fmt.Fprintf(w, "[2026-11-21 12:00:0%d kvmd.service] --- line %d\r\n", i%10, i); err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *fakeStream) Close() error { s.f.closed.Add(1); return nil }

func TestLogParams(t *testing.T) {
	f := &fakeLog{got: make(chan [2]any, 10)}
	e := newEnv(t, envOpts{log: f})
	auth := xhdr("admin", "admin-pass")
	for _, tt := range []struct {
		q      string
		status int
		seek   time.Duration
		follow bool
	}{
		{"", 200, 0, false},
		{"seek=0", 200, 0, false},
		{"seek=3600&follow=0", 200, time.Hour, false},
		{"seek=99999999999999", 200, maxSeek * time.Second, false},
		{"seek=-1", 400, 0, false},
		{"seek=1.5", 400, 0, false},
		{"seek=abc", 400, 0, false},
		{"follow=maybe", 400, 0, false},
		{"follow=2", 400, 0, false},
	} {
		if tt.status == 400 {
			r := e.req("GET", "/api/log?"+tt.q, auth, "")
			if r.status != 400 || r.errName != "ValidatorError" {
				t.Errorf("%s: %d %s, want 400 ValidatorError before any log byte", tt.q, r.status, r.errName)
			}
			continue
		}
		resp := e.get(t, "/api/log?"+tt.q, auth)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.HasSuffix(string(body), "line 2\r\n") {
			t.Errorf("%s: %d %q %q", tt.q, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if got := <-f.got; got[0] != tt.seek || got[1] != tt.follow {
			t.Errorf("%s: opened with %v, want seek %v follow %v", tt.q, got, tt.seek, tt.follow)
		}
	}
	if r := e.req("GET", "/api/log", nil, ""); r.status != 401 {
		t.Errorf("unauthenticated: %d", r.status)
	}
}

func TestLogUnavailable(t *testing.T) {
	e := newEnv(t, envOpts{log: &fakeLog{err: Unavailable("The journal cannot be read: no journalctl", nil)}})
	r := e.req("GET", "/api/log", xhdr("admin", "admin-pass"), "")
	if r.status != 503 || r.errName != "UnavailableError" || !strings.Contains(r.errMsg, "no journalctl") {
		t.Errorf("%d %s %q, want 503 UnavailableError with the reason", r.status, r.errName, r.errMsg)
	}
	e = newEnv(t, envOpts{})
	if r := e.req("GET", "/api/log", xhdr("admin", "admin-pass"), ""); r.status != 400 || r.errName != "LogReaderDisabledError" {
		t.Errorf("no log source: %d %s, want kvmd's 400 LogReaderDisabledError", r.status, r.errName)
	}
}

func TestLogFollowEnds(t *testing.T) {
	f := &fakeLog{}
	e := newEnv(t, envOpts{log: f})
	// The client goes away: the stream is closed at once.
	resp := e.get(t, "/api/log?follow=1", xhdr("admin", "admin-pass"))
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 5; i++ {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	eventually(t, "stream closed after the client left", func() bool { return f.closed.Load() == 1 })

	// The server shuts down: a follower is ended, not waited for.
	resp = e.get(t, "/api/log?follow=1", xhdr("admin", "admin-pass"))
	defer resp.Body.Close()
	br = bufio.NewReader(resp.Body)
	br.ReadString('\n')
	start := time.Now()
	e.shutdown()
	if _, err := io.Copy(io.Discard, br); err != nil && !strings.Contains(err.Error(), "unexpected EOF") {
		t.Logf("body after shutdown: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("follow ended %s after shutdown began", d)
	}
	eventually(t, "stream closed at shutdown", func() bool { return f.closed.Load() == 2 })
}

// get sends a GET and returns the response unread.
func (e *env) get(t *testing.T, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
