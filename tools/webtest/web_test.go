package webtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"kvmd/client/clienttest"
	"kvmd/internal/fixture"
	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// screenshotDir is where the browser tests save their screenshots, shown
// in the manual (docs/web-ui.md).
const screenshotDir = repoRoot + "/docs/screenshots"

// startBrowser starts a headless Chromium (Debian's, /usr/bin/chromium) for t
// and returns its context. The flags keep it off the network but for the
// pages it is sent to.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := testutil.NeedTool(t, "chromium", "chromium")
	profile := profileDir(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// profileDir returns a directory for Chromium's profile, removed when the
// test ends. It is no t.TempDir: Chromium's helper processes outlive the
// browser process that chromedp waits for, and may still write to the
// profile for a moment, which fails t.TempDir's removal ("directory not
// empty"); this one is removed once they are done.
func profileDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kvmd-webtest-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered before the browser's: runs after it ended
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing Chromium's profile: %v", err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return dir
}

// act runs browser actions with a deadline, failing t with what.
func act(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text returns the text of the element sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	act(t, ctx, "reading "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// location returns the page's path and query.
func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	var s string
	act(t, ctx, "reading the location", chromedp.Evaluate(`location.pathname + location.search`, &s))
	return s
}

// ready waits for the page to say it rendered its first data.
var ready = chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery)

// screenshot saves the page as docs/screenshots/NAME.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	act(t, ctx, "screenshot", chromedp.FullScreenshot(&png, 100))
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// login fills in the login form and submits it.
func login(t *testing.T, ctx context.Context, user, passwd, code string) {
	t.Helper()
	act(t, ctx, "logging in", ready,
		fill("#user", ""), chromedp.SendKeys("#user", user, chromedp.ByQuery),
		fill("#passwd", ""), chromedp.SendKeys("#passwd", passwd, chromedp.ByQuery),
		fill("#code", code),
		chromedp.Click("#login-submit", chromedp.ByQuery))
}

// fill sets the value of the input sel, as typing would (an input event).
func fill(sel, value string) chromedp.Action {
	return chromedp.Evaluate(`(() => { const e = document.querySelector(`+jsString(sel)+`); e.value = `+jsString(value)+
		`; e.dispatchEvent(new Event('input', {bubbles: true})); })()`, nil)
}

