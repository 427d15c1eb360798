package webtest

import (
	"context"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// violationsJS records, from the start of each document, what its
// Content-Security-Policy refused.
const violationsJS = `window.__violations = [];
document.addEventListener('securitypolicyviolation', (e) =>
  window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline') + ' line ' + e.lineNumber));`

// TestWebUIPolicy loads every page in Chromium: each page's stylesheet
// and script are in the page (the server puts them there), and its
// Content-Security-Policy must let exactly those run. A page that works
// (ready), is styled (app.css sets the body's margin to 0, a browser's
// default is 8px) and reports no violation passes; then a style and a
// script put in by hand must still be refused.
func TestWebUIPolicy(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)
	act(t, ctx, "recording violations", chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(violationsJS).Do(ctx)
		return err
	}))

	check := func(path string) {
		t.Helper()
		var violations []string
		var margin string
		act(t, ctx, path, ready,
			chromedp.Evaluate(`window.__violations`, &violations),
			chromedp.Evaluate(`getComputedStyle(document.body).marginTop`, &margin))
		if len(violations) != 0 {
			t.Errorf("%s: the policy refused %q", path, violations)
		}
		if margin != "0px" {
			t.Errorf("%s: body margin %q, want app.css's 0px", path, margin)
		}
	}
	act(t, ctx, "the login page", chromedp.Navigate(d.URL+"/login"))
	check("/login")
	login(t, ctx, "admin", "web pass", "")
	for _, path := range []string{"/", "/console", "/logs", "/sessions", "/tokens", "/users", "/twofactor"} {
		act(t, ctx, path, chromedp.Navigate(d.URL+path))
		check(path)
	}

	// What the page did not bring is still refused.
	var got struct {
		Margin     string   `json:"margin"`
		Ran        bool     `json:"ran"`
		Violations []string `json:"violations"`
	}
	act(t, ctx, "adding a style and a script", chromedp.Evaluate(`new Promise((resolve) => {
  const style = document.createElement('style');
  style.textContent = 'body { margin: 5px; }';
  document.head.append(style);
  const script = document.createElement('script');
  script.textContent = 'window.__ran = true;';
  document.head.append(script);
  setTimeout(() => resolve({ margin: getComputedStyle(document.body).marginTop,
    ran: window.__ran === true, violations: window.__violations }), 100);
})`, &got, awaitPromise))
	if got.Margin != "0px" || got.Ran || len(got.Violations) != 2 {
		t.Errorf("a style and a script added by hand: margin %q, ran %t, violations %q; want 0px, not run, two",
			got.Margin, got.Ran, got.Violations)
	}
}
