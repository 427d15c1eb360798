package webtest

import (
	"context"
	"io"
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

// users returns the users and roles the daemon has, asked with Basic.
func usersOf(t *testing.T, base, user, passwd string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/auth/users", nil)
	req.SetBasicAuth(user, passwd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestWebUIUsers drives the Users page: add a user, change its role,
// reset its password, remove it; a viewer is told it cannot.
func TestWebUIUsers(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	base := d.URL
	ctx := startBrowser(t)
	basicStatus := func(user, passwd string) int {
		req, _ := http.NewRequest("GET", base+"/api/auth/check", nil)
		req.SetBasicAuth(user, passwd)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	act(t, ctx, "opening /users", chromedp.Navigate(base+"/users"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "users page", chromedp.WaitVisible(`#users`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#users tbody", "admin")

	act(t, ctx, "adding eve", fill("#user-name", "eve"), fill("#user-passwd", "eve pass 1"),
		chromedp.SetValue("#user-role", "viewer", chromedp.ByQuery), chromedp.Click("#user-add", chromedp.ByQuery))
	waitText(t, ctx, "#users-status", "eve added.")
	waitText(t, ctx, "#users tbody", "eve")
	if got := basicStatus("eve", "eve pass 1"); got != 200 {
		t.Errorf("eve's password: %d", got)
	}
	act(t, ctx, "eve becomes operator", chromedp.Evaluate(`(() => {
		const s = document.querySelector('#users tr[data-name="eve"] select');
		s.value = 'operator'; s.dispatchEvent(new Event('change', {bubbles: true})); })()`, nil))
	waitText(t, ctx, "#users-status", "eve is now operator.")
	if got := usersOf(t, base, "admin", "web pass"); !strings.Contains(got, `{"name":"eve","role":"operator"}`) {
		t.Errorf("after the role change: %s", got)
	}
	act(t, ctx, "resetting eve's password", fill("#user-name", "eve"), fill("#user-passwd", "eve pass 2"),
		chromedp.Click("#user-reset", chromedp.ByQuery))
	waitText(t, ctx, "#users-status", "Password of eve reset")
	if a, b := basicStatus("eve", "eve pass 1"), basicStatus("eve", "eve pass 2"); a != 403 || b != 200 {
		t.Errorf("after the reset: old password %d, new %d; want 403, 200", a, b)
	}
	act(t, ctx, "adding vic", fill("#user-name", "vic"), fill("#user-passwd", "vic pass"),
		chromedp.SetValue("#user-role", "viewer", chromedp.ByQuery), chromedp.Click("#user-add", chromedp.ByQuery))
	waitText(t, ctx, "#users tbody", "vic")
	act(t, ctx, "removing eve", chromedp.Evaluate(`window.confirm = () => true`, nil),
		chromedp.Click(`#users tr[data-name="eve"] button`, chromedp.ByQuery))
	waitText(t, ctx, "#users-status", "eve removed.")
	if got := basicStatus("eve", "eve pass 2"); got != 403 {
		t.Errorf("removed eve: %d", got)
	}
	act(t, ctx, "phone-sized users", chromedp.EmulateViewport(390, 844), chromedp.Reload(), ready)
	fitsWidth(t, ctx, "/users")
	act(t, ctx, "desktop size", chromedp.EmulateViewport(1280, 900))

	// A viewer: told, not sent to the login page.
	act(t, ctx, "logging out", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#login-submit", chromedp.ByQuery))
	act(t, ctx, "opening /users as vic", chromedp.Navigate(base+"/users"), ready)
	login(t, ctx, "vic", "vic pass", "")
	act(t, ctx, "users page as vic", chromedp.WaitVisible(`#users-status`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#users-status", "Only an admin can manage users.")
	if got := location(t, ctx); got != "/users" {
		t.Errorf("a viewer on /users ended at %q", got)
	}
}
