package webtest

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// TestLoginFormRecipe follows PiKVM's documented HTML form recipe in a
// real browser: a page on another site (localhost, where the device is
// 127.0.0.1: two sites to the browser) posts user, passwd, expire and
// redirect=/kvm/ to /api/auth/login, and the browser must land on the
// console (PiKVM's /kvm/ is its KVM page), logged in. The session cookie is SameSite=Strict, which the
// first page load after the cross-site post goes without; the login page
// finds the session and moves on (web/static/login.js).
func TestLoginFormRecipe(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	addr := strings.TrimPrefix(d.URL, "http://")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := fmt.Sprintf(`<!doctype html><html><body>
<form method="POST" action="http://%s/api/auth/login">
<input name="user" value="admin"><input name="passwd" value="web pass">
<input name="expire" value="0"><input name="redirect" value="/kvm/">
<button id="open" type="submit">Open PiKVM</button></form></body></html>`, addr)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	ctx := startBrowser(t)
	act(t, ctx, "the other site's form", chromedp.Navigate("http://localhost:"+port+"/"),
		chromedp.WaitVisible("#open", chromedp.ByQuery), chromedp.Click("#open", chromedp.ByQuery))
	deadline := time.Now().Add(10 * time.Second)
	var where string
	for time.Now().Before(deadline) {
		chromedp.Run(ctx, chromedp.Evaluate(`location.host + location.pathname + location.search`, &where))
		if where == addr+"/console" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if where != addr+"/console" {
		t.Fatalf("the recipe landed on %q, want the console %s/console", where, addr)
	}
	act(t, ctx, "the console", chromedp.WaitVisible(`#screen`, chromedp.ByQuery), ready)
	waitText(t, ctx, "#con-status", "1920×1080")
}
