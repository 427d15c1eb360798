package httpd

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// apiDocRow is a row of docs/api.md's endpoint table: its path patterns
// (code spans, with {a,b} and * as in a shell) and its methods.
type apiDocRow struct {
	line     string
	patterns []string
	methods  []string
}

var (
	docCodeSpan = regexp.MustCompile("`([^`]+)`")
	docBraces   = regexp.MustCompile(`\{([^}]*)\}`)
)

// expandBraces expands the first {a,b} of p, and the rest in turn.
func expandBraces(p string) []string {
	m := docBraces.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for alt := range strings.SplitSeq(p[m[2]:m[3]], ",") {
		out = append(out, expandBraces(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

// apiDocRows reads the endpoint table of docs/api.md.
func apiDocRows(t *testing.T) []apiDocRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n| path | methods | what | more |\n|---|---|---|---|\n")
	if !ok {
		t.Fatal("docs/api.md has no endpoint table")
	}
	var rows []apiDocRow
	for line := range strings.Lines(rest) {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, " | ")
		r := apiDocRow{line: strings.TrimSpace(line)}
		for _, m := range docCodeSpan.FindAllStringSubmatch(cells[0], -1) {
			r.patterns = append(r.patterns, expandBraces(m[1])...)
		}
		for _, w := range strings.FieldsFunc(cells[1], func(c rune) bool { return c == ',' || c == ';' || c == ' ' }) {
			if slices.Contains(routeMethods, w) && !slices.Contains(r.methods, w) {
				r.methods = append(r.methods, w)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("only %d rows in docs/api.md's endpoint table", len(rows))
	}
	return rows
}

func (r apiDocRow) matches(p string) bool {
	return slices.ContainsFunc(r.patterns, func(pat string) bool { ok, _ := path.Match(pat, p); return ok })
}

// TestAPIDocEndpoints: docs/api.md's endpoint table lists every method the
// route table serves at each path of the API and ustreamer's (under /api/,
// and outside it), and no method a row's paths do not serve.
func TestAPIDocEndpoints(t *testing.T) {
	rows := apiDocRows(t)
	type served struct{ method, path string }
	var all []served
	// The API and ustreamer's paths (the web pages are web-ui.md's, the
	// WebSocket's messages the event stream's section's); an API row at
	// its /api path, as the table writes it.
	for _, rt := range routeTable {
		switch rt.at {
		case api, apiOnly:
			all = append(all, served{rt.method, "/api" + rt.path})
		case bare:
			all = append(all, served{rt.method, rt.path})
		}
	}
	for _, s := range all {
		if !slices.ContainsFunc(rows, func(r apiDocRow) bool { return r.matches(s.path) && slices.Contains(r.methods, s.method) }) {
			t.Errorf("docs/api.md's endpoint table has no row with %s %s", s.method, s.path)
		}
	}
	for _, r := range rows {
		for _, m := range r.methods {
			if !slices.ContainsFunc(all, func(s served) bool { return s.method == m && r.matches(s.path) }) {
				t.Errorf("docs/api.md: no %s at the paths of the row %s", m, r.line)
			}
		}
	}
}
