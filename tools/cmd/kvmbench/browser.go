//go:build !arm && !arm64

// The browser driver is left out of the ARM builds: they exist to be the
// bare baseline under qemu-user, and chromedp and cdproto would add about
// 1 MiB to that baseline's RSS (browser_none.go stands in).

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// findBrowser returns the path of Debian's Chromium.
func findBrowser() (string, error) {
	p, err := exec.LookPath("chromium")
	if err != nil {
		return "", errors.New("chromium is not installed (apt-get install chromium, or make deps)")
	}
	return p, nil
}

// pageLoader is one tab of a headless Chromium that loads pages and times
// them.
type pageLoader struct {
	tab     context.Context
	close   context.CancelFunc
	product string // Chromium's name and version
	token   string // the session cookie's value
	signed  bool   // whether the browser has the cookie now
}

// newPageLoader starts the Chromium at path with its profile in
// profileDir, kept off the network but for the pages it is sent to, with
// the session cookie token set for 127.0.0.1, so that every load is the
// page itself, and the HTTP cache off, so that every load fetches every
// file.
func newPageLoader(ctx context.Context, path, profileDir, token string) (*pageLoader, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profileDir), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	// Closed gracefully: killed, its helper processes could still be
	// writing to the profile while it is removed.
	l := &pageLoader{tab: tab, token: token, signed: token != "", close: func() { _ = chromedp.Cancel(tab); cancelTab(); cancelAlloc() }}
	var actions []chromedp.Action
	if token != "" {
		actions = append(actions, l.setCookie())
	}
	actions = append(actions, network.SetCacheDisabled(true),
		chromedp.ActionFunc(func(ctx context.Context) error {
			_, err := page.AddScriptToEvaluateOnNewDocument(readyObserverJS).Do(ctx)
			return err
		}),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			_, l.product, _, _, _, err = browser.GetVersion().Do(ctx)
			return err
		}))
	if err := chromedp.Run(tab, actions...); err != nil {
		l.close()
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	return l, nil
}

func (l *pageLoader) setCookie() chromedp.Action {
	return network.SetCookie("auth_token", l.token).WithDomain("127.0.0.1").WithPath("/").WithHTTPOnly(true)
}

// session gives the browser the session cookie again (on) or takes it away
// (off) for the loads that follow: the login page moves on to the
// dashboard when a session exists, so it is loaded signed out, as a user
// who needs it meets it.
func (l *pageLoader) session(on bool) error {
	if l.token == "" || l.signed == on {
		return nil
	}
	var a chromedp.Action = network.DeleteCookies("auth_token").WithDomain("127.0.0.1")
	if on {
		a = l.setCookie()
	}
	if err := chromedp.Run(l.tab, a); err != nil {
		return err
	}
	l.signed = on
	return nil
}

// Close ends the browser.
func (l *pageLoader) Close() { l.close() }

// readyObserverJS runs in every new document before its own scripts: it
// notes performance.now() (ms since navigation start) when the page sets
// body[data-ready="1"]. A MutationObserver callback runs right after the
// script that set the attribute, so the time is the page's, not a poll's.
const readyObserverJS = `new MutationObserver((_, obs) => {
  if (document.body && document.body.dataset.ready === '1') {
    window.__kvmbenchReady = performance.now();
    obs.disconnect();
  }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-ready'] });`

// uiSampleJS resolves, once the page has both fired its load event and
// become ready, to what uiSample holds. It checks every 10 ms; the times
// come from the page's clock, so this only delays the answer.
const uiSampleJS = `new Promise((resolve) => {
  const check = () => {
    const nav = performance.getEntriesByType('navigation')[0];
    if (!nav || !(nav.loadEventEnd > 0) || window.__kvmbenchReady === undefined) {
      setTimeout(check, 10);
      return;
    }
    const res = performance.getEntriesByType('resource');
    resolve({ path: location.pathname, load: nav.loadEventEnd, ready: window.__kvmbenchReady,
      requests: 1 + res.length, bytes: [nav, ...res].reduce((n, e) => n + e.encodedBodySize, 0) });
  };
  check();
})`

// load navigates the tab from a blank page to url, waits until the page
// has fired its load event and become ready, and checks it is still at
// path.
func (l *pageLoader) load(url, path string) (uiSample, error) {
	ctx, cancel := context.WithTimeout(l.tab, uiLoadTimeout)
	defer cancel()
	var s uiSample
	// Evaluate rather than chromedp.Poll: Poll names the execution context
	// chromedp last saw, which can be the blank page's just after the
	// navigation ("Cannot find context with specified id").
	err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url),
		chromedp.Evaluate(uiSampleJS, &s, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if errors.Is(err, context.DeadlineExceeded) {
		return s, fmt.Errorf("not loaded and ready within %v", uiLoadTimeout)
	}
	if err != nil {
		return s, err
	}
	return s, s.check(path)
}
