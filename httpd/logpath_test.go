package httpd

import (
	"strings"
	"testing"
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
