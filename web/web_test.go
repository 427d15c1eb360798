package web

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"

	"kvmd/hid"
)

// readAll returns every file of FS by name.
func readAll(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(FS(), p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFilesPresent(t *testing.T) {
	files := readAll(t)
	for _, name := range []string{
		"login.html", "index.html", "console.html", "console.js", "logs.html", "app.css", "common.js",
		"login.js", "dashboard.js", "logs.js", "favicon.svg", "msd.js", "events.js",
		"sessions.html", "sessions.js", "tokens.html", "tokens.js", "users.html", "users.js", "twofactor.html", "twofactor.js",
	} {
		if files[name] == "" {
			t.Errorf("%s is missing or empty", name)
		}
	}
}

var staticRef = regexp.MustCompile(`(?:src|href)="/static/([^"]+)"`)

func TestHTMLReferences(t *testing.T) {
	files := readAll(t)
	for name, text := range files {
		if path.Ext(name) != ".html" {
			continue
		}
		refs := staticRef.FindAllStringSubmatch(text, -1)
		if len(refs) == 0 {
			t.Errorf("%s references nothing under /static/", name)
		}
		for _, m := range refs {
			if _, ok := files[m[1]]; !ok {
				t.Errorf("%s references /static/%s, which does not exist", name, m[1])
			}
		}
	}
}

// The pages run under script-src 'self' and style-src 'self': anything
// inline would be blocked.
var inline = []struct {
	what string
	re   *regexp.Regexp
}{
	{"inline script", regexp.MustCompile(`(?is)<script\b[^>]*>\s*[^<\s]`)},
	{"event handler attribute", regexp.MustCompile(`(?i)<[^>]*\son[a-z]+\s*=`)},
	{"style attribute", regexp.MustCompile(`(?i)<[^>]*\sstyle\s*=`)},
	{"style element", regexp.MustCompile(`(?i)<style\b`)},
	{"javascript: URL", regexp.MustCompile(`(?i)javascript:`)},
}

func TestHTMLHasNothingInline(t *testing.T) {
	for name, text := range readAll(t) {
		if path.Ext(name) != ".html" {
			continue
		}
		for _, c := range inline {
			if m := c.re.FindString(text); m != "" {
				t.Errorf("%s has an %s: %q", name, c.what, m)
			}
		}
	}
}

func TestInlinePatterns(t *testing.T) {
	// The checks above must catch what they are for, and pass clean pages.
	bad := []string{
		`<script>alert(1)</script>`,
		`<script type="module">import "x"</script>`,
		`<button onclick="x()">`,
		`<p style="color:red">`,
		`<style>p{}</style>`,
	}
	for _, s := range bad {
		caught := false
		for _, c := range inline {
			caught = caught || c.re.MatchString(s)
		}
		if !caught {
			t.Errorf("%q is not caught", s)
		}
	}
	good := `<script type="module" src="/static/a.js"></script><button id="login-submit" type="submit">`
	for _, c := range inline {
		if m := c.re.FindString(good); m != "" {
			t.Errorf("%s check matches a clean page: %q", c.what, m)
		}
	}
}

// TestScriptSize bounds the script each page loads (its module scripts
// and what they import, each file once): what a phone on a slow link
// fetches and parses before the page works. The whole UI may grow with its
// pages; one page may not.
func TestScriptSize(t *testing.T) {
	const limit = 40 << 10
	files := readAll(t)
	scriptRe := regexp.MustCompile(`<script[^>]*\ssrc="/static/([^"]+\.js)"`)
	importRe := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^;]*?from\s+'\./([^']+\.js)'`)
	pages := 0
	for name, text := range files {
		if path.Ext(name) != ".html" {
			continue
		}
		pages++
		seen := map[string]bool{}
		var walk func(js string)
		walk = func(js string) {
			if seen[js] {
				return
			}
			seen[js] = true
			body, ok := files[js]
			if !ok {
				t.Errorf("%s loads %s, which is not in the UI", name, js)
			}
			for _, m := range importRe.FindAllStringSubmatch(body, -1) {
				walk(m[1])
			}
		}
		for _, m := range scriptRe.FindAllStringSubmatch(text, -1) {
			walk(m[1])
		}
		total := 0
		for js := range seen {
			total += len(files[js])
		}
		if len(seen) == 0 || total >= limit {
			t.Errorf("%s loads %d bytes of JavaScript in %d files, want between 1 and %d", name, total, len(seen), limit)
		}
	}
	if pages == 0 {
		t.Error("no pages")
	}
}

func TestScriptsAvoid(t *testing.T) {
	// Data goes into the page as text, never as markup; credentials stay in
	// the HttpOnly cookie; the CSP forbids eval.
	banned := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
		"localStorage", "sessionStorage", "document.cookie", "eval(", "new Function"}
	for name, text := range readAll(t) {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, b := range banned {
			if strings.Contains(text, b) {
				t.Errorf("%s uses %s", name, b)
			}
		}
	}
}

var importFrom = regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]`)

func TestImportsExist(t *testing.T) {
	files := readAll(t)
	found := 0
	for name, text := range files {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, m := range importFrom.FindAllStringSubmatch(text, -1) {
			found++
			spec := m[1] + m[2]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "/static/") {
				t.Errorf("%s imports %q: only files of this site may be imported", name, spec)
				continue
			}
			target := path.Join(path.Dir(name), strings.TrimPrefix(spec, "/static/"))
			if _, ok := files[target]; !ok {
				t.Errorf("%s imports %q, which does not exist", name, spec)
			}
		}
	}
	if found < 3 {
		t.Errorf("found %d imports, want one in each page's script at least", found)
	}
}

// TestShortcutKeys: every shortcut button on the dashboard presses keys
// the HID layer knows (send_shortcut refuses an unknown name), at most
// six besides modifiers, and no two buttons are the same.
func TestShortcutKeys(t *testing.T) {
	page := readAll(t)["index.html"]
	buttons := regexp.MustCompile(`<button type="button" class="secondary" data-keys="([^"]*)">([^<]+)</button>`).FindAllStringSubmatch(page, -1)
	if len(buttons) < 10 {
		t.Fatalf("%d shortcut buttons in index.html", len(buttons))
	}
	seen := map[string]bool{}
	for _, b := range buttons {
		if seen[b[1]] || seen[b[2]] {
			t.Errorf("%s (%s) twice", b[2], b[1])
		}
		seen[b[1]], seen[b[2]] = true, true
		for _, name := range strings.Split(b[1], ",") {
			if _, ok := hid.KeyByName(name); !ok {
				t.Errorf("%s: no key %q", b[2], name)
			}
		}
	}
}
