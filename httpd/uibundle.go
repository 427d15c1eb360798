package httpd

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A page of the web UI lists its module scripts, each importing names from
// common.js. A browser then fetches them one after another as it finds the
// imports, and runs each as a module of its own: a few round trips and
// module instantiations before the page works (issue 30: the pages loaded
// in twice a bare page's time). bundleUI serves each page with one script
// instead, made from the same files when the server starts:
//
//   - the modules the page's scripts import, each once, imported ones
//     first, with their import lines taken out and the word export taken
//     off their declarations, at the bundle's top level, where the
//     scripts see their names as they saw the imported ones;
//   - then each script of the page in the page's order (the order modules
//     run in), its import lines taken out, in a block of its own, so that
//     the names it declares stay its own, and in a try, so that one that
//     throws does not stop the next, as separate modules would not.
//
// The bundle is still a module (strict, deferred), and render-blocking
// (blocking="render"): the browser draws the page once its script has run,
// not once before it and again after (Chromium otherwise often lays the
// page out while the script is still on its way, a layout in the load's
// critical path; browsers that do not know the attribute ignore it). The
// files themselves are still served as they are. Only the forms of import
// and export the UI uses are understood (named imports from a file of the
// UI, exported declarations); a page using any other is served as it is,
// and the test of the real UI (TestUIBundled) fails.

// bundleSuffix names a page's bundle: index.html's is index.bundle.js.
const bundleSuffix = ".bundle.js"

// The patterns a module is read with start with a word, not with (?m)^:
// the regexp package then looks for the word first and tries the pattern
// only where it is, and lineStart keeps the matches that start a line.
// Tried at every position, as the (?m)^ patterns were, bundling the UI took
// 16 ms of CPU at every start here (4 ms now), and its garbage, 1.4 MB
// then, was a good part of the idle daemon's heap.
var (
	moduleScriptRe = regexp.MustCompile(`(?m)^<script type="module" src="/static/([^"/]+\.js)"></script>\n`)
	modulePreRe    = regexp.MustCompile(`(?m)^<link rel="modulepreload" href="/static/([^"/]+\.js)">\n`)
	importRe       = regexp.MustCompile(`import\s*\{([^}]*)\}\s*from\s*'\./([^'/]+\.js)';[ \t]*\n`)
	exportDeclRe   = regexp.MustCompile(`export ((?:async )?function\b|const\b|let\b|class\b)`)
	importAsRe     = regexp.MustCompile(`\bas\b`)
)

// lineStart tells whether position i of src starts a line.
func lineStart(src string, i int) bool { return i == 0 || src[i-1] == '\n' }

// isWordByte is a byte of a word, as \b in the regexp package sees them.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// unbundlable returns the first form in src a bundle cannot keep: an
// import or export left at the start of a line (only spaces before it),
// import.meta or a dynamic import; "" when there is none.
func unbundlable(src string) string {
	for _, word := range [...]string{"import", "export"} {
		for i := strings.Index(src, word); i >= 0; {
			end := i + len(word)
			whole := (i == 0 || !isWordByte(src[i-1])) && (end == len(src) || !isWordByte(src[end]))
			if whole {
				if strings.TrimLeft(src[strings.LastIndexByte(src[:i], '\n')+1:i], " \t\r\v\f") == "" {
					return word
				}
				if rest := strings.TrimLeft(src[end:], " \t\r\n\v\f"); word == "import" && rest != "" && (rest[0] == '.' || rest[0] == '(') {
					return word + rest[:1]
				}
			}
			j := strings.Index(src[end:], word)
			if j < 0 {
				break
			}
			i = end + j
		}
	}
	return ""
}

// errUnbundlable is a module a bundle cannot be made of.
var errUnbundlable = errors.New("not bundled")

// bundleUI gives each page in files whose module scripts can be bundled
// one script, bundled, and returns the pages left as they are, with why.
func bundleUI(files map[string]*uiFile) map[string]error {
	skipped := map[string]error{}
	modules := map[string]*uiModule{} // common.js is in every page's bundle: read once
	for _, pg := range uiPages {
		f := files[pg.file]
		if f == nil {
			continue
		}
		page, bundle, err := bundlePage(string(f.data), files, modules)
		if err != nil {
			skipped[pg.file] = err
			continue
		}
		if page == "" {
			continue // no module scripts
		}
		name := strings.TrimSuffix(pg.file, ".html") + bundleSuffix
		if files[name] != nil {
			skipped[pg.file] = fmt.Errorf("%w: the UI has a file %s already", errUnbundlable, name)
			continue
		}
		files[pg.file] = newUIFile(pg.file, []byte(strings.Replace(page, bundleTag, `<script type="module" blocking="render" src="/static/`+name+`"></script>`+"\n", 1)))
		files[name] = newUIFile(name, []byte(bundle))
	}
	return skipped
}

