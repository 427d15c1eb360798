package httpd

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const metricsPath = "/api/export/prometheus/metrics"

// scrape gets the metrics over tr and returns the status, the
// Content-Type and the body.
func (e *env) scrape(tr *http.Transport, base, path string, hdr map[string]string) (int, string, string) {
	e.t.Helper()
	defer tr.CloseIdleConnections()
	r, _ := http.NewRequest("GET", base+path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: tr}).Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// metric returns a sample's value from an exposition, or -1 without one.
func metric(t *testing.T, body, sample string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", sample, err)
	}
	return v
}

func attempts(method, result string) string {
	return `kvmd_auth_attempts_total{method="` + method + `",result="` + result + `"}`
}

// TestMetricsAuth checks that the metrics need credentials like every
// endpoint, and take each kind.
func TestMetricsAuth(t *testing.T) {
	e := newEnv(t, envOpts{metrics: true})
	for _, tt := range []struct {
		name   string
		hdr    map[string]string
		status int
		err    string
	}{
		{"nothing", nil, 401, "UnauthorizedError"},
		{"wrong password", map[string]string{"Authorization": basic("admin", "nope")}, 403, "ForbiddenError"},
		{"unknown user", map[string]string{"Authorization": basic("nobody", "admin-pass")}, 403, "ForbiddenError"},
		{"undecodable Basic", map[string]string{"Authorization": "Basic !!!"}, 401, "UnauthorizedError"},
		{"wrong headers", xhdr("admin", "nope"), 403, "ForbiddenError"},
		{"unknown session", map[string]string{"Cookie": "auth_token=" + strings.Repeat("ab", 32)}, 403, "ForbiddenError"},
	} {
		r := e.req("GET", metricsPath, tt.hdr, "")
		if r.status != tt.status || r.errName != tt.err {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.status, r.errName, tt.status, tt.err)
		}
		if r.header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s: a WWW-Authenticate challenge", tt.name)
		}
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	token := e.login("viewer", "viewer pass")
	for _, tt := range []struct {
		name, path string
		hdr        map[string]string
	}{
		{"Basic (as Prometheus sends it)", metricsPath, map[string]string{"Authorization": basic("admin", "admin-pass")}},
		{"Basic, password with colons", metricsPath, map[string]string{"Authorization": basic("colon", "pa:ss:word")}},
		{"headers", metricsPath, xhdr("admin", "admin-pass")},
		{"session cookie", metricsPath, map[string]string{"Cookie": "auth_token=" + token}},
		{"without /api (nginx strips it)", "/export/prometheus/metrics", map[string]string{"Authorization": basic("admin", "admin-pass")}},
	} {
		st, ct, body := e.scrape(tr, e.base, tt.path, tt.hdr)
		if st != 200 || ct != "text/plain; version=0.0.4; charset=utf-8" || !strings.Contains(body, "\nkvmd_build_info{version=\"test\"} 1\n") {
			t.Errorf("%s: %d %q %.80q, want 200 and the exposition", tt.name, st, ct, body)
		}
	}
	r := e.req("POST", metricsPath, map[string]string{"Authorization": basic("admin", "admin-pass")}, "")
	if r.status != 405 || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d Allow %q, want 405 GET, HEAD", r.status, r.header.Get("Allow"))
	}
}

// TestMetricsOpen checks the opt-out: the metrics need no credentials, and
// ignore wrong ones (Prometheus may be configured with basic_auth anyway),
// while every other endpoint still needs them.
func TestMetricsOpen(t *testing.T) {
	e := newEnv(t, envOpts{metrics: true, metricsOpen: true})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	for _, hdr := range []map[string]string{nil, {"Authorization": basic("admin", "wrong")}, {"Authorization": "Basic !!!"}} {
		st, _, body := e.scrape(tr, e.base, metricsPath, hdr)
		if st != 200 || !strings.Contains(body, "kvmd_sessions_active 0\n") {
			t.Errorf("open metrics with %v: %d %.80q, want 200", hdr, st, body)
		}
		if v := metric(t, body, attempts("basic", "failed")); v != 0 {
			t.Errorf("credentials an open endpoint ignores were counted: basic failed %v", v)
		}
	}
	for _, p := range []string{"/api/auth/check", "/api/log"} {
		if r := e.req("GET", p, nil, ""); r.status != 401 {
			t.Errorf("%s with the metrics open: %d, want 401", p, r.status)
		}
	}
	// Not registered without a source.
	e2 := newEnv(t, envOpts{})
	if r := e2.req("GET", metricsPath, xhdr("admin", "admin-pass"), ""); r.status != 404 {
		t.Errorf("no metrics source: %d, want 404", r.status)
	}
}

// TestMetricsCounters checks that the authentication counters and the
// sessions gauge follow what happens.
func TestMetricsCounters(t *testing.T) {
	e := newEnv(t, envOpts{metrics: true, limiterFreeFail: 1})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	scrape := func() string {
		t.Helper()
		st, _, body := e.scrape(tr, e.base, metricsPath, map[string]string{"Authorization": basic("admin", "admin-pass")})
		if st != 200 {
			t.Fatalf("scrape: %d %s", st, body)
		}
		return body
	}
	body := scrape()
	// The scrape's own Basic check counts before the reply is written.
	want := map[string]float64{attempts("basic", "ok"): 1, attempts("login", "ok"): 0, "kvmd_sessions_active": 0}
	for s, v := range want {
		if got := metric(t, body, s); got != v {
			t.Errorf("first scrape: %s = %v, want %v", s, got, v)
		}
	}

	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	token := e.login("admin", "admin-pass")
	e.login("viewer", "viewer pass")
	if r := e.req("POST", "/api/auth/login", form, "user=admin&passwd=wrong"); r.status != 403 {
		t.Fatalf("wrong login: %d", r.status)
	}
	e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + token}, "")
	e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + strings.Repeat("0", 64)}, "")
	e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), "")
	// From another address: one failure is free, the second blocks it, the
	// third is refused unchecked.
	for range 3 {
		e.reqFrom("127.0.0.2", "GET", "/api/auth/check", xhdr("viewer", "guess"), "")
	}
	body = scrape()
	for s, v := range map[string]float64{
		attempts("basic", "ok"):       2,
		attempts("login", "ok"):       2,
		attempts("login", "failed"):   1,
		attempts("cookie", "ok"):      1,
		attempts("cookie", "failed"):  1,
		attempts("header", "ok"):      1,
		attempts("header", "failed"):  2,
		attempts("header", "blocked"): 1,
		attempts("peer", "ok"):        0,
		"kvmd_sessions_active":        2,
	} {
		if got := metric(t, body, s); got != v {
			t.Errorf("%s = %v, want %v", s, got, v)
		}
	}

	e.req("POST", "/api/auth/logout", map[string]string{"Cookie": "auth_token=" + token}, "")
	if got := metric(t, scrape(), "kvmd_sessions_active"); got != 1 {
		t.Errorf("after a logout: kvmd_sessions_active = %v, want 1", got)
	}
}

func TestMetricsPeer(t *testing.T) {
	policy, name := trustedPeer(t)
	e := newEnv(t, envOpts{metrics: true, peer: policy})
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}
	e.scrape(tr, "http://kvmd", metricsPath, nil)
	st, _, body := e.scrape(tr, "http://kvmd", metricsPath, nil)
	if st != 200 || metric(t, body, attempts("peer", "ok")) != 2 {
		t.Errorf("%s over the unix socket: %d, %s = %v, want 200 and 2", name, st, attempts("peer", "ok"), metric(t, body, attempts("peer", "ok")))
	}
}
