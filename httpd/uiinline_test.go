package httpd

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"kvmd/web"
)

var (
	inlineStyleRe  = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	inlineScriptRe = regexp.MustCompile(`(?s)<script type="module">(.*?)</script>`)
	anyScriptRe    = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	cspHashRe      = regexp.MustCompile(`'sha256-([A-Za-z0-9+/=]+)'`)
)

// hashesOf returns the SHA-256 sources a CSP directive allows, base64.
func hashesOf(t *testing.T, csp, directive string) []string {
	t.Helper()
	for _, d := range strings.Split(csp, ";") {
		fields := strings.Fields(d)
		if len(fields) > 0 && fields[0] == directive {
			var out []string
			for _, m := range cspHashRe.FindAllStringSubmatch(d, -1) {
				out = append(out, m[1])
			}
			return out
		}
	}
	t.Fatalf("no %s in %q", directive, csp)
	return nil
}

// sha256B64 is how a CSP names text by hash.
func sha256B64(text string) string {
	sum := sha256.Sum256([]byte(text))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// checkInlined holds page to one inline stylesheet (css, from the file)
// and one inline module script (js), nothing linked, and csp to allowing
// exactly those two by their hashes, computed here from the page's text.
func checkInlined(t *testing.T, name, page, csp, css, js string) {
	t.Helper()
	if strings.Contains(page, `rel="stylesheet"`) {
		t.Errorf("%s still links a stylesheet", name)
	}
	styles := inlineStyleRe.FindAllStringSubmatch(page, -1)
	scripts := inlineScriptRe.FindAllStringSubmatch(page, -1)
	if len(styles) != 1 || len(scripts) != 1 || len(anyScriptRe.FindAllString(page, -1)) != 1 {
		t.Fatalf("%s: %d <style>, %d inline module scripts, %d scripts in all; want one, one, one",
			name, len(styles), len(scripts), len(anyScriptRe.FindAllString(page, -1)))
	}
	if styles[0][1] != strings.TrimRight(css, "\n") {
		t.Errorf("%s: the <style> is not the stylesheet", name)
	}
	if js != "" && scripts[0][1] != strings.TrimRight(js, "\n") {
		t.Errorf("%s: the script is not the bundle", name)
	}
	if got := hashesOf(t, csp, "style-src"); len(got) != 1 || got[0] != sha256B64(styles[0][1]) {
		t.Errorf("%s: style-src hashes %v, want the <style>'s %s", name, got, sha256B64(styles[0][1]))
	}
	if got := hashesOf(t, csp, "script-src"); len(got) != 1 || got[0] != sha256B64(scripts[0][1]) {
		t.Errorf("%s: script-src hashes %v, want the script's %s", name, got, sha256B64(scripts[0][1]))
	}
	if want := strings.NewReplacer(" 'sha256-"+sha256B64(styles[0][1])+"'", "",
		" 'sha256-"+sha256B64(scripts[0][1])+"'", "").Replace(csp); want != pageCSP {
		t.Errorf("%s: CSP without its hashes is %q, want pageCSP %q", name, want, pageCSP)
	}
}

// TestUIInline: a page's stylesheet and bundle go in the page, allowed
// by hash; the bundle is no longer a file; what could end an inline
// element early stays a file.
func TestUIInline(t *testing.T) {
	bundled, _, err := bundledUI(bundleTestUI(nil))
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := loadUI(bundleTestUI(nil))
	if err != nil {
		t.Fatal(err)
	}
	f := files["index.html"]
	checkInlined(t, "index.html", string(f.data), f.csp, "body{}", string(bundled["index.bundle.js"].data))
	if files["index.bundle.js"] != nil {
		t.Error("index.bundle.js is still served")
	}
	if files["app.css"] == nil || files["a.js"] == nil {
		t.Error("the UI's own files are no longer served")
	}
	// A page with nothing to put in keeps the default policy.
	if f := files["logs.html"]; f.csp != "" || string(f.data) != "<!doctype html><title>logs</title>" {
		t.Errorf("logs.html: csp %q, %q", f.csp, f.data)
	}

	// Served: the page's own policy on it, the default on the files.
	e := newEnv(t, envOpts{ui: bundleTestUI(nil)})
	cookie := map[string]string{"Cookie": "auth_token=" + e.login("admin", "admin-pass")}
	resp, body := e.uiGet("GET", "/", cookie)
	if resp.StatusCode != 200 || body != string(f.data) || resp.Header.Get("Content-Security-Policy") != f.csp {
		t.Errorf("GET /: %d, CSP %q, body %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"), body)
	}
	if resp, _ := e.uiGet("GET", "/static/index.bundle.js", nil); resp.StatusCode != 404 {
		t.Errorf("GET the bundle: %d, want 404", resp.StatusCode)
	}
	if resp, _ := e.uiGet("GET", "/static/app.css", nil); resp.Header.Get("Content-Security-Policy") != pageCSP {
		t.Errorf("app.css: CSP %q", resp.Header.Get("Content-Security-Policy"))
	}

	for name, tc := range map[string]struct {
		file, text  string
		style, link string // what the page must then have
	}{
		"style ending":  {"app.css", "p::after { content: '</style>' }", "", `<link rel="stylesheet" href="/static/app.css">`},
		"style comment": {"app.css", "/* <!-- */", "", `<link rel="stylesheet" href="/static/app.css">`},
		"script ending": {"b.js", "const s = '</SCRIPT>';\n", "<style>body{}</style>",
			`<script type="module" blocking="render" src="/static/index.bundle.js"></script>`},
		"script start": {"b.js", "const s = '<script>';\n", "<style>body{}</style>",
			`<script type="module" blocking="render" src="/static/index.bundle.js"></script>`},
	} {
		files, _, err := loadUI(bundleTestUI(fstest.MapFS{tc.file: {Data: []byte(tc.text)}}))
		if err != nil {
			t.Fatal(err)
		}
		f := files["index.html"]
		page := string(f.data)
		if !strings.Contains(page, tc.link) || (tc.style != "" && !strings.Contains(page, tc.style)) {
			t.Errorf("%s: page\n%s", name, page)
		}
		linked := strings.Contains(tc.link, "bundle")
		if linked != (files["index.bundle.js"] != nil) {
			t.Errorf("%s: bundle served %t, want %t", name, files["index.bundle.js"] != nil, linked)
		}
		// Only what went in is allowed inline.
		if n := len(hashesOf(t, f.csp, "style-src")) + len(hashesOf(t, f.csp, "script-src")); n != 1 {
			t.Errorf("%s: %d hashes in %q, want 1", name, n, f.csp)
		}
	}
}

// TestUIInlined holds every page of the real UI to its stylesheet and
// bundle inline, each allowed by its hash and nothing else inline.
func TestUIInlined(t *testing.T) {
	bundled, _, err := bundledUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	files, _, err := loadUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	css := string(bundled["app.css"].data)
	for _, pg := range uiPages {
		f := files[pg.file]
		bundle := strings.TrimSuffix(pg.file, ".html") + bundleSuffix
		if bundled[bundle] == nil {
			t.Errorf("%s has no bundle", pg.file)
			continue
		}
		checkInlined(t, pg.file, string(f.data), f.csp, css, string(bundled[bundle].data))
		if files[bundle] != nil {
			t.Errorf("%s is still served", bundle)
		}
		if m := regexp.MustCompile(`(?i)\sstyle=|\son[a-z]+=`).FindString(string(f.data)); m != "" {
			t.Errorf("%s has %q, which its policy refuses", pg.file, m)
		}
	}
}