// uiModule is a module of the UI as a bundle holds it.
type uiModule struct {
	imports []string // the files it imports, in order
	text    string   // its text without its import lines and export words
	err     error    // why no bundle can hold it
}

// parseModule returns the module name of files as a bundle holds it, from
// modules when it was read before (there once read).
func parseModule(name string, files map[string]*uiFile, modules map[string]*uiModule) *uiModule {
	if m := modules[name]; m != nil {
		return m
	}
	m := &uiModule{}
	modules[name] = m
	f := files[name]
	if f == nil {
		m.err = fmt.Errorf("%w: %s is not in the UI", errUnbundlable, name)
		return m
	}
	src := string(f.data)
	var b strings.Builder
	b.Grow(len(src))
	last := 0 // src up to here is in b
	for _, im := range importRe.FindAllStringSubmatchIndex(src, -1) {
		if !lineStart(src, im[0]) {
			continue
		}
		if importAsRe.MatchString(src[im[2]:im[3]]) {
			m.err = fmt.Errorf("%w: %s renames an import", errUnbundlable, name)
			return m
		}
		m.imports = append(m.imports, src[im[4]:im[5]])
		b.WriteString(src[last:im[0]])
		last = im[1]
	}
	b.WriteString(src[last:])
	src, b = b.String(), strings.Builder{}
	b.Grow(len(src))
	last = 0
	for _, ex := range exportDeclRe.FindAllStringIndex(src, -1) {
		if lineStart(src, ex[0]) {
			b.WriteString(src[last:ex[0]])
			last = ex[0] + len("export ")
		}
	}
	b.WriteString(src[last:])
	src = b.String()
	if u := unbundlable(src); u != "" {
		m.err = fmt.Errorf("%w: %s has %q", errUnbundlable, name, u)
		return m
	}
	m.text = src
	return m
}

// bundleTag marks where a page's bundle goes, in bundlePage's result.
const bundleTag = "\x00bundle\x00"

// bundlePage returns page with its module scripts and preloads taken out
// (bundleTag where the first script was) and their bundle; "" when page
// has no module script. modules keeps the modules read, for the next page.
func bundlePage(page string, files map[string]*uiFile, modules map[string]*uiModule) (string, string, error) {
	var entries []string
	for _, m := range moduleScriptRe.FindAllStringSubmatch(page, -1) {
		entries = append(entries, m[1])
	}
	if len(entries) == 0 {
		return "", "", nil
	}
	isEntry := map[string]bool{}
	for _, e := range entries {
		isEntry[e] = true
	}
	var b strings.Builder
	done := map[string]bool{}
	var addDeps func(name string, stack []string) error
	// strip returns the module's text without its imports, checking them;
	// the imported files are added first.
	strip := func(name string, stack []string) (string, error) {
		m := parseModule(name, files, modules)
		if m.err != nil {
			return "", m.err
		}
		for _, imp := range m.imports {
			if isEntry[imp] {
				return "", fmt.Errorf("%w: %s imports %s, a script of the page", errUnbundlable, name, imp)
			}
			if err := addDeps(imp, append(stack, name)); err != nil {
				return "", err
			}
		}
		return m.text, nil
	}
	addDeps = func(name string, stack []string) error {
		if done[name] {
			return nil
		}
		for _, s := range stack {
			if s == name {
				return fmt.Errorf("%w: %s imports itself through %v", errUnbundlable, name, stack)
			}
		}
		src, err := strip(name, stack)
		if err != nil {
			return err
		}
		done[name] = true
		fmt.Fprintf(&b, "// /static/%s\n%s\n", name, strings.TrimRight(src, "\n"))
		return nil
	}
	var tail strings.Builder
	for _, e := range entries {
		if done[e] {
			return "", "", fmt.Errorf("%w: %s is listed twice", errUnbundlable, e)
		}
		src, err := strip(e, nil)
		if err != nil {
			return "", "", err
		}
		done[e] = true
		fmt.Fprintf(&tail, "// /static/%s\ntry {\n%s\n} catch (e) {\n  reportError(e);\n}\n", e, strings.TrimRight(src, "\n"))
	}
	b.WriteString(tail.String())

	first := true
	page = moduleScriptRe.ReplaceAllStringFunc(page, func(string) string {
		if first {
			first = false
			return bundleTag
		}
		return ""
	})
	page = modulePreRe.ReplaceAllStringFunc(page, func(tag string) string {
		if done[modulePreRe.FindStringSubmatch(tag)[1]] {
			return ""
		}
		return tag
	})
	return page, b.String(), nil
}
