package httpd

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/fstest"
)

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                              false,
		"identity":                      false,
		"gzip":                          true,
		"gzip, deflate, br, zstd":       true, // Chromium's
		"deflate, gzip;q=1.0, *;q=0.5":  true, // curl --compressed style
		"br;q=1, GZIP;q=0.3":            true,
		"x-gzip":                        true,
		"gzip;q=0":                      false,
		"gzip; q=0.000":                 false,
		"gzip;q=nonsense":               false,
		"*":                             true,
		"*;q=0":                         false,
		"gzip;q=0, *":                   false, // named, so the star does not count
		"*, gzip;q=0":                   false,
		"br, *;q=0.1":                   true,
		"gzipx, xgzip":                  false,
		"deflate;level=1;q=0.5, gzip;x": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %t, want %t", header, got, want)
		}
	}
}

// TestUIGzip: a UI file worth compressing goes gzipped to a client that
// accepts it, with its own ETag, and as it is to one that does not; a
// small one always as it is.
func TestUIGzip(t *testing.T) {
	ui := fstest.MapFS{}
	for k, v := range testUI {
		ui[k] = v
	}
	// Hex of an LCG: gzip halves it, and the gzipped body is still more
	// than net/http buffers before it sends a reply chunked.
	var sb strings.Builder
	for i, x := 0, uint32(7); i < 2000; i++ {
		x = x*1664525 + 1013904223
		fmt.Fprintf(&sb, "%08x", x)
	}
	big := sb.String()
	ui["big.js"] = &fstest.MapFile{Data: []byte(big)}
	e := newEnv(t, envOpts{ui: ui})
	gz := map[string]string{"Accept-Encoding": "gzip, deflate, br"}
	plain := map[string]string{"Accept-Encoding": "identity"}

	resp, body := e.uiGet("GET", "/static/big.js", gz)
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("Content-Encoding %q, Vary %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"))
	}
	// Whole, with its length (not chunked).
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) != 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q, body %d bytes", resp.ContentLength, resp.TransferEncoding, len(body))
	}
	if len(body) >= len(big)*3/4 || len(body) < 4<<10 {
		t.Errorf("%d bytes gzipped, of %d", len(body), len(big))
	}
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, []byte(big)) {
		t.Errorf("gunzipped: %v, %d bytes, want the file's %d", err, len(got), len(big))
	}
	gzTag := resp.Header.Get("ETag")

	resp, body = e.uiGet("GET", "/static/big.js", plain)
	if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Vary") != "Accept-Encoding" || body != big {
		t.Errorf("identity: Content-Encoding %q, Vary %q, %d bytes", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"), len(body))
	}
	tag := resp.Header.Get("ETag")
	if gzTag == "" || tag == "" || gzTag == tag {
		t.Errorf("ETags %q and %q, want two", gzTag, tag)
	}
	// Each form revalidates by its own tag only.
	for _, tc := range []struct {
		enc, tag string
		status   int
	}{
		{"gzip", gzTag, 304}, {"identity", tag, 304}, {"gzip", tag, 200}, {"identity", gzTag, 200},
	} {
		resp, _ := e.uiGet("GET", "/static/big.js", map[string]string{"Accept-Encoding": tc.enc, "If-None-Match": tc.tag})
		if resp.StatusCode != tc.status {
			t.Errorf("%s, If-None-Match %s: %d, want %d", tc.enc, tc.tag, resp.StatusCode, tc.status)
		}
	}
	// A range is of the file as it is.
	resp, body = e.uiGet("GET", "/static/big.js", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-4"})
	if resp.StatusCode != 206 || resp.Header.Get("Content-Encoding") != "" || body != big[:5] {
		t.Errorf("a range: %d, Content-Encoding %q, %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), body)
	}
	// If-Match: the file as it is, and a 412 that is whole.
	resp, _ = e.uiGet("GET", "/static/big.js", map[string]string{"Accept-Encoding": "gzip", "If-Match": `"nope"`})
	if resp.StatusCode != 412 || resp.Header.Get("Content-Encoding") != "" {
		t.Errorf("If-Match: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	resp, body = e.uiGet("GET", "/static/big.js", map[string]string{"Accept-Encoding": "gzip", "If-Match": tag})
	if resp.StatusCode != 200 || body != big {
		t.Errorf("If-Match its tag: %d, %d bytes", resp.StatusCode, len(body))
	}
	// HEAD says what GET would send.
	if resp, body := e.uiGet("HEAD", "/static/big.js", gz); resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || body != "" {
		t.Errorf("HEAD: %d, %q, %d bytes", resp.StatusCode, resp.Header.Get("Content-Encoding"), len(body))
	}
	// Small: as it is, and no Vary (it never differs).
	resp, body = e.uiGet("GET", "/static/app.css", gz)
	if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Vary") != "" || body != "body{}" {
		t.Errorf("small file: Content-Encoding %q, Vary %q, %q", resp.Header.Get("Content-Encoding"), resp.Header.Get("Vary"), body)
	}
}

// TestUIGzipIncompressible: a file gzip does not shrink goes as it is.
func TestUIGzipIncompressible(t *testing.T) {
	data := make([]byte, 4<<10)
	x := uint32(1)
	for i := range data {
		x = x*1664525 + 1013904223 // an LCG: bytes gzip cannot shrink
		data[i] = byte(x >> 24)
	}
	f := newUIFile("noise.svg", data)
	if gz, etag := f.gzipped(); gz != nil || etag != "" {
		t.Errorf("gzipped to %d bytes, etag %q; want none", len(gz), etag)
	}
}
