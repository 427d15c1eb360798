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

	"kvmd/auth"
)

// pageCSP is the Content-Security-Policy of the web UI's files and of a
// page with nothing inline: scripts, styles and images from the device
// only, requests to it only, never framed. A page with its stylesheet and
// script inline allows those two as well, by hash (inlineAssets).
var pageCSP = pageCSPFor(nil, nil)

// uiPages are the web UI's pages, by path, as the route table's page
// rows have them: the file of each in Config.UI, its path's name with
// .html (index.html for /), and whether it is public (the login page).
var uiPages = func() map[string]uiPageFile {
	m := map[string]uiPageFile{}
	for _, rt := range routeTable {
		if rt.at == page && rt.when == withUI && rt.path != "/kvm" && rt.path != "/kvm/" {
			m[rt.path] = uiPageFile{file: pageFile(rt.path), public: rt.role == auth.RoleNone}
		}
	}
	return m
}()

type uiPageFile struct {
	file   string
	public bool
}

// pageFile is the file of the page at path.
func pageFile(path string) string {
	if path == "/" {
		return "index.html"
	}
	return strings.TrimPrefix(path, "/") + ".html"
}

// uiStatic is the prefix of the UI's other files (scripts, styles).
const uiStatic = "/static/"

// uiFile is one file of the UI, read once at start (they are embedded in
// the binary and small).
type uiFile struct {
	data  []byte
	etag  string
	ctype string
	csp   string  // the page's own Content-Security-Policy; "": pageCSP
	gz    *uiGzip // nil: never compressed (too small)
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

// pageFiles are served only at their pages' paths, where the session
// check is, never as static files.
var pageFiles = func() map[string]bool {
	m := map[string]bool{}
	for _, pg := range uiPages {
		m[pg.file] = true
	}
	return m
}()

// uiPage answers a page row: its file.
func (s *Server) uiPage(w http.ResponseWriter, r *http.Request) error {
	pg, ok := s.pages[r.URL.Path]
	if !ok || s.ui[pg.file] == nil {
		return errNotFound
	}
	s.serveUIFile(w, r, s.ui[pg.file], pg.public)
	return nil
}

// uiStatic answers a path below /static/: a file of the UI but a page's.
func (s *Server) uiStatic(w http.ResponseWriter, r *http.Request) error {
	name := strings.TrimPrefix(r.URL.Path, uiStatic)
	f := s.ui[name]
	if f == nil || s.pageFiles[name] {
		return errNotFound
	}
	s.serveUIFile(w, r, f, true)
	return nil
}

// redirectTo answers a page row with a redirect to path: PiKVM's page
// paths that kvmd's login may redirect to (/kvm, /kvm/: its KVM page)
// send the browser to this daemon's console.
func redirectTo(path string) routeHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		h := w.Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("Location", path)
		w.WriteHeader(http.StatusFound)
		return nil
	}
}

// setCSP sets the Content-Security-Policy of f.
func setCSP(h http.Header, f *uiFile) {
	if f != nil && f.csp != "" {
		h.Set("Content-Security-Policy", f.csp)
	} else {
		h.Set("Content-Security-Policy", pageCSP)
	}
}

// toLogin sends a browser that asked for a page without a valid session
// to the login page, with the path to return to (and expired=1 when the
// request came with a session cookie that is no longer valid).
func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	var f *uiFile
	if pg, ok := s.pages[r.URL.Path]; ok {
		f = s.ui[pg.file]
	}
	setCSP(h, f)
	q := url.Values{"next": {r.URL.RequestURI()}}
	if _, present, _ := sessionToken(r); present {
		q.Set("expired", "1")
	}
	h.Set("Location", "/login?"+q.Encode())
	w.WriteHeader(http.StatusFound)
	return nil
}

// serveUIFile answers with a UI file (GET and HEAD: its row's methods);
// public files may be revalidated rather than fetched again.
func (s *Server) serveUIFile(w http.ResponseWriter, r *http.Request, f *uiFile, public bool) {
	h := w.Header()
	setCSP(h, f)
	body, etag := uiBody(h, r, f)
	if public {
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", etag)
	}
	h.Set("Content-Type", f.ctype)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
