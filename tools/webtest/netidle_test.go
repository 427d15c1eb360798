package webtest

import (
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// TestLoginPageGoesIdle: every request the login page makes finishes, so
// that a tool waiting for the network to go idle (a crawler, a test
// recorder, Playwright's networkidle) gets there. The page asks
// /api/auth/check whether the browser is already logged in; a response
// whose body is never read stays open in Chromium.
func TestLoginPageGoesIdle(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "idle pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)

	var mu sync.Mutex
	open := map[network.RequestID]string{}
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			open[ev.RequestID] = ev.Request.URL
		case *network.EventLoadingFinished:
			delete(open, ev.RequestID)
		case *network.EventLoadingFailed:
			delete(open, ev.RequestID)
		}
	})
	act(t, ctx, "network events", network.Enable())
	idle := func(page string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			var left []string
			for _, u := range open {
				left = append(left, u)
			}
			mu.Unlock()
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: requests still open 5 s after the page was ready: %q", page, left)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	act(t, ctx, "opening /login", chromedp.Navigate(d.URL+"/login"), ready)
	idle("/login")
	// The other pages, logged in (not /logs: its follow is a stream).
	login(t, ctx, "admin", "idle pass", "")
	act(t, ctx, "dashboard after login", chromedp.WaitVisible(`#board-model`, chromedp.ByQuery), ready)
	for _, p := range []string{"/", "/sessions", "/tokens", "/users", "/twofactor"} {
		act(t, ctx, "opening "+p, chromedp.Navigate(d.URL+p), ready)
		idle(p)
	}
}
