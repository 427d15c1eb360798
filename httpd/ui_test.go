package httpd

import (
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"testing/fstest"

	"kvmd/web"
)

// testUI stands in for package web's files.
var testUI = fstest.MapFS{
	"index.html":     {Data: []byte("<!doctype html><title>dashboard</title>")},
	"console.html":   {Data: []byte("<!doctype html><title>console</title>")},
	"logs.html":      {Data: []byte("<!doctype html><title>logs</title>")},
	"login.html":     {Data: []byte("<!doctype html><title>login</title>")},
	"sessions.html":  {Data: []byte("<!doctype html><title>sessions</title>")},
	"twofactor.html": {Data: []byte("<!doctype html><title>2fa</title>")},
	"users.html":     {Data: []byte("<!doctype html><title>users</title>")},
	"tokens.html":    {Data: []byte("<!doctype html><title>tokens</title>")},
	"app.css":        {Data: []byte("body{}")},
	"common.js":      {Data: []byte("export const x = 1;")},
}

// uiGet sends a request without following redirects.
func (e *env) uiGet(method, path string, hdr map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestUI(t *testing.T) {
	e := newEnv(t, envOpts{ui: testUI})
	cookie := map[string]string{"Cookie": "auth_token=" + e.login("admin", "admin-pass")}
	stale := map[string]string{"Cookie": "auth_token=" + strings.Repeat("a", 64)}
	basic := map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4tcGFzcw=="}

	tests := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		location, body     string
		ctype              string
	}{
		{"dashboard", "GET", "/", cookie, 200, "", "dashboard", "text/html; charset=utf-8"},
		{"dashboard with Basic", "GET", "/", basic, 200, "", "dashboard", "text/html; charset=utf-8"},
		{"logs", "GET", "/logs", cookie, 200, "", "logs", "text/html; charset=utf-8"},
		{"head", "HEAD", "/logs", cookie, 200, "", "", "text/html; charset=utf-8"},
		{"login page is public", "GET", "/login", nil, 200, "", "login", "text/html; charset=utf-8"},
		{"script is public", "GET", "/static/common.js", nil, 200, "", "export const x", "text/javascript; charset=utf-8"},
		{"style is public", "GET", "/static/app.css", nil, 200, "", "body{}", "text/css; charset=utf-8"},
		{"no session", "GET", "/", nil, 302, "/login?next=%2F", "", ""},
		{"no session, query kept", "GET", "/logs?seek=60", nil, 302, "/login?next=%2Flogs%3Fseek%3D60", "", ""},
		{"ended session", "GET", "/logs", stale, 302, "/login?expired=1&next=%2Flogs", "", ""},
		{"wrong password", "GET", "/", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "no"}, 302, "/login?next=%2F", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.uiGet(tt.method, tt.path, tt.hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body %q, want it to contain %q", body, tt.body)
			}
			if tt.ctype != "" && resp.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.ctype)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); csp != pageCSP {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			for _, h := range []string{"X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("no %s", h)
				}
			}
		})
	}

	// The redirect's next is a path of this device, so the login page can
	// go back to it.
	resp, _ := e.uiGet("GET", "/logs?a=1&b=%2F", nil)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if next := loc.Query().Get("next"); next != "/logs?a=1&b=%2F" {
		t.Errorf("next = %q", next)
	}

	// Static files revalidate by ETag.
	resp, _ = e.uiGet("GET", "/static/app.css", nil)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("ETag %q, Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}
	if resp, _ := e.uiGet("GET", "/static/app.css", map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
		t.Errorf("If-None-Match: status %d, want 304", resp.StatusCode)
	}

	// The API is unchanged: JSON everywhere, 401 without credentials, and
	// the UI's paths are not under /api.
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/info", 404}, // no InfoSource in this env
		{"GET", "/api/auth/check", 401},
		{"GET", "/api/", 404},
		{"GET", "/api/login", 404},
		{"GET", "/api/static/app.css", 404},
		{"GET", "/static/index.html", 404}, // pages only at their paths
		{"GET", "/static/missing.js", 404},
		{"GET", "/static/", 404},
		{"GET", "/favicon.ico", 404},
		{"POST", "/", 405},
		{"POST", "/static/app.css", 405},
	} {
		r := e.req(tc.method, tc.path, nil, "")
		if r.status != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
	}
}

// New refuses a UI without one of its pages.
func TestUIMissingPage(t *testing.T) {
	ui := fstest.MapFS{"index.html": {}, "console.html": {}, "login.html": {}, "sessions.html": {}, "tokens.html": {}, "users.html": {}, "twofactor.html": {}}
	if _, err := New(Config{UI: ui}); err == nil || !strings.Contains(err.Error(), "logs.html") {
		t.Errorf("New = %v, want an error naming logs.html", err)
	}
}

// TestUITypes: every file the web UI ships has its Content-Type in
// uiTypes, not one sniffed from its bytes.
func TestUITypes(t *testing.T) {
	err := fs.WalkDir(web.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if _, ok := uiTypes[path.Ext(name)]; !ok {
			t.Errorf("%s: no Content-Type for %q in uiTypes", name, path.Ext(name))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
