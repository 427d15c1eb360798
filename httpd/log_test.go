package httpd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/journal"
	"kvmd/journal/journaltest"
)

// fakeLog writes numbered lines, then with follow one more every 10 ms.
// closed counts the calls that returned after writing.
type fakeLog struct {
	open   atomic.Int32
	closed atomic.Int32
	err    error
	got    chan [2]any // seek, follow
}

func (f *fakeLog) WriteLog(ctx context.Context, w io.Writer, seek time.Duration, follow bool) error {
	if f.got != nil {
		f.got <- [2]any{seek, follow}
	}
	if f.err != nil {
		return f.err
	}
	f.open.Add(1)
	defer f.closed.Add(1)
	flush := w.(interface{ Flush() error }).Flush
	setDeadline := w.(interface{ SetWriteDeadline(time.Time) error }).SetWriteDeadline
	for i := 0; ; i++ {
		if i == 3 && !follow {
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

// publicErr is another package's error that says how to answer with it.
type publicErr struct {
	status int
	msg    string
}

func (e publicErr) Error() string         { return "cause: " + e.msg }
func (e publicErr) HTTPStatus() int       { return e.status }
func (e publicErr) PublicMessage() string { return e.msg }

func TestLogPublicError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		status    int
		errName   string
		errMsg    string
		logsCause bool
	}{
		{"unavailable", publicErr{503, "The journal cannot be read: gone"}, 503, "UnavailableError", "The journal cannot be read: gone", true},
		{"wrapped", fmt.Errorf("opening: %w", publicErr{503, "busy"}), 503, "UnavailableError", "busy", true},
		{"bad request", publicErr{400, "no such boot"}, 400, "BadRequestError", "no such boot", false},
		{"status without a name", publicErr{418, "teapot"}, 500, "InternalError", "Internal error; the daemon's log has the details", true},
		{"plain error", errors.New("cause: boom"), 500, "InternalError", "Internal error; the daemon's log has the details", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{log: &fakeLog{err: tc.err}})
			r := e.req("GET", "/api/log", xhdr("admin", "admin-pass"), "")
			if r.status != tc.status || r.errName != tc.errName || r.errMsg != tc.errMsg {
				t.Errorf("%d %s %q, want %d %s %q", r.status, r.errName, r.errMsg, tc.status, tc.errName, tc.errMsg)
			}
			if logged := strings.Contains(e.logs.String(), "cause: "); logged != tc.logsCause {
				t.Errorf("cause logged: %v, want %v; log:\n%s", logged, tc.logsCause, e.logs)
			}
		})
	}
}

// lateLog writes what it is given, then fails or not.
type lateLog struct {
	lines string
	flush bool
	err   error
}

func (l lateLog) WriteLog(ctx context.Context, w io.Writer, seek time.Duration, follow bool) error {
	if l.flush {
		w.(interface{ Flush() error }).Flush()
	}
	io.WriteString(w, l.lines)
	return l.err
}

// TestLogReplyBegun: once the log began, an error ends it (and is
// logged); it is not an envelope after the lines.
func TestLogReplyBegun(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  lateLog
		body string
		warn bool
	}{
		{"empty log", lateLog{}, "", false},
		{"flushed then failed", lateLog{flush: true, err: errors.New("journalctl died")}, "", true},
		{"written then failed", lateLog{lines: "a line\r\n", err: errors.New("journalctl died")}, "a line\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{log: tc.src})
			resp := e.get(t, "/api/log", xhdr("admin", "admin-pass"))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || string(body) != tc.body {
				t.Errorf("%d %q %q, want 200 text/plain %q", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.body)
			}
			if warned := strings.Contains(e.logs.String(), "log stream ended"); warned != tc.warn {
				t.Errorf("warned: %v, want %v; log:\n%s", warned, tc.warn, e.logs)
			}
		})
	}
}

// TestLogJournal serves the real journal reader: its errors reach the
// client as the envelope they always were.
func TestLogJournal(t *testing.T) {
	journaltest.Require(t)
	missing := filepath.Join(t.TempDir(), "nope")
	e := newEnv(t, envOpts{log: journal.New(journal.Config{Dir: missing})})
	r := e.req("GET", "/api/log", xhdr("admin", "admin-pass"), "")
	want := `{"ok":false,"result":{"error":"UnavailableError","error_msg":"The journal cannot be read: open ` + missing + `: no such file or directory"}}`
	if r.status != 503 || string(r.body) != want {
		t.Errorf("missing journal: %d %s, want 503 %s", r.status, r.body, want)
	}

	e = newEnv(t, envOpts{log: journal.New(journal.Config{Dir: t.TempDir(), MaxFollowers: 1})})
	empty := e.get(t, "/api/log", xhdr("admin", "admin-pass"))
	b, _ := io.ReadAll(empty.Body)
	empty.Body.Close()
	if empty.StatusCode != 200 || len(b) != 0 {
		t.Errorf("empty journal: %d %q", empty.StatusCode, b)
	}
	follow := e.get(t, "/api/log?follow=1", xhdr("admin", "admin-pass"))
	defer follow.Body.Close()
	if follow.StatusCode != 200 {
		t.Fatalf("follow: %d", follow.StatusCode)
	}
	r = e.req("GET", "/api/log?follow=1", xhdr("admin", "admin-pass"), "")
	want = `{"ok":false,"result":{"error":"UnavailableError","error_msg":"Too many clients follow the log now; try again later"}}`
	if r.status != 503 || string(r.body) != want {
		t.Errorf("second follow: %d %s, want 503 %s", r.status, r.body, want)
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
