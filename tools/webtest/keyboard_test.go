package webtest

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// TestWebUIKeyboard drives the dashboard's Keyboard card against the
// demo, whose stand-in host logs what it is typed (as an en-us host reads
// the keys) and answers Caps Lock with its LED: text typed with en-us and
// with de (the German layout's keys, read by the en-us host), dead keys
// included, a text with characters the layout cannot type (skipped, and
// said), a shortcut, and the Caps Lock light coming back through /api/ws.
func TestWebUIKeyboard(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)
	act(t, ctx, "login page", chromedp.Navigate(d.URL+"/login"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "dashboard", chromedp.WaitVisible(`#keyboard[data-live="1"]`, chromedp.ByQuery),
		chromedp.WaitReady(`#kbd-keymap option[value="de"]`, chromedp.ByQuery))
	waitText(t, ctx, "#kbd-state", "Connected")

	act(t, ctx, "type en-us", chromedp.SetValue("#kbd-keymap", "en-us", chromedp.ByQuery),
		chromedp.SendKeys("#kbd-text", "Hello, kvmd!", chromedp.ByQuery),
		chromedp.Click("#kbd-send", chromedp.ByQuery))
	waitText(t, ctx, "#kbd-msg", "Typed 12 characters.")
	d.WaitLog(t, `demo host typed.*Hello, kvmd!`, 10*time.Second)

	// German: z is the key of y, @ is AltGr+Q.
	act(t, ctx, "type de", fill("#kbd-text", ""),
		chromedp.SetValue("#kbd-keymap", "de", chromedp.ByQuery),
		chromedp.SendKeys("#kbd-text", "z@", chromedp.ByQuery),
		chromedp.Click("#kbd-send", chromedp.ByQuery))
	waitText(t, ctx, "#kbd-msg", "Typed 2 characters.")
	d.WaitLog(t, `demo host typed.*y\[AltRight\+KeyQ\]`, 10*time.Second)

	// German's dead key: ê is the key left of 1 (Backquote) and E, ^ the
	// same key and Space; the en-us host shows that key as `.
	act(t, ctx, "type de dead keys", fill("#kbd-text", ""),
		chromedp.SendKeys("#kbd-text", "ê^x", chromedp.ByQuery),
		chromedp.Click("#kbd-send", chromedp.ByQuery))
	waitText(t, ctx, "#kbd-msg", "Typed 3 characters.")
	d.WaitLog(t, "demo host typed.*text=\"`e` x\"", 10*time.Second)

	// What the layout cannot type is skipped, and the card says so: en-us
	// has no ü, ß nor typographic quotes, and types no other character
	// for them.
	act(t, ctx, "type en-us, skipping", fill("#kbd-text", ""),
		chromedp.SetValue("#kbd-keymap", "en-us", chromedp.ByQuery),
		chromedp.SendKeys("#kbd-text", "Grüße, “ok”", chromedp.ByQuery),
		chromedp.Click("#kbd-send", chromedp.ByQuery))
	waitText(t, ctx, "#kbd-msg", "Typed 7 of 11 characters; skipped 4 that the en-us layout cannot type: ü ß “ ”")
	d.WaitLog(t, `demo host typed.*text="Gre, ok"`, 10*time.Second)
	act(t, ctx, "skipped is a warning", chromedp.WaitVisible(`#kbd-msg.warn`, chromedp.ByQuery))

	act(t, ctx, "ctrl+alt+del", chromedp.Click(`#kbd-shortcuts button[data-keys="ControlLeft,AltLeft,Delete"]`, chromedp.ByQuery))
	waitText(t, ctx, "#kbd-msg", "Sent Ctrl+Alt+Del.")
	d.WaitLog(t, `demo host typed.*\[ControlLeft\+AltLeft\+Delete\]`, 10*time.Second)

	// Caps Lock: the host lights it, the card shows it.
	act(t, ctx, "caps lock", chromedp.Click(`#kbd-shortcuts button[data-keys="CapsLock"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#kbd-led-caps[data-on="1"]`, chromedp.ByQuery))
	screenshot(t, ctx, "keyboard")
	act(t, ctx, "caps lock off", chromedp.Click(`#kbd-shortcuts button[data-keys="CapsLock"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#kbd-led-caps[data-on="0"]`, chromedp.ByQuery))
	if strings.Contains(d.Stderr.String(), "level=ERROR") {
		t.Errorf("the daemon logged an error:\n%s", d.Stderr)
	}
}
