package webtest

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"kvmd/client/clienttest"
)

// TestWebUIDemo2FA: in the demo (make run) a newcomer can turn 2FA on and
// off from the 2FA page without configuring anything: the demo keeps an
// empty secret file of its own.
func TestWebUIDemo2FA(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "demo pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users) // no --totp-secret
	ctx := startBrowser(t)
	act(t, ctx, "opening /twofactor", chromedp.Navigate(d.URL+"/twofactor"), ready)
	login(t, ctx, "admin", "demo pass", "")
	act(t, ctx, "2FA page", chromedp.WaitVisible(`#tfa-status`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#tfa-status", "2FA is off.")
	act(t, ctx, "beginning", chromedp.Click("#tfa-begin", chromedp.ByQuery), chromedp.WaitVisible("#tfa-qr svg", chromedp.ByQuery))
	secret := strings.TrimSpace(text(t, ctx, "#tfa-secret"))
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	act(t, ctx, "the code", fill("#tfa-code", code), chromedp.Click("#tfa-confirm", chromedp.ByQuery))
	waitText(t, ctx, "#tfa-status", "2FA is on.")
	act(t, ctx, "turning off", chromedp.Evaluate(`window.confirm = () => true`, nil), chromedp.Click("#tfa-off", chromedp.ByQuery))
	waitText(t, ctx, "#tfa-status", "2FA is off.")
}

// TestWebUI2FANotConfigured: a device started without --totp-secret says
// on the 2FA page what to configure, not that an endpoint is missing.
func TestWebUI2FANotConfigured(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--root", t.TempDir(), "--users", users, "--journal-dir", t.TempDir())
	ctx := startBrowser(t)
	act(t, ctx, "opening /twofactor", chromedp.Navigate(d.URL+"/twofactor"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "2FA page", chromedp.WaitVisible(`#tfa-status`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#tfa-status", "--totp-secret FILE")
	if s := text(t, ctx, "#tfa-status"); strings.Contains(s, "No such API endpoint") || strings.Contains(s, "cannot be changed here") {
		t.Errorf("the page says %q", s)
	}
	var shown bool
	act(t, ctx, "the buttons", chromedp.Evaluate(`!document.getElementById('tfa-begin').hidden || !document.getElementById('tfa-off').hidden`, &shown))
	if shown {
		t.Error("a 2FA button is offered on a device that cannot keep a secret")
	}
}
