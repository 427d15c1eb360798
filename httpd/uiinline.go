package httpd

import (
	"bytes"
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
// page's 56-60 ms (issue 30). inlineAssets serves each page with the two
// in place, made when the server starts: the stylesheet in a <style>, the
// bundle in a <script type="module"> (still a module: strict and
// deferred). The page's Content-Security-Policy allows these two and
// nothing else inline, by their SHA-256 (pageCSPFor); a style attribute or
// any other inline script is still refused.
//
// A file whose text could end its element early or change how the HTML
// parser reads it (a "</style", "</script", "<script" or "<!--" in it) is
// left a file, linked as before.

// assetLinkRe is a page's link to its stylesheet (group 1: its file) or
// to its bundle (group 2), as the pages and bundleUI write them.
var assetLinkRe = regexp.MustCompile(`(?m)^(?:<link rel="stylesheet" href="/static/([^"/]+\.css)">|` +
	`<script type="module" blocking="render" src="/static/([^"/]+` + regexp.QuoteMeta(bundleSuffix) + `)"></script>)\n`)

// inlineAssets puts each page's stylesheet and bundle in the page, and
// gives the page the Content-Security-Policy that lets them run. A bundle
// put in every page that had it is no longer served as a file. It runs at
// every start, so it makes each page in one buffer: the garbage of a
// regexp replacement per tag was most of the daemon's heap at start.
func inlineAssets(files map[string]*uiFile) {
	inlined := map[string]bool{} // bundles put in a page
	kept := map[string]bool{}    // bundles still linked by a page
	for _, pg := range uiPages {
		f := files[pg.file]
		if f == nil {
			continue
		}
		type part struct {
			start, end int    // the tag in f.data
			text       []byte // what goes in its place
			script     bool
		}
		var parts []part
		size := len(f.data)
		for _, m := range assetLinkRe.FindAllSubmatchIndex(f.data, -1) {
			p := part{start: m[0], end: m[1], script: m[4] >= 0}
			g := 2 // the group that matched
			if p.script {
				g = 4
			}
			name := string(f.data[m[g]:m[g+1]])
			a := files[name]
			if a == nil || hasRawTextEnd(a.data) {
				if p.script {
					kept[name] = true
				}
				continue
			}
			if p.script {
				inlined[name] = true
			}
			p.text = bytes.TrimRight(a.data, "\n")
			parts = append(parts, p)
			size += len(p.text) + len(`<script type="module"></script>`)
		}
		if len(parts) == 0 {
			continue
		}
		out := make([]byte, 0, size)
		var styles, scripts []string
		last := 0
		for _, p := range parts {
			out = append(out, f.data[last:p.start]...)
			if p.script {
				scripts = append(scripts, cspHash(p.text))
				out = append(append(append(out, `<script type="module">`...), p.text...), "</script>\n"...)
			} else {
				styles = append(styles, cspHash(p.text))
				out = append(append(append(out, "<style>"...), p.text...), "</style>\n"...)
			}
			last = p.end
		}
		out = append(out, f.data[last:]...)
		nf := newUIFile(pg.file, out)
		nf.csp = pageCSPFor(scripts, styles)
		files[pg.file] = nf
	}
	for name := range inlined {
		if !kept[name] {
			delete(files, name)
		}
	}
}

// rawTextEnds are what an inline <style> or <script> must not hold, in
// lower case: each could end the element early or change how the HTML
// parser reads its text.
var rawTextEnds = []string{"</style", "</script", "<script", "<!--"}

// hasRawTextEnd tells whether text holds one of rawTextEnds, in any case.
func hasRawTextEnd(text []byte) bool {
	for i := bytes.IndexByte(text, '<'); i >= 0; {
		rest := text[i:]
		for _, end := range rawTextEnds {
			if len(rest) >= len(end) && bytes.EqualFold(rest[:len(end)], []byte(end)) {
				return true
			}
		}
		j := bytes.IndexByte(rest[1:], '<')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return false
}

// cspHash is the Content-Security-Policy source that allows an inline
// element whose text is text.
func cspHash(text []byte) string {
	sum := sha256.Sum256(text)
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
