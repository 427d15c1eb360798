package httpd

import (
	"bytes"
	"net/http"
	"sync"
)

// securityHeaders go on every reply: an API answer is never to be sniffed,
// framed, cached or given a referrer. securityHeaderList is the same in
// order; every reply shares the values (net/http copies them before it
// writes).
var securityHeaders = func() map[string][]string {
	m := map[string][]string{}
	for _, kv := range securityHeaderList {
		m[kv.name] = kv.value
	}
	return m
}()

var securityHeaderList = []struct {
	name  string
	value []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Referrer-Policy", []string{"no-referrer"}},
	{"Cache-Control", []string{"no-store"}},
	{"Content-Security-Policy", []string{"default-src 'none'; frame-ancestors 'none'"}},
	{"Cross-Origin-Resource-Policy", []string{"same-origin"}},
}

// The six headers are the same bytes on every reply, but net/http makes
// each line anew per reply: it copies the header map, sorts its keys and
// cleans each value before it writes it, a good part of a short reply's
// cost. A reply that goes out through one of Serve's connections carries
// one line in their place, securityMark, which net/http sorts first of the
// handler's headers, right after the status line; the connection (conn.Write)
// puts securityBlock, the six lines made once, where it is. What the client
// reads is the same headers.
//
// A handler that sets one of the six itself (the web UI's pages have their
// own Content-Security-Policy) gets them all as ordinary headers before
// the reply's head goes out (recorder, sealSecurityHeaders), so its own
// replaces the default, as it did when all six were in the map.
const (
	securityMarkKey  = "!kvmd-Security-Headers" // canonical; '!' sorts before every letter
	securityMarkLine = securityMarkKey + ": 1\r\n"
)

var securityMark = []string{"1"}

// securityBlock is the six header lines, as net/http would write them.
var securityBlock = func() []byte {
	var b bytes.Buffer
	h := http.Header{}
	for _, kv := range securityHeaderList {
		h[kv.name] = kv.value
	}
	if err := h.Write(&b); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// setSecurityHeaders puts the security headers in h: the mark, when the
// reply goes out through a conn (viaConn), which writes them in its
// place; the six headers otherwise (a request ServeHTTP got from another
// server).
func setSecurityHeaders(h http.Header, viaConn bool) {
	if viaConn {
		h[securityMarkKey] = securityMark
		return
	}
	for _, kv := range securityHeaderList {
		h[kv.name] = kv.value
	}
}

// sealSecurityHeaders is called before a reply's head goes out: when the
// handler set one of the security headers itself, the mark gives way to
// the six as ordinary headers, the handler's own value kept.
func sealSecurityHeaders(h http.Header) {
	if _, marked := h[securityMarkKey]; !marked {
		return
	}
	// Most replies have the mark and a JSON body's two headers, nothing
	// else: two lookups tell.
	n := 1
	for _, k := range [...]string{"Content-Type", "Content-Length"} {
		if _, ok := h[k]; ok {
			n++
		}
	}
	if len(h) == n {
		return
	}
	own := false
	for _, kv := range securityHeaderList {
		if _, ok := h[kv.name]; ok {
			own = true
			break
		}
	}
	if !own {
		return
	}
	delete(h, securityMarkKey)
	for _, kv := range securityHeaderList {
		if _, ok := h[kv.name]; !ok {
			h[kv.name] = kv.value
		}
	}
}

// markAt returns where the mark's line is in p, a write to a connection,
// or -1: only right after the status line of a reply, where net/http
// writes it (each reply's head starts a write: net/http flushes its
// buffer after every reply).
func markAt(p []byte) int {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) && !bytes.HasPrefix(p, []byte("HTTP/1.0 ")) {
		return -1
	}
	i := bytes.IndexByte(p, '\n') + 1
	if i == 0 || !bytes.HasPrefix(p[i:], []byte(securityMarkLine)) {
		return -1
	}
	return i
}

var spliceBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeSpliced writes p with the mark's line at i replaced by
// securityBlock, in one write.
func (c *conn) writeSpliced(p []byte, i int) (int, error) {
	bp := spliceBufs.Get().(*[]byte)
	b := append(append(append((*bp)[:0], p[:i]...), securityBlock...), p[i+len(securityMarkLine):]...)
	_, err := c.Conn.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		spliceBufs.Put(bp)
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}
