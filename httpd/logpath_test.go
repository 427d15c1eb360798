package httpd

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/internal/logbuf"
	"kvmd/internal/slogtext"
)

const testHex64 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

func TestLogPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/api/info", "/api/info"},
		{"/api/kvmd_" + testHex64, "/api/[token]"},
		{"/api/" + testHex64, "/api/[token]"},
		{"/api/" + strings.ToUpper(testHex64) + "/x", "/api/[token]/x"},
		{"/kvmd_0123abcd", "/[token]"},                    // cut short
		{"/api/x" + testHex64[:40] + "y", "/api/[token]"}, // a long hex run inside
		{"/api/" + testHex64[:31], "/api/" + testHex64[:31]},
		{"/static/kvmd_logo.svg", "/static/kvmd_logo.svg"}, // no hex digit after the prefix
		{"/api/export/prometheus/metrics", "/api/export/prometheus/metrics"},
	} {
		if got := logPath(tc.in); got != tc.want {
			t.Errorf("logPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAccessLogHidesTokens: a token pasted into a URL, in the path (a
// 404) or in the query, never reaches the log.
func TestAccessLogHidesTokens(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := xhdr("admin", "admin-pass")
	apiTok, sessTok := "kvmd_"+testHex64, strings.Repeat("ab", 32)
	for _, p := range []string{
		"/api/" + apiTok, "/api/" + sessTok, "/" + apiTok, "/api/auth/" + sessTok + "/check",
		"/api/auth/check?token=" + apiTok + "&s=" + sessTok,
	} {
		e.req("GET", p, admin, "")
	}
	logs := e.logs.String()
	for _, s := range []string{testHex64, sessTok} {
		if strings.Contains(logs, s) {
			t.Errorf("the log holds a token:\n%s", logs)
		}
	}
	for _, want := range []string{"path=/api/[token] status=404", "path=/[token] status=", "path=/api/auth/[token]/check status=404",
		"path=/api/auth/check status=200"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
}

// TestAccessLineText: the access line written through slogtext's text
// path (the daemon's log outside systemd) is the line slog.TextHandler
// writes from the record, values that need quoting included.
func TestAccessLineText(t *testing.T) {
	line := func(mk func(w *bytes.Buffer) (slog.Handler, func()), user, path string) string {
		var b bytes.Buffer
		h, flush := mk(&b)
		s := &Server{cfg: Config{AccessLog: slog.New(h).With("component", "http")}}
		q := &request{Context: context.Background(), addr: netip.MustParseAddr("2001:db8::7"), routed: true,
			id: Identity{User: user, Method: auth.MethodBasic}}
		q.rec.status, q.rec.bytes = 401, 1234
		r := httptest.NewRequest("GET", "http://kvm"+path, nil)
		s.accessLine(q, r, time.Now().Add(-1500*time.Microsecond))
		flush()
		// The times differ between the two calls.
		return regexp.MustCompile(`^time=\S+ | dur=\S+`).ReplaceAllString(b.String(), "")
	}
	for _, c := range []struct{ user, path string }{
		{"admin", "/api/auth/check"}, {"two words", "/api/a%20b"}, {"", "/api/%22q%22"}, {"é=x", "/api/%E6%97%A5"},
	} {
		// As the daemon logs outside systemd: slogtext into a logbuf.
		fast := line(func(w *bytes.Buffer) (slog.Handler, func()) {
			b := logbuf.New(w, 4<<10, time.Hour)
			return logbuf.Handler(slogtext.New(b), b), func() { b.Flush() }
		}, c.user, c.path)
		std := line(func(w *bytes.Buffer) (slog.Handler, func()) { return slog.NewTextHandler(w, nil), func() {} }, c.user, c.path)
		if fast != std || !strings.Contains(std, "status=401") {
			t.Errorf("user %q path %q:\n text path %q\n TextHandler %q", c.user, c.path, fast, std)
		}
	}
}
