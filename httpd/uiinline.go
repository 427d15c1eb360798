package httpd

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
)

// After bundleUI a page still needs two files before it can be drawn: the
// stylesheet and its bundle, which the browser asks for once it has read
// the page, a round trip after the page's own (and on every load: the
// files are revalidated). Loaded in Chromium (kvmbench's web UI rows, 30
// loads each), the login, dashboard and logs pages with both in them
// loaded in 69-74 ms where they took 78-81 ms, against the bare baseline
// page's 56-60 ms (issue 30). inlineAssets serves
// each page with the two in place, made when the server starts: the
// stylesheet in a <style>, the bundle in a <script type="module"> (still
// a module: strict and deferred). The page's Content-Security-Policy
// allows these two and nothing else inline, by their SHA-256 (pageCSPFor);
// a style attribute or any other inline script is still refused.
//
// A file whose text could end its element early or change how the HTML
// parser reads it (a "</style", "</script", "<script" or "<!--" in it) is
// left a file, linked as before.

var (
	styleLinkRe  = regexp.MustCompile(`(?m)^<link rel="stylesheet" href="/static/([^"/]+\.css)">\n`)
	bundleLinkRe = regexp.MustCompile(`(?m)^<script type="module" blocking="render" src="/static/([^"/]+` + regexp.QuoteMeta(bundleSuffix) + `)"></script>\n`)
	// rawTextEndRe finds what an inline <style> or <script> must not hold.
	rawTextEndRe = regexp.MustCompile(`(?i)</style|</script|<script|<!--`)
)

// inlineAssets puts each page's stylesheet and bundle in the page, and
// gives the page the Content-Security-Policy that lets them run. A bundle
// put in every page that had it is no longer served as a file.
func inlineAssets(files map[string]*uiFile) {
	inlined := map[string]bool{} // bundles put in a page
	kept := map[string]bool{}    // bundles still linked by a page
	for _, pg := range uiPages {
		f := files[pg.file]
		if f == nil || f.redirect != "" {
			continue
		}
		page := string(f.data)
		var styles, scripts []string
		page = replaceLinks(page, styleLinkRe, files, func(name, text string) string {
			styles = append(styles, cspHash(text))
			return "<style>" + text + "</style>\n"
		}, nil)
		page = replaceLinks(page, bundleLinkRe, files, func(name, text string) string {
			scripts = append(scripts, cspHash(text))
			inlined[name] = true
			return `<script type="module">` + text + "</script>\n"
		}, kept)
		if len(styles) == 0 && len(scripts) == 0 {
			continue
		}
		nf := newUIFile(pg.file, []byte(page))
		nf.csp = pageCSPFor(scripts, styles)
		files[pg.file] = nf
	}
	for name := range inlined {
		if !kept[name] {
			delete(files, name)
		}
	}
}

// replaceLinks replaces each tag of re in page whose file (re's group)
// can go inline with put's result; the names of those left as tags are
// added to kept.
func replaceLinks(page string, re *regexp.Regexp, files map[string]*uiFile, put func(name, text string) string, kept map[string]bool) string {
	return re.ReplaceAllStringFunc(page, func(tag string) string {
		name := re.FindStringSubmatch(tag)[1]
		f := files[name]
		if f == nil || f.redirect != "" || rawTextEndRe.Match(f.data) {
			if kept != nil {
				kept[name] = true
			}
			return tag
		}
		return put(name, strings.TrimRight(string(f.data), "\n"))
	})
}

// cspHash is the Content-Security-Policy source that allows an inline
// element whose text is text.
func cspHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// pageCSPFor is pageCSP allowing the inline scripts and styles of the
// given hashes as well.
func pageCSPFor(scripts, styles []string) string {
	src := func(hashes []string) string {
		if len(hashes) == 0 {
			return "'self'"
		}
		return "'self' " + strings.Join(hashes, " ")
	}
	return "default-src 'none'; script-src " + src(scripts) + "; style-src " + src(styles) + "; img-src 'self'; " +
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
}