// waitText waits until the element sel's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s string
		err := chromedp.Run(ctx, chromedp.Evaluate(`(document.querySelector(`+jsString(sel)+`)||{}).textContent||""`, &s))
		if err == nil && strings.Contains(s, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: text %q, want it to contain %q (%v)", sel, s, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// TestWebUI drives the web UI in a real headless Chromium against the
// daemon serving the demo board and a real journal: a page asked for
// without a session leads to the login page and back, a wrong password
// is said so, the dashboard shows the board, a line written to the journal
// shows in the log follow within a second, the filter, the session ended
// elsewhere, logout, and an unreachable device.
func TestWebUI(t *testing.T) {
	jdir := t.TempDir()
	w := journaltest.Start(t, jdir, "system")
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "kvmd started for the browser test"})
	w.Sync()
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--journal-dir", jdir)
	base := d.URL
	ctx := startBrowser(t)

	// A page without a session: the login page, then back to the page.
	act(t, ctx, "opening /logs", chromedp.Navigate(base+"/logs"), ready)
	if got := location(t, ctx); got != "/login?next=%2Flogs" {
		t.Errorf("without a session /logs went to %q", got)
	}
	screenshot(t, ctx, "login")
	login(t, ctx, "admin", "wrong", "")
	waitText(t, ctx, "#login-error", "Wrong user name, password or 2FA code")
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "logs page after login", chromedp.WaitVisible(`#log-lines`, chromedp.ByQuery), ready)
	if got := location(t, ctx); got != "/logs" {
		t.Errorf("after login: %q, want /logs", got)
	}

	// The dashboard: the demo board's values.
	act(t, ctx, "dashboard", chromedp.Navigate(base+"/"), ready)
	for sel, want := range map[string]string{
		"#board-model":  "Raspberry Pi 4 Model B",
		"#board-serial": "10000000BAFB5028",
		"#cpu-temp":     "°C",
		"#usb-state":    "Connected",
		"#throttling":   "No throttling",
		"#hdmi-state":   "1920×1080",
		"#versions":     "kvmd",
		"#gpio":         "atx_power_led",
	} {
		waitText(t, ctx, sel, want)
	}
	screenshot(t, ctx, "dashboard")
	act(t, ctx, "phone-sized dashboard", chromedp.EmulateViewport(390, 844), chromedp.Reload(), ready)
	screenshot(t, ctx, "dashboard-phone")
	act(t, ctx, "desktop size", chromedp.EmulateViewport(1280, 900))

	// The log: follow shows a new journal line within a second.
	act(t, ctx, "logs page", chromedp.Navigate(base+"/logs"), ready)
	waitText(t, ctx, "#log-lines", "kvmd started for the browser test")
	tag := make([]byte, 6)
	rand.Read(tag)
	msg := "browser follow " + hex.EncodeToString(tag)
	start := time.Now()
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: msg})
	waitText(t, ctx, "#log-lines", msg)
	if took := time.Since(start); took > time.Second {
		t.Errorf("a journal line took %v to show in the follow view, want under 1 s", took)
	} else {
		t.Logf("journal line to follow view: %v", took)
	}
	w.Append(journaltest.Entry{Unit: "sshd.service", Message: "not for kvmd's log"})
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "another line"})
	waitText(t, ctx, "#log-lines", "another line")
	if strings.Contains(text(t, ctx, "#log-lines"), "not for kvmd's log") {
		t.Error("the log view shows another unit's line")
	}
	// The filter hides lines that do not match, as one types.
	act(t, ctx, "filtering", chromedp.SendKeys("#log-filter", hex.EncodeToString(tag), chromedp.ByQuery))
	var visible int
	act(t, ctx, "counting lines", chromedp.Poll(`(() => { const v = [...document.querySelectorAll('#log-lines .log-line')].filter(e => e.offsetParent !== null); return v.length === 1 ? v.length : 0 })()`, &visible, chromedp.WithPollingTimeout(5*time.Second)))
	act(t, ctx, "clearing the filter", fill("#log-filter", ""))
	waitText(t, ctx, "#log-count", "3 lines")
	screenshot(t, ctx, "logs")

	// Pause holds new lines back; resume shows them.
	act(t, ctx, "pausing", chromedp.Click("#log-pause", chromedp.ByQuery))
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "written while paused"})
	w.Sync()
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(text(t, ctx, "#log-lines"), "written while paused") {
		t.Error("a paused view showed a new line")
	}
	act(t, ctx, "resuming", chromedp.Click("#log-pause", chromedp.ByQuery))
	waitText(t, ctx, "#log-lines", "written while paused")

	// Download saves every line received as a text file.
	dl := t.TempDir()
	act(t, ctx, "downloading",
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllow).WithDownloadPath(dl),
		chromedp.Click("#log-download", chromedp.ByQuery))
	var saved []byte
	for deadline := time.Now().Add(5 * time.Second); len(saved) == 0; time.Sleep(50 * time.Millisecond) {
		if files, _ := filepath.Glob(filepath.Join(dl, "kvmd-log-*.txt")); len(files) == 1 {
			saved, _ = os.ReadFile(files[0])
		}
		if time.Now().After(deadline) {
			t.Fatal("no kvmd-log-*.txt downloaded")
		}
	}
	for _, want := range []string{"kvmd started for the browser test", msg, "another line", "written while paused"} {
		if !strings.Contains(string(saved), want) {
			t.Errorf("the downloaded log has no %q:\n%s", want, saved)
		}
	}

	// The session ended elsewhere: the next refresh leads to the login
	// page, which says why.
	act(t, ctx, "dashboard", chromedp.Navigate(base+"/"), ready)
	var cookies []*network.Cookie
	act(t, ctx, "cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().Do(ctx)
		return err
	}))
	var token string
	for _, c := range cookies {
		if c.Name == "auth_token" {
			token = c.Value
			if !c.HTTPOnly {
				t.Error("the session cookie is readable by scripts")
			}
		}
	}
	req, _ := http.NewRequest("POST", base+"/api/auth/logout", nil)
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("logout from outside: %v %v", resp, err)
	}
	waitText(t, ctx, "#login-notice", "session has ended")
	if got := location(t, ctx); !strings.HasPrefix(got, "/login?") || !strings.Contains(got, "expired=1") {
		t.Errorf("after the session ended: %q", got)
	}

	// Log out: back at the login page, and the pages want a session again.
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "dashboard after login", chromedp.WaitVisible(`#board-model`, chromedp.ByQuery), ready)
	act(t, ctx, "logging out", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#login-form", chromedp.ByQuery))
	act(t, ctx, "dashboard after logout", chromedp.Navigate(base+"/"), ready)
	if got := location(t, ctx); got != "/login?next=%2F" {
		t.Errorf("after logout / went to %q", got)
	}
	var stored int
	act(t, ctx, "storage", chromedp.Evaluate(`localStorage.length + sessionStorage.length`, &stored))
	if stored != 0 {
		t.Errorf("%d items in web storage, want none", stored)
	}

	// The device goes away: the login page says it cannot reach it.
	if err := d.Stop(t); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	login(t, ctx, "admin", "web pass", "")
	waitText(t, ctx, "#login-error", "Cannot reach the device")
}

