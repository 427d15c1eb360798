package httpd

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/auth/backend"
	"kvmd/auth/backend/backendtest"
)

// TestExternalAuth checks the HTTP answers with an external backend: its
// yes, no and "cannot say" as 200, 403 and 503 for every method, the
// local user beside it, sessions of its users, and the limiter.
func TestExternalAuth(t *testing.T) {
	fake := backendtest.New(map[string]string{"alice": "alice-pass"})
	fake.Kind = "http"
	ext, err := auth.NewExternal(auth.ExternalConfig{
		Backend: fake, Local: []string{"admin"}, CacheTTL: time.Minute, Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{external: ext, metrics: true, limiterFreeFail: 3})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	for _, tc := range []struct {
		name, user, passwd string
		status             int
		errName            string
	}{
		{"external user", "alice", "alice-pass", 200, ""},
		{"external user, wrong password", "alice", "nope", 403, "ForbiddenError"},
		{"unknown to the backend", "bob", "alice-pass", 403, "ForbiddenError"},
		{"local user", "admin", "admin-pass", 200, ""},
		{"file user not local", "viewer", "viewer pass", 403, "ForbiddenError"},
	} {
		for _, m := range []string{"xhdr", "basic", "login"} {
			var r reply
			switch m {
			case "xhdr":
				r = e.req("GET", "/api/auth/check", xhdr(tc.user, tc.passwd), "")
			case "basic":
				r = e.req("GET", "/api/auth/check", map[string]string{"Authorization": basic(tc.user, tc.passwd)}, "")
			case "login":
				r = e.req("POST", "/api/auth/login", form, "user="+tc.user+"&passwd="+urlEscape(tc.passwd))
			}
			if r.status != tc.status || r.errName != tc.errName {
				t.Errorf("%s, %s: %d %s, want %d %s", tc.name, m, r.status, r.errName, tc.status, tc.errName)
			}
		}
		e.a.Limiter.Success(netip.MustParseAddr("127.0.0.1")) // not about the limiter yet
	}

	// A session of an external user outlives the backend's availability.
	token := e.login("alice", "alice-pass")
	fake.SetErr(fmt.Errorf("%w: connection refused", backend.ErrUnavailable))
	cookie := map[string]string{"Cookie": "auth_token=" + token}
	if r := e.req("GET", "/api/auth/check", cookie, ""); r.status != 200 {
		t.Errorf("session of an external user: %d", r.status)
	}

	// The backend is down: 503 for what is not cached, every method.
	for _, hdr := range []map[string]string{xhdr("alice", "other-pass"), {"Authorization": basic("alice", "other-pass")}} {
		r := e.req("GET", "/api/auth/check", hdr, "")
		if r.status != 503 || r.errName != "UnavailableError" || !strings.Contains(r.errMsg, "authentication service") {
			t.Errorf("backend down: %d %s %q, want 503 UnavailableError", r.status, r.errName, r.errMsg)
		}
	}
	if r := e.req("POST", "/api/auth/login", form, "user=alice&passwd=other-pass"); r.status != 503 {
		t.Errorf("login while the backend is down: %d", r.status)
	}
	for _, hdr := range []map[string]string{xhdr("alice", "alice-pass"), xhdr("admin", "admin-pass")} {
		if r := e.req("GET", "/api/auth/check", hdr, ""); r.status != 200 {
			t.Errorf("%s while the backend is down (cached or local): %d", hdr["X-KVMD-User"], r.status)
		}
	}
	// Slow: 503 within the timeout.
	fake.SetErr(nil)
	defer fake.Stall(false)()
	start := time.Now()
	if r := e.req("GET", "/api/auth/check", xhdr("alice", "slow-pass"), ""); r.status != 503 || time.Since(start) > time.Second {
		t.Errorf("slow backend: %d after %s, want 503 within 300ms and a margin", r.status, time.Since(start))
	}
	if n := strings.Count(e.logs.String(), `msg="auth unavailable"`); n != 1 {
		t.Errorf("%d log lines for the backend's unavailability, want 1 (rate-limited):\n%s", n, e.logs)
	}
	if strings.Contains(e.logs.String(), `msg="request failed"`) {
		t.Errorf("503s of the authentication logged one by one:\n%s", e.logs)
	}

	// Rejections count for the limiter; then the backend is not asked.
	fake.Stall(false)() // released
	calls := fake.Calls()
	for i := range 4 {
		if r := e.req("GET", "/api/auth/check", xhdr("alice", "guess"), ""); r.status != 403 {
			t.Fatalf("guess %d: %d, want 403", i+1, r.status)
		}
	}
	if r := e.req("GET", "/api/auth/check", xhdr("alice", "alice-pass"), ""); r.status != 429 {
		t.Errorf("after 4 rejections: %d, want 429", r.status)
	}
	if n := fake.Calls() - calls; n != 4 {
		t.Errorf("the backend was asked %d times, want 4", n)
	}

	// From another address: this one is blocked.
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}
	status, _, body := e.scrape(tr, e.base, metricsPath, xhdr("admin", "admin-pass"))
	if status != 200 {
		t.Fatalf("metrics: %d", status)
	}
	for sample, want := range map[string]float64{
		attempts("header", "unavailable"): 2,
		attempts("basic", "unavailable"):  1,
		attempts("login", "unavailable"):  1,
		attempts("header", "blocked"):     1,
	} {
		if got := metric(t, body, sample); got != want {
			t.Errorf("%s = %v, want %v", sample, got, want)
		}
	}
}
