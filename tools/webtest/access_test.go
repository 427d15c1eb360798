package webtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

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

// mkToken makes an API token of user through the API, with its password.
func mkToken(t *testing.T, base, user, passwd, name string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/auth/tokens", strings.NewReader(`{"name":"`+name+`"}`))
	req.SetBasicAuth(user, passwd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Result struct{ Token string } `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("making a token: %d %v", resp.StatusCode, err)
	}
	return v.Result.Token
}

// TestWebUIUsers drives the Users page: add a user, change its role,
// reset its password (once revoking its API tokens too), remove it; a
// viewer is told it cannot.
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
	// A reset with "revoke them too": eve's API token ends with it.
	tok := mkToken(t, base, "eve", "eve pass 2", "ha")
	if got := checkStatus(t, base, "Authorization", "Bearer "+tok); got != 200 {
		t.Fatalf("eve's token: %d", got)
	}
	act(t, ctx, "resetting eve's password and tokens", fill("#user-name", "eve"), fill("#user-passwd", "eve pass 3"),
		chromedp.Click("#user-revoke", chromedp.ByQuery), chromedp.Click("#user-reset", chromedp.ByQuery))
	waitText(t, ctx, "#users-status", "Password of eve reset; its sessions ended, 1 API token revoked.")
	if got := checkStatus(t, base, "Authorization", "Bearer "+tok); got != 403 {
		t.Errorf("eve's token after a reset with revoke: %d, want 403", got)
	}
	if got := basicStatus("eve", "eve pass 3"); got != 200 {
		t.Errorf("eve's third password: %d", got)
	}
	act(t, ctx, "adding vic", fill("#user-name", "vic"), fill("#user-passwd", "vic pass"),
		chromedp.SetValue("#user-role", "viewer", chromedp.ByQuery), chromedp.Click("#user-add", chromedp.ByQuery))
	waitText(t, ctx, "#users tbody", "vic")
	act(t, ctx, "removing eve", chromedp.Evaluate(`window.confirm = () => true`, nil),
		chromedp.Click(`#users tr[data-name="eve"] button`, chromedp.ByQuery))
	waitText(t, ctx, "#users-status", "eve removed.")
	if got := basicStatus("eve", "eve pass 3"); got != 403 {
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

// TestWebUIEnroll2FA drives the 2FA page: a new secret shown as a QR code
// and text, a wrong code refused (nothing written), the right one turns
// 2FA on (the secret file holds it; a password now needs the code), and
// off again.
func TestWebUIEnroll2FA(t *testing.T) {
	totpFile := filepath.Join(t.TempDir(), "totp.secret")
	if err := os.WriteFile(totpFile, nil, 0o600); err != nil { // configured, off
		t.Fatal(err)
	}
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--totp-secret", totpFile)
	base := d.URL
	ctx := startBrowser(t)
	basicStatus := func(passwd string) int {
		req, _ := http.NewRequest("GET", base+"/api/auth/check", nil)
		req.SetBasicAuth("admin", passwd)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	act(t, ctx, "opening /twofactor", chromedp.Navigate(base+"/twofactor"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "2FA page", chromedp.WaitVisible(`#tfa-status`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#tfa-status", "2FA is off.")
	act(t, ctx, "beginning", chromedp.Click("#tfa-begin", chromedp.ByQuery), chromedp.WaitVisible("#tfa-qr svg", chromedp.ByQuery))
	secret := strings.TrimSpace(text(t, ctx, "#tfa-secret"))
	var qrPath string
	act(t, ctx, "reading the QR", chromedp.Evaluate(`document.querySelector('#tfa-qr path').getAttribute('d').length`, new(int)),
		chromedp.AttributeValue("#tfa-qr path", "d", &qrPath, nil, chromedp.ByQuery))
	if len(secret) < 16 || len(qrPath) < 500 {
		t.Fatalf("secret %q, QR path of %d bytes", secret, len(qrPath))
	}
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wrong := string('0'+(code[0]-'0'+1)%10) + code[1:]
	act(t, ctx, "a wrong code", fill("#tfa-code", wrong), chromedp.Click("#tfa-confirm", chromedp.ByQuery))
	waitText(t, ctx, "#tfa-status", "Not turned on")
	if data, _ := os.ReadFile(totpFile); len(data) != 0 {
		t.Fatalf("the secret was written after a wrong code")
	}
	act(t, ctx, "the right code", fill("#tfa-code", code), chromedp.Click("#tfa-confirm", chromedp.ByQuery))
	waitText(t, ctx, "#tfa-status", "2FA is on.")
	if data, _ := os.ReadFile(totpFile); strings.TrimSpace(string(data)) != secret {
		t.Errorf("secret file = %q, want the secret shown", data)
	}
	deadline := time.Now().Add(3 * time.Second)
	for basicStatus("web pass") != 403 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	now, _ := totp.GenerateCode(secret, time.Now())
	if a, b := basicStatus("web pass"), basicStatus("web pass"+now); a != 403 || b != 200 {
		t.Errorf("with 2FA on: no code %d, code %d; want 403, 200", a, b)
	}
	act(t, ctx, "phone-sized 2FA", chromedp.EmulateViewport(390, 844), chromedp.Reload(), ready)
	fitsWidth(t, ctx, "/twofactor")
	act(t, ctx, "desktop size", chromedp.EmulateViewport(1280, 900))
	act(t, ctx, "turning off", chromedp.Evaluate(`window.confirm = () => true`, nil), chromedp.Click("#tfa-off", chromedp.ByQuery))
	waitText(t, ctx, "#tfa-status", "2FA is off.")
	if data, _ := os.ReadFile(totpFile); len(data) != 0 {
		t.Errorf("secret file after off = %q", data)
	}
}