// TestWebUI2FA logs in on a device with 2FA: the password alone is
// refused, the password with the code typed in its own field is taken;
// after five wrong attempts the page says how long to wait.
func TestWebUI2FA(t *testing.T) {
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	totpFile := filepath.Join(t.TempDir(), "totp.secret")
	if err := os.WriteFile(totpFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--totp-secret", totpFile)
	addr := d.Addr
	ctx := startBrowser(t)

	act(t, ctx, "login page", chromedp.Navigate("http://"+addr+"/login"), ready)
	login(t, ctx, "admin", "web pass", "")
	waitText(t, ctx, "#login-error", "Wrong user name, password or 2FA code")
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	login(t, ctx, "admin", "web pass", code)
	act(t, ctx, "dashboard", chromedp.WaitVisible(`#board-model`, chromedp.ByQuery), ready)
	if got := location(t, ctx); got != "/" {
		t.Errorf("after login with 2FA: %q, want /", got)
	}

	// Rate limiting: the sixth wrong attempt in a row is refused with a
	// wait, which the page gives.
	act(t, ctx, "logging out", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#login-form", chromedp.ByQuery))
	// Failures from this address (the browser's too) until it is blocked
	// for at least 8 s: the first block lasts 1 s, which a loaded machine
	// can spend before the browser's attempt arrives, so each block is
	// waited out and one more failure doubles it.
	for i := 0; ; i++ {
		resp, err := http.PostForm("http://"+addr+"/api/auth/login", url.Values{"user": {"admin"}, "passwd": {"wrong"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			if err != nil {
				t.Fatalf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
			if wait >= 8 {
				break
			}
			time.Sleep(time.Duration(wait)*time.Second + 100*time.Millisecond)
		}
		if i == 20 {
			t.Fatalf("no 429 of 8 s or more after %d failed logins", i+1)
		}
	}
	login(t, ctx, "admin", "web pass", code)
	waitText(t, ctx, "#login-error", "Too many failed attempts. Try again in")
}

// TestWebUIHardwareFaults: the dashboard on a board whose USB port has no
// device controller and whose only throttling source is the kernel's
// under-voltage alarm, set: it says which USB fault it is and what to do,
// and that the alarm is all it can see.
func TestWebUIHardwareFaults(t *testing.T) {
	root := t.TempDir()
	for _, tree := range []string{"pi4-no-udc", "pi3-hwmon-undervoltage"} {
		if err := fixture.UnpackFile(filepath.Join(repoRoot, "hw", "testdata", tree+".ttar"), root); err != nil {
			t.Fatal(err)
		}
	}
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--root", root, "--users", users,
		"--journal-dir", t.TempDir(), "--meta", filepath.Join(root, "no-meta"), "--extras", filepath.Join(root, "no-extras"))
	ctx := startBrowser(t)
	act(t, ctx, "opening the dashboard", chromedp.Navigate(d.URL+"/"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "dashboard after login", chromedp.WaitVisible(`#usb-state`, chromedp.ByQuery), ready)
	for sel, want := range map[string]string{
		"#usb-state":  "No USB device controller",
		"#usb-udc":    "dtoverlay=dwc2,dr_mode=peripheral",
		"#throttling": "Under-voltage now",
	} {
		waitText(t, ctx, sel, want)
	}
	waitText(t, ctx, "#throttling", "Only the kernel's under-voltage alarm")
	if got := text(t, ctx, "#throttling"); strings.Contains(got, "No throttling") {
		t.Errorf("throttling card claims no throttling from the alarm alone: %q", got)
	}
}
