package httpd

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// A page now carries its stylesheet and script (inlineAssets): the
// dashboard is some 52 KB where it was 8.6 KB and two revalidations. On a
// LAN that is nothing; over a slow link to the device it would be. The UI's
// files therefore go gzipped to a browser that accepts it (every browser
// does): the dashboard is then 16 KB. A file is compressed once, the first
// time it is asked for, so that starting the daemon does not wait for it;
// one that gzip would not make smaller by a tenth is sent as it is. The pages
// and files are the device's own and never hold anything of the request,
// so compressing them gives nothing away (BREACH needs a secret and the
// attacker's text in the same compressed reply).

// gzipMin is the smallest file worth compressing.
const gzipMin = 1 << 10

// uiGzip is the gzipped form of a UI file, made on first use.
type uiGzip struct {
	once sync.Once
	data []byte // nil: sent as it is
	etag string
}

// gzipped returns f's gzipped bytes and their ETag, nil when f is sent as
// it is.
func (f *uiFile) gzipped() ([]byte, string) {
	if f.gz == nil {
		return nil, ""
	}
	f.gz.once.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // the level is valid
		if _, err := zw.Write(f.data); err != nil || zw.Close() != nil {
			return
		}
		if b.Len() > len(f.data)-len(f.data)/10 {
			return
		}
		f.gz.data = b.Bytes()
		f.gz.etag = strings.TrimSuffix(f.etag, `"`) + `-gzip"`
	})
	return f.gz.data, f.gz.etag
}

// acceptsGzip tells whether an Accept-Encoding header allows gzip: named,
// or "*" when not named, with a q above zero.
func acceptsGzip(header string) bool {
	star := false
	for header != "" {
		var part string
		part, header, _ = strings.Cut(header, ",")
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		ok := qAboveZero(params)
		if coding == "*" {
			star = ok
			continue
		}
		return ok
	}
	return star
}

// qAboveZero tells whether the parameters of one coding in Accept-Encoding
// give it a q above zero (no q is q=1).
func qAboveZero(params string) bool {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, value, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return err == nil && q > 0
	}
	return true
}

// uiBody returns the bytes to send of f for r, and their ETag, setting
// Content-Encoding, Content-Length and Vary in h.
//
// http.ServeContent leaves out the length of a reply with a
// Content-Encoding (it would be wrong for a range of it), and such a reply
// then goes chunked: its last chunk is a write of its own after the
// handler is done, after the access log's line, and the browser waits for
// it. A gzipped file therefore goes whole, with its length. A request for
// a range of a file, or one with If-Match (browsers send neither for
// these; a 412 would go with the length of a body it does not have),
// gets the file as it is, which http.ServeContent answers in full.
func uiBody(h http.Header, r *http.Request, f *uiFile) ([]byte, string) {
	gz, etag := f.gzipped()
	if gz == nil {
		return f.data, f.etag
	}
	h.Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) || r.Header.Get("Range") != "" || r.Header.Get("If-Match") != "" {
		return f.data, f.etag
	}
	h.Set("Content-Encoding", "gzip")
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	return gz, etag
}
