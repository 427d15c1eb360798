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

var (
	moduleScriptRe = regexp.MustCompile(`(?m)^<script type="module" src="/static/([^"/]+\.js)"></script>\n`)
	modulePreRe    = regexp.MustCompile(`(?m)^<link rel="modulepreload" href="/static/([^"/]+\.js)">\n`)
	importRe       = regexp.MustCompile(`(?m)^import\s*\{([^}]*)\}\s*from\s*'\./([^'/]+\.js)';[ \t]*\n`)
	exportDeclRe   = regexp.MustCompile(`(?m)^export ((?:async )?function\b|const\b|let\b|class\b)`)
	// Forms a bundle cannot keep: other imports and exports, import.meta,
	// a dynamic import.
	unbundlableRe = regexp.MustCompile(`(?m)^\s*(?:import|export)\b|\bimport\s*[.(]`)
	importAsRe    = regexp.MustCompile(`\bas\b`)
)

// errUnbundlable is a module a bundle cannot be made of.
var errUnbundlable = errors.New("not bundled")

// bundleUI gives each page in files whose module scripts can be bundled
// one script, bundled, and returns the pages left as they are, with why.
func bundleUI(files map[string]*uiFile) map[string]error {
	skipped := map[string]error{}
	for _, pg := range uiPages {
		f := files[pg.file]
		if f == nil || f.redirect != "" {
			continue
		}
		page, bundle, err := bundlePage(string(f.data), files)
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

// bundleTag marks where a page's bundle goes, in bundlePage's result.
const bundleTag = "\x00bundle\x00"

// bundlePage returns page with its module scripts and preloads taken out
// (bundleTag where the first script was) and their bundle; "" when page
// has no module script.
func bundlePage(page string, files map[string]*uiFile) (string, string, error) {
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
		f := files[name]
		if f == nil {
			return "", fmt.Errorf("%w: %s is not in the UI", errUnbundlable, name)
		}
		src := string(f.data)
		for _, m := range importRe.FindAllStringSubmatch(src, -1) {
			if importAsRe.MatchString(m[1]) {
				return "", fmt.Errorf("%w: %s renames an import", errUnbundlable, name)
			}
			if isEntry[m[2]] {
				return "", fmt.Errorf("%w: %s imports %s, a script of the page", errUnbundlable, name, m[2])
			}
			if err := addDeps(m[2], append(stack, name)); err != nil {
				return "", err
			}
		}
		src = importRe.ReplaceAllString(src, "")
		src = exportDeclRe.ReplaceAllString(src, "$1")
		if m := unbundlableRe.FindString(src); m != "" {
			return "", fmt.Errorf("%w: %s has %q", errUnbundlable, name, strings.TrimSpace(m))
		}
		return src, nil
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
