package httpd

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/auth"
)

// TestRefusalsLoggedAtInfoRateLimited: a viewer asking for a stub that
// answers 503 (no streamer runs under this daemon) in a loop gets one
// info line a minute, not an error line each; a real fault is still an
// error each time.
func TestRefusalsLoggedAtInfoRateLimited(t *testing.T) {
	d, _ := testDevices(t)
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := newEnv(t, envOpts{devices: d, extraRoutes: func(s *Server) {
		s.refusals.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		s.handle("GET", "/fault", auth.RoleViewer, func(http.ResponseWriter, *http.Request) error {
			return errors.New("a real fault")
		})
	}})
	viewer := xhdr("viewer", "viewer pass")
	for range 300 {
		if r := e.req("GET", "/api/streamer/snapshot", viewer, ""); r.status != 503 || r.errName != "UnavailableError" {
			t.Fatalf("snapshot: %d %s", r.status, r.errName)
		}
	}
	lines := func(sub string) []string {
		var out []string
		for l := range strings.SplitSeq(e.logs.String(), "\n") {
			if strings.Contains(l, sub) {
				out = append(out, l)
			}
		}
		return out
	}
	if errs := lines("level=ERROR"); len(errs) != 0 {
		t.Errorf("%d error lines for a stub's 503s, want 0; first: %s", len(errs), errs[0])
	}
	got := lines(`msg="request refused"`)
	if len(got) != 1 || !strings.Contains(got[0], "level=INFO") || !strings.Contains(got[0], "status=503 error=UnavailableError") {
		t.Fatalf("refusal lines %q, want one at info", got)
	}
	mu.Lock()
	now = now.Add(refusalEvery)
	mu.Unlock()
	e.req("GET", "/api/streamer/snapshot", viewer, "")
	if got := lines(`msg="request refused"`); len(got) != 2 || !strings.Contains(got[1], "held_back=299") {
		t.Errorf("after a minute: %q, want a second line with held_back=299", got)
	}

	// A 4xx is a refusal too: one line for many.
	for range 50 {
		e.req("GET", "/api/no-such-endpoint", viewer, "")
	}
	if got := lines(`msg="request refused" status=404`); len(got) != 1 || !strings.Contains(got[0], "level=INFO") {
		t.Errorf("404 lines %q, want one at info", got)
	}

	for range 2 {
		if r := e.req("GET", "/api/fault", viewer, ""); r.status != 500 {
			t.Fatalf("fault: %d", r.status)
		}
	}
	if got := lines(`level=ERROR msg="request failed"`); len(got) != 2 || !strings.Contains(got[0], "a real fault") {
		t.Errorf("fault lines %q, want an error line each", got)
	}
}
