package httpd

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"kvmd/web"
)

// TestUILogoInlined holds every page of the real UI to the logo inline:
// no <img> of favicon.svg left, its markup in the header at the <img>'s
// size, and favicon.svg itself one <svg> element with nothing that could
// run or style (the pages' CSP allows neither inline).
func TestUILogoInlined(t *testing.T) {
	orig, err := readUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	svg := string(orig["favicon.svg"].data)
	if m := regexp.MustCompile(`(?i)<script|<style|\son[a-z]+=|style=|href=|<foreignObject`).FindString(svg); m != "" {
		t.Fatalf("favicon.svg has %q", m)
	}
	files, _, err := loadUI(web.FS())
	if err != nil {
		t.Fatal(err)
	}
	inlined := regexp.MustCompile(`<svg class="logo" width="(\d+)" height="(\d+)" aria-hidden="true" focusable="false" xmlns=`)
	for _, pg := range uiPages {
		before, after := string(orig[pg.file].data), string(files[pg.file].data)
		imgs := logoImgRe.FindAllStringSubmatch(before, -1)
		if len(imgs) == 0 {
			t.Errorf("%s has no logo <img> to inline", pg.file)
			continue
		}
		if strings.Contains(after, "<img src=\"/static/favicon.svg\"") {
			t.Errorf("%s still has the logo as an <img>", pg.file)
		}
		got := inlined.FindAllStringSubmatch(after, -1)
		if len(got) != len(imgs) {
			t.Errorf("%s: %d logos inlined, want %d", pg.file, len(got), len(imgs))
			continue
		}
		for i := range got {
			if got[i][1] != imgs[i][1] || got[i][2] != imgs[i][2] {
				t.Errorf("%s: logo %d at %sx%s, the <img> was %sx%s", pg.file, i, got[i][1], got[i][2], imgs[i][1], imgs[i][2])
			}
		}
		if !strings.Contains(after, strings.TrimPrefix(strings.TrimSpace(svg), "<svg ")) {
			t.Errorf("%s: the inlined logo is not favicon.svg's markup", pg.file)
		}
	}
}

// TestUILogoNotSVG inlines markup with a "$" as it is, and leaves the
// pages alone when favicon.svg is not one <svg> element.
func TestUILogoNotSVG(t *testing.T) {
	ui := fstest.MapFS{}
	for k, v := range testUI {
		ui[k] = v
	}
	page := `<h1><img src="/static/favicon.svg" alt="" width="28" height="28"> kvmd</h1>`
	ui["login.html"] = &fstest.MapFile{Data: []byte(page)}
	// Markup with a "$" goes in as it is (it is no regexp group).
	ui["favicon.svg"] = &fstest.MapFile{Data: []byte(`<svg viewBox="0 0 1 1"><title>$1 $$</title></svg>`)}
	files, _, err := loadUI(ui)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(files["login.html"].data), `<h1><svg class="logo" width="28" height="28" aria-hidden="true" focusable="false" viewBox="0 0 1 1"><title>$1 $$</title></svg> kvmd</h1>`; got != want {
		t.Errorf("login.html = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "<p>x</p>", "<svg x></svg><svg y></svg>"} {
		ui["favicon.svg"] = &fstest.MapFile{Data: []byte(bad)}
		files, _, err := loadUI(ui)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(files["login.html"].data); got != page {
			t.Errorf("favicon.svg %q: login.html became %q", bad, got)
		}
	}
}
