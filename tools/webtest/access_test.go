package webtest

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// checkStatus sends GET /api/auth/check with hdr and returns the status.
func checkStatus(t *testing.T, base, name, value string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/auth/check", nil)
	req.Header.Set(name, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// rows returns how many rows the table sel's body has.
func rows(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	var n int
	act(t, ctx, "counting rows of "+sel, chromedp.Evaluate(`document.querySelectorAll(`+jsString(sel+" tbody tr")+`).length`, &n))
	return n
}

// fitsWidth fails t when the page scrolls sideways.
func fitsWidth(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	var over bool
	act(t, ctx, "measuring "+page, chromedp.Evaluate(`document.documentElement.scrollWidth > window.innerWidth`, &over))
	if over {
		t.Errorf("%s scrolls sideways at a phone's width", page)
	}
}

// TestWebUISessionsTokens drives the Tokens and Sessions pages in headless
// Chromium against the real daemon: a token made on the page is shown
// once and works as a Bearer credential until revoked on the page; a
// session ended on the page is refused from the next request on; both
// pages fit a phone's width.
func TestWebUISessionsTokens(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	base := d.URL
	ctx := startBrowser(t)

	act(t, ctx, "opening /tokens", chromedp.Navigate(base+"/tokens"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "tokens page", chromedp.WaitVisible(`#tok-form`, chromedp.ByQuery), ready)
	if n := rows(t, ctx, "#tokens"); n != 0 {
		t.Errorf("%d tokens listed before any was made", n)
	}
	act(t, ctx, "creating a token",
		fill("#tok-name", "ci"), chromedp.SetValue("#tok-role", "viewer", chromedp.ByQuery),
		chromedp.Click("#tok-create", chromedp.ByQuery), chromedp.WaitVisible("#tok-new", chromedp.ByQuery))
	secret := strings.TrimSpace(text(t, ctx, "#tok-secret"))
	if !strings.HasPrefix(secret, "kvmd_") {
		t.Fatalf("the page shows %q, not a token", secret)
	}
	waitText(t, ctx, "#tokens tbody", "ci")
	if got := checkStatus(t, base, "Authorization", "Bearer "+secret); got != 200 {
		t.Errorf("the new token: %d, want 200", got)
	}
	if strings.Contains(text(t, ctx, "#tokens"), secret[5:15]) {
		t.Errorf("the token list shows the secret")
	}
	act(t, ctx, "revoking", chromedp.Click(`#tokens tbody tr[data-name="ci"] button`, chromedp.ByQuery))
	waitText(t, ctx, "#tok-status", "0 tokens")
	if got := checkStatus(t, base, "Authorization", "Bearer "+secret); got != 403 {
		t.Errorf("the revoked token: %d, want 403", got)
	}

	// A second session, from another client.
	resp, err := http.PostForm(base+"/api/auth/login", url.Values{"user": {"admin"}, "passwd": {"web pass"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var other string
	for _, c := range resp.Cookies() {
		if c.Name == "auth_token" {
			other = c.Value
		}
	}
	if checkStatus(t, base, "Cookie", "auth_token="+other) != 200 {
		t.Fatal("the other session does not work")
	}
	act(t, ctx, "sessions page", chromedp.Navigate(base+"/sessions"), ready)
	if n := rows(t, ctx, "#sessions"); n != 2 {
		t.Fatalf("%d sessions listed, want 2", n)
	}
	act(t, ctx, "ending the other session", chromedp.Click(`#sessions tbody tr:not(.current) button`, chromedp.ByQuery))
	waitText(t, ctx, "#sess-status", "1 session")
	if got := checkStatus(t, base, "Cookie", "auth_token="+other); got != 403 {
		t.Errorf("the ended session: %d, want 403", got)
	}
	if rows(t, ctx, "#sessions tbody tr.current") != 0 && rows(t, ctx, "#sessions") != 1 {
		t.Errorf("this session is not the one left")
	}

	for _, page := range []string{"/sessions", "/tokens"} {
		act(t, ctx, "phone-sized "+page, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+page), ready)
		fitsWidth(t, ctx, page)
	}
	act(t, ctx, "desktop size", chromedp.EmulateViewport(1280, 900))
}
