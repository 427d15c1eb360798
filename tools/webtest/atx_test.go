package webtest

import (
	"testing"

	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// TestWebUIATX drives the dashboard's ATX card against the demo, whose
// host's power button toggles its power LED: the LEDs come live from
// /api/ws, a power click turns the LED off and on again, and reset asks
// for a confirmation that can be cancelled.
func TestWebUIATX(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)
	act(t, ctx, "login page", chromedp.Navigate(d.URL+"/login"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "dashboard", chromedp.WaitVisible(`#atx[data-live="1"]`, chromedp.ByQuery))
	waitText(t, ctx, "#atx-led-power", "on") // the demo host is on
	waitText(t, ctx, "#atx-led-hdd", "off")

	// A short press: the host turns off; the LED follows without a reload.
	act(t, ctx, "power click", chromedp.Click("#atx-power", chromedp.ByQuery))
	waitText(t, ctx, "#atx-led-power", "off")
	// The button stays busy for a second after its release, then frees.
	act(t, ctx, "power free again", chromedp.WaitEnabled("#atx-power", chromedp.ByQuery))
	act(t, ctx, "power click again", chromedp.Click("#atx-power", chromedp.ByQuery))
	waitText(t, ctx, "#atx-led-power", "on")
	act(t, ctx, "power free again", chromedp.WaitEnabled("#atx-reset", chromedp.ByQuery))

	// Reset asks first; Cancel presses nothing.
	act(t, ctx, "reset", chromedp.Click("#atx-reset", chromedp.ByQuery), chromedp.WaitVisible("#atx-confirm", chromedp.ByQuery))
	waitText(t, ctx, "#atx-confirm-text", "reset")
	act(t, ctx, "cancel", chromedp.Click("#atx-confirm-no", chromedp.ByQuery), chromedp.WaitNotVisible("#atx-confirm", chromedp.ByQuery))
	var busy bool
	act(t, ctx, "not busy", chromedp.Evaluate(`!document.getElementById('atx-busy').hidden`, &busy))
	if busy {
		t.Error("cancelled reset pressed the button")
	}
	// Yes presses it: busy shows while it is held.
	act(t, ctx, "reset confirmed", chromedp.Click("#atx-reset", chromedp.ByQuery),
		chromedp.WaitVisible("#atx-confirm", chromedp.ByQuery),
		chromedp.Click("#atx-confirm-yes", chromedp.ByQuery),
		chromedp.WaitVisible("#atx-busy", chromedp.ByQuery))
	screenshot(t, ctx, "atx")
}
