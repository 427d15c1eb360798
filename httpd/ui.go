package httpd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// pageCSP is the Content-Security-Policy of the web UI's files and of a
// page with nothing inline: scripts, styles and images from the device
// only, requests to it only, never framed. A page with its stylesheet and
// script inline allows those two as well, by hash (inlineAssets).
var pageCSP = pageCSPFor(nil, nil)

// The web UI's pages: path → file in Config.UI. All but the login page
// need a session; a browser without one is sent to the login page.
var uiPages = map[string]struct {
	file   string
	public bool
}{
	"/":          {file: "index.html"},
	"/console":   {file: "console.html"},
	"/logs":      {file: "logs.html"},
	"/sessions":  {file: "sessions.html"},
	"/tokens":    {file: "tokens.html"},
	"/users":     {file: "users.html"},
	"/twofactor": {file: "twofactor.html"},
	"/login":     {file: "login.html", public: true},
}

// uiAliases are PiKVM's page paths that kvmd's login may redirect to
// (/kvm, /kvm/: its KVM page): they send the browser to this daemon's
// console, its KVM page.
var uiAliases = map[string]string{"/kvm": "/console", "/kvm/": "/console"}

// uiStatic is the prefix of the UI's other files (scripts, styles): they
// hold nothing secret and the login page needs them, so they are public.
const uiStatic = "/static/"

// uiFile is one file of the UI, read once at start (they are embedded in
// the binary and small).
type uiFile struct {
	data     []byte
	etag     string
	ctype    string
	csp      string  // the page's own Content-Security-Policy; "": pageCSP
	redirect string  // set: a 302 there instead
	gz       *uiGzip // nil: never compressed (too small)
}

// loadUI reads every file of fsys, gives each page one script (bundleUI),
// its logo inline (inlineLogo), then its stylesheet and script inline
// (inlineAssets); skipped are the pages left with their scripts as they
// are, with why.
func loadUI(fsys fs.FS) (files map[string]*uiFile, skipped map[string]error, err error) {
	if files, err = readUI(fsys); err != nil {
		return nil, nil, err
	}
	skipped = bundleUI(files)
	inlineLogo(files)
	inlineAssets(files)
	return files, skipped, nil
}

// readUI reads every file of fsys.
func readUI(fsys fs.FS) (map[string]*uiFile, error) {
	files := map[string]*uiFile{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[p] = newUIFile(p, data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("httpd: reading the web UI: %w", err)
	}
	for _, pg := range uiPages {
		if files[pg.file] == nil {
			return nil, fmt.Errorf("httpd: the web UI has no %s", pg.file)
		}
	}
	return files, nil
}

// uiTypes are the Content-Types of the web UI's files, by extension (a
// test holds every file package web ships to it). The mime package's
// TypeByExtension would read the system's MIME database (/etc/mime.types,
// /usr/share/mime/globs2) on first use: a different answer on a Buildroot
// image without it, and some 400 KB kept on the heap for as long as the
// daemon runs, which every garbage collection scans.
var uiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// newUIFile is the file named name, of data.
func newUIFile(name string, data []byte) *uiFile {
	sum := sha256.Sum256(data)
	ctype := uiTypes[path.Ext(name)]
	if ctype == "" {
		ctype = http.DetectContentType(data)
	}
	f := &uiFile{data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
	if len(data) >= gzipMin {
		f.gz = &uiGzip{}
	}
	return f
}

// uiRoute returns the UI file for a request path outside /api, and
// whether it needs a session; nil when the path is not the UI's.
func (s *Server) uiRoute(p string) (f *uiFile, public bool) {
	if s.ui == nil {
		return nil, false
	}
	if pg, ok := uiPages[p]; ok {
		return s.ui[pg.file], pg.public
	}
	if to, ok := uiAliases[p]; ok {
		return &uiFile{redirect: to}, true
	}
	if name, ok := strings.CutPrefix(p, uiStatic); ok {
		if _, page := pageFiles[name]; !page {
			return s.ui[name], true
		}
	}
	return nil, false
}

// pageFiles are served only at their pages' paths, where the session
// check is, never as static files.
var pageFiles = func() map[string]bool {
	m := map[string]bool{}
	for _, pg := range uiPages {
		m[pg.file] = true
	}
	return m
}()

// serveUI answers a request for a UI file: GET and HEAD only; a page that
// needs a session, asked for without a valid one, redirects to the login
// page with the path to return to (and expired=1 when the request came
// with a session cookie that is no longer valid).
func (s *Server) serveUI(w http.ResponseWriter, r *http.Request, f *uiFile, public bool, id *Identity) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return methodNotAllowed("GET, HEAD")
	}
	h := w.Header()
	if f.csp != "" {
		h.Set("Content-Security-Policy", f.csp)
	} else {
		h.Set("Content-Security-Policy", pageCSP)
	}
	if f.redirect != "" {
		h.Set("Location", f.redirect)
		w.WriteHeader(http.StatusFound)
		return nil
	}
	if !public {
		who, err := s.authenticate(r, true)
		*id = who
		if err != nil {
			q := url.Values{"next": {r.URL.RequestURI()}}
			if _, present, _ := sessionToken(r); present {
				q.Set("expired", "1")
			}
			h.Set("Location", "/login?"+q.Encode())
			w.WriteHeader(http.StatusFound)
			return nil
		}
	}
	body, etag := uiBody(h, r, f)
	if public {
		// Public files may be revalidated rather than fetched again.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", etag)
	}
	h.Set("Content-Type", f.ctype)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	return nil
}
