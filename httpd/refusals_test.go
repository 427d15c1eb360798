package httpd

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/hw"
	"kvmd/streamer"
	"kvmd/streamer/streamertest"
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

// TestStubRefusalsNotErrors: every stub and every known state of the
// device a request may find (no OCR in this daemon, no streamer running
// or installed, no saved snapshot) is a refusal, logged at info at most
// once a minute for its kind: not one ERROR line for 30 requests of each.
// Before the mend the OCR stubs wrote an error line each (300 requests,
// 300 lines), as did the streamer's known states.
func TestStubRefusalsNotErrors(t *testing.T) {
	viewer := xhdr("viewer", "viewer pass")
	d, _ := testDevices(t)
	noStreamer := newEnv(t, envOpts{devices: d})
	withStreamer := newStreamerEnv(t, hw.CaptureVivid, 320, 240, gradient, nil)
	// The launcher is set up before the streamer runs: Run asks it at once.
	notInstalled := newStreamerEnvWith(t, hw.CaptureVivid, 320, 240, gradient, nil,
		envOpts{launcher: func(l *streamertest.Launcher) { l.ProbeErr = streamer.ErrNotInstalled }})
	for _, tc := range []struct {
		name string
		e    *env
		path string
	}{
		{"OCR", noStreamer, "/api/streamer/ocr"},
		{"OCR beside a streamer", withStreamer.env, "/api/streamer/ocr"},
		{"a snapshot's OCR", withStreamer.env, "/api/streamer/snapshot?ocr=1"},
		{"no streamer", noStreamer, "/api/streamer/snapshot"},
		{"no saved snapshot", withStreamer.env, "/api/streamer/snapshot?load=1"},
		{"ustreamer not installed", notInstalled.env, "/api/streamer/snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(tc.e.logs.String(), "level=ERROR")
			for range 30 {
				if r := tc.e.req("GET", tc.path, viewer, ""); r.status != 503 || r.errName != "UnavailableError" {
					t.Fatalf("%s: %d %s", tc.path, r.status, r.body)
				}
			}
			if n := strings.Count(tc.e.logs.String(), "level=ERROR") - before; n != 0 {
				t.Errorf("%d error lines for 30 refusals of %s:\n%s", n, tc.path, tc.e.logs.String())
			}
		})
	}
	if !slices.ContainsFunc(routeTable, func(r route) bool { return r.path == "/streamer/ocr" }) {
		t.Error("no /streamer/ocr row: the test names the stubs of the route table")
	}
}
