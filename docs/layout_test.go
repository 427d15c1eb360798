package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// codeSpan is a `...` span of a Markdown table cell.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// layoutRows returns the rows of development.md's layout table: the
// paths of the first column and the code spans of the whole row.
func layoutRows(t *testing.T) (firsts []string, all []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## Layout\n")
	if !ok {
		t.Fatal("development.md has no Layout section")
	}
	for line := range strings.Lines(rest) {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		for _, m := range codeSpan.FindAllStringSubmatch(cells[0], -1) {
			firsts = append(firsts, m[1])
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			all = append(all, m[1])
		}
	}
	if len(firsts) < 30 {
		t.Fatalf("only %d paths found in the layout table", len(firsts))
	}
	return firsts, all
}

// goDirs returns the directories of both modules that hold Go files,
// relative to the repository's top, testdata and hidden ones left out.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, repoRoot+string(filepath.Separator)))
		if d.IsDir() {
			if p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bin" || rel == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if dir := filepath.ToSlash(filepath.Dir(rel)); strings.HasSuffix(p, ".go") && !slices.Contains(dirs, dir) && dir != "." {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// names reports whether the code span s names the directory dir: its
// path, or its last elements after a path on the same row ("auth/backend",
// then "ldapauth" for auth/ldapauth).
func names(s, dir string) bool { return s == dir || strings.HasSuffix(dir, "/"+s) }

// TestLayoutTable: development.md's layout table matches the tree: every
// directory of Go code is on a row, and every path of the first column
// exists.
func TestLayoutTable(t *testing.T) {
	firsts, all := layoutRows(t)
	dirs := goDirs(t)
	for _, d := range dirs {
		if !slices.ContainsFunc(all, func(s string) bool { return names(s, d) }) {
			t.Errorf("development.md's layout table has no row for %s", d)
		}
	}
	for _, s := range firsts {
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(s))); err == nil {
			continue
		}
		if !slices.ContainsFunc(dirs, func(d string) bool { return names(s, d) }) {
			t.Errorf("development.md's layout table lists %s, which is not in the tree", s)
		}
	}
}
