package httpd

import (
	"regexp"
	"strings"
)

// The pages show the device's logo, favicon.svg, in their header. As an
// <img>, Chromium makes an SVG document of its own for it (a page, a frame
// and a parse) and the page's load event waits for it: some 5 ms of the
// renderer's main thread on every page load here (issue 30). inlineLogo
// serves the pages with the file's markup in the <img>'s place instead,
// made when the server starts; the file is still served, as the pages'
// icon. The markup is the file's own (a test holds it to one <svg> element
// with no script or style), so the page's Content-Security-Policy applies.

// logoImgRe is the logo's <img> as the pages write it.
var logoImgRe = regexp.MustCompile(`<img src="/static/favicon\.svg" alt="" width="(\d+)" height="(\d+)">`)

// inlineLogo replaces the logo's <img> in each page of files with the
// logo's markup, at the <img>'s size and hidden from screen readers as
// the <img> (alt="") was. Without a usable favicon.svg the pages are left
// as they are.
func inlineLogo(files map[string]*uiFile) {
	f := files["favicon.svg"]
	if f == nil {
		return
	}
	svg := strings.TrimSpace(string(f.data))
	if !strings.HasPrefix(svg, "<svg ") || !strings.HasSuffix(svg, "</svg>") || strings.Count(svg, "<svg") != 1 {
		return
	}
	for _, pg := range uiPages {
		p := files[pg.file]
		if p == nil || !logoImgRe.Match(p.data) {
			continue
		}
		// A function, not a template: a "$" in the file is no group reference.
		out := logoImgRe.ReplaceAllStringFunc(string(p.data), func(img string) string {
			m := logoImgRe.FindStringSubmatch(img)
			return `<svg class="logo" width="` + m[1] + `" height="` + m[2] + `" aria-hidden="true" focusable="false" ` + strings.TrimPrefix(svg, "<svg ")
		})
		files[pg.file] = newUIFile(pg.file, []byte(out))
	}
}
