package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// baselineBody is what kvmd answers on an authenticated GET /api/auth/check.
const baselineBody = `{"ok":true,"result":{}}`

// baselineHandler answers every request with baselineBody, the paths of
// bodies (such as /api/info) with their JSON bytes, and the files of the
// bare page: the
// least any server has to do to produce kvmd's bytes, so the ratio against
// it is the cost of everything kvmd adds.
func baselineHandler(bodies map[string][]byte) http.Handler {
	reply := func(ctype string, body []byte) http.HandlerFunc {
		length := strconv.Itoa(len(body))
		return func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", ctype)
			h.Set("Content-Length", length)
			_, _ = w.Write(body)
		}
	}
	check := reply("application/json", []byte(baselineBody))
	routes := map[string]http.HandlerFunc{}
	for p, f := range basePageFiles {
		routes[p] = reply(f.ctype, f.body)
	}
	for p, body := range bodies {
		routes[p] = reply("application/json", body)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.URL.Path]; ok {
			h(w, r)
			return
		}
		check(w, r)
	})
}

// basePagePath is the bare page the web UI rows compare kvmd's pages with:
// an HTML page, one stylesheet and one module script, padded with comments
// to about the size of kvmd's dashboard (its HTML, stylesheet and two
// scripts), served without a session, security headers or revalidation.
// Its script fetches /api/info once, renders it and sets data-ready, as
// the dashboard does.
const basePagePath = "/page"

var basePageFiles = map[string]struct {
	ctype string
	body  []byte
}{
	basePagePath: {"text/html; charset=utf-8", padded(basePageHTML, "<!-- ", " -->\n", "</main>\n</body>\n</html>\n", 2<<10)},
	"/page.css":  {"text/css; charset=utf-8", padded(basePageCSS, "/* ", " */\n", "", 5<<10)},
	"/page.js":   {"text/javascript; charset=utf-8", padded(basePageJS, "/* ", " */\n", "", 12<<10)},
}

const basePageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Baseline · kvmbench</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/page.css">
<script type="module" src="/page.js"></script>
</head>
<body>
<main>
<h1>Baseline</h1>
<dl id="info"></dl>
`

const basePageCSS = `body { margin: 0; font: 15px/1.4 system-ui, sans-serif; color: #1d1f21; background: #f4f5f7; }
main { max-width: 60rem; margin: 1rem auto; padding: 1rem; background: #fff; border-radius: 8px; }
h1 { font-size: 1.3rem; margin: 0 0 1rem; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.3rem 1rem; }
dt { color: #5c6370; }
dd { margin: 0; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: 0.85rem; }
`

const basePageJS = `// The baseline page: one fetch, one render, then ready.
const res = await fetch('/api/info', { credentials: 'same-origin' });
const info = (await res.json()).result || {};
const list = document.getElementById('info');
for (const [name, value] of Object.entries(info)) {
  const dt = document.createElement('dt');
  dt.textContent = name;
  const dd = document.createElement('dd');
  dd.textContent = JSON.stringify(value).slice(0, 300);
  list.append(dt, dd);
}
document.body.dataset.ready = '1';
`

// padded returns head, a comment (open, filler, end) and tail, size bytes
// in all, or without filler when head and tail are already that long.
func padded(head, open, end, tail string, size int) []byte {
	n := max(size-len(head)-len(open)-len(end)-len(tail), 0)
	const line = "padding to the size of a kvmd page\n"
	filler := strings.Repeat(line, n/len(line)+1)[:n]
	return []byte(head + open + filler + end + tail)
}

// serveBaseline runs the bare server on addr until ctx ends. It runs in its
// own process (the driver execs itself) so it does not share the driver's
// Go runtime.
func serveBaseline(ctx context.Context, addr string, bodies map[string][]byte) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %s: loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           baselineHandler(bodies),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
