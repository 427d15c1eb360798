package httpd

import (
	"errors"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"kvmd/web"
)

// bundleTestUI is testUI with pages that load module scripts.
func bundleTestUI(extra fstest.MapFS) fstest.MapFS {
	ui := fstest.MapFS{}
	for k, v := range testUI {
		ui[k] = v
	}
	ui["index.html"] = &fstest.MapFile{Data: []byte("<!doctype html>\n<title>dashboard</title>\n" +
		`<link rel="stylesheet" href="/static/app.css">` + "\n" +
		`<link rel="modulepreload" href="/static/common.js">` + "\n" +
		`<script type="module" src="/static/a.js"></script>` + "\n" +
		`<script type="module" src="/static/b.js"></script>` + "\n<p>body</p>\n")}
	ui["common.js"] = &fstest.MapFile{Data: []byte("// common\nexport const x = 1;\nexport async function f() { return x; }\nconst pad = 2;\n")}
	ui["a.js"] = &fstest.MapFile{Data: []byte("import { x } from './common.js';\nconst y = x;\n")}
	ui["b.js"] = &fstest.MapFile{Data: []byte("import {\n  f,\n} from './common.js';\nfunction y() { return f(); }\ny();\n")}
	for k, v := range extra {
		ui[k] = v
	}
	return ui
}

// bundledUI is fsys's files after bundleUI alone, and the pages it skipped
// (loadUI goes on to put the bundles in the pages).
func bundledUI(fsys fs.FS) (map[string]*uiFile, map[string]error, error) {
	files, err := readUI(fsys)
	if err != nil {
		return nil, nil, err
	}
	return files, bundleUI(files), nil
}

func TestUIBundle(t *testing.T) {
	files, skipped, err := bundledUI(bundleTestUI(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 {
		t.Fatalf("skipped %v", skipped)
	}
	page := string(files["index.html"].data)
	want := "<!doctype html>\n<title>dashboard</title>\n" + `<link rel="stylesheet" href="/static/app.css">` + "\n" +
		`<script type="module" blocking="render" src="/static/index.bundle.js"></script>` + "\n<p>body</p>\n"
	if page != want {
		t.Errorf("page:\n%s\nwant:\n%s", page, want)
	}
	b := files["index.bundle.js"]
	if b == nil {
		t.Fatal("no index.bundle.js")
	}
	if b.ctype != "text/javascript; charset=utf-8" || b.etag == files["common.js"].etag {
		t.Errorf("bundle: type %q, etag %s", b.ctype, b.etag)
	}
	wantJS := "// /static/common.js\n// common\nconst x = 1;\nasync function f() { return x; }\nconst pad = 2;\n" +
		"// /static/a.js\ntry {\nconst y = x;\n} catch (e) {\n  reportError(e);\n}\n" +
		"// /static/b.js\ntry {\nfunction y() { return f(); }\ny();\n} catch (e) {\n  reportError(e);\n}\n"
	if got := string(b.data); got != wantJS {
		t.Errorf("bundle:\n%s\nwant:\n%s", got, wantJS)
	}
	// The files themselves are still there, as they were.
	if got := string(files["a.js"].data); !strings.HasPrefix(got, "import { x }") {
		t.Errorf("a.js changed: %q", got)
	}
	// A page without module scripts is left alone.
	if got := string(files["logs.html"].data); got != "<!doctype html><title>logs</title>" {
		t.Errorf("logs.html: %q", got)
	}

	for name, src := range map[string]string{
		"default export":  "export default 1;\n",
		"export list":     "const z = 1;\nexport { z };\n",
		"renamed import":  "import { x as z } from './common.js';\n",
		"namespace":       "import * as c from './common.js';\n",
		"dynamic import":  "const m = await import('./common.js');\n",
		"import.meta":     "const u = import.meta.url;\n",
		"missing file":    "import { x } from './nope.js';\n",
		"entry imported":  "import { y } from './b.js';\n",
		"indented import": "const y = 1;\n  import { x } from './common.js';\n",
		"export later":    "const y = 1;\n\t export { y };\n",
		"import, spaced":  "const m = import\n  ('./common.js');\n",
	} {
		files, skipped, err := bundledUI(bundleTestUI(fstest.MapFS{"a.js": {Data: []byte(src)}}))
		if err != nil {
			t.Fatal(err)
		}
		if err := skipped["index.html"]; !errors.Is(err, errUnbundlable) {
			t.Errorf("%s: skipped %v, want index.html not bundled", name, skipped)
		}
		if files["index.bundle.js"] != nil || !strings.Contains(string(files["index.html"].data), `src="/static/a.js"`) {
			t.Errorf("%s: the page was bundled", name)
		}
	}
}

// TestUIBundleWords: the words import and export inside other words, or
// not where a statement would start, are left as they are.
func TestUIBundleWords(t *testing.T) {
	src := "import { x } from './common.js';\nconst important = x, exported = 2;\n" +
		"const s = \"import { x } from './common.js';\";\nwindow.reimport?.();\n"
	files, skipped, err := bundledUI(bundleTestUI(fstest.MapFS{"a.js": {Data: []byte(src)}}))
	if err != nil || len(skipped) != 0 {
		t.Fatalf("skipped %v, %v", skipped, err)
	}
	want := "// /static/a.js\ntry {\n" + strings.TrimPrefix(src, "import { x } from './common.js';\n") + "} catch (e) {"
	if b := files["index.bundle.js"]; b == nil || !strings.Contains(string(b.data), want) {
		t.Errorf("bundle has no\n%s", want)
	}
}

// TestUIBundled: every page of the real UI is served with one script, its
// bundle, made of every module it loaded before, each once.
func TestUIBundled(t *testing.T) {
	orig, err := readUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	files, skipped, err := bundledUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 {
		t.Fatalf("pages not bundled: %v", skipped)
	}
	scriptRe := regexp.MustCompile(`<script[^>]*src="/static/([^"]+)"`)
	importRe := regexp.MustCompile(`(?m)^import\s*\{[^}]*\}\s*from\s*'\./([^']+)'`)
	for _, pg := range uiPages {
		srcs := scriptRe.FindAllStringSubmatch(string(files[pg.file].data), -1)
		name := strings.TrimSuffix(pg.file, ".html") + bundleSuffix
		if len(srcs) != 1 || srcs[0][1] != name {
			t.Errorf("%s loads %v, want only %s", pg.file, srcs, name)
			continue
		}
		if strings.Contains(string(files[pg.file].data), "modulepreload") {
			t.Errorf("%s still preloads a bundled module", pg.file)
		}
		bundle := string(files[name].data)
		var want []string
		for _, m := range scriptRe.FindAllStringSubmatch(string(orig[pg.file].data), -1) {
			want = append(want, m[1])
			for _, imp := range importRe.FindAllStringSubmatch(string(orig[m[1]].data), -1) {
				want = append(want, imp[1])
			}
		}
		for _, js := range want {
			if n := strings.Count(bundle, "// /static/"+js+"\n"); n != 1 {
				t.Errorf("%s: %s is in it %d times, want once", name, js, n)
			}
		}
		if m := regexp.MustCompile(`(?m)^\s*(import|export)\b`).FindString(bundle); m != "" {
			t.Errorf("%s has %q left", name, m)
		}
	}
}
