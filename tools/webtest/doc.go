// Package webtest drives kvmd's web UI in a real headless Chromium
// (Debian's chromium, through chromedp) against the daemon binary built
// from this checkout, serving the demo board and a real journal. It holds
// only tests; they save their screenshots to docs/screenshots, which the
// manual shows (docs/web-ui.md). It lives in the tools module so that the
// daemon's go.mod does not list chromedp.
package webtest
