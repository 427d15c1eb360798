package srccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// root is the daemon module's directory.
const root = "../.."

// file is a parsed non-test Go file of the daemon module.
type file struct {
	path string // relative to root, with slashes
	ast  *ast.File
	fset *token.FileSet
}

// sources parses every non-test Go file of the daemon module (not the
// tools module, which is a module of its own).
func sources(t *testing.T) []file {
	t.Helper()
	var out []file
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if rel == "tools" || rel == "bin" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out = append(out, file{rel, f, fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 50 {
		t.Fatalf("only %d files found under %s", len(out), root)
	}
	return out
}

// isErrorCall reports whether e is a call of a method Error with no
// arguments: err.Error().
func isErrorCall(e ast.Expr) bool {
	c, ok := ast.Unparen(e).(*ast.CallExpr)
	if !ok || len(c.Args) != 0 {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Error"
}

// TestNoErrorTextMatching: no error is decided by its text, nor is a
// part of another's text cut out to be shown: a strings function that
// searches, compares, trims, cuts or splits given err.Error(), or
// err.Error() compared with ==. A typed error carries the part (msd's
// NameError.Why, auth's).
func TestNoErrorTextMatching(t *testing.T) {
	matchers := map[string]bool{}
	for _, f := range errorTextMatchers {
		matchers[f] = true
	}
	for _, f := range sources(t) {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "strings" || !matchers[sel.Sel.Name] {
					return true
				}
				for _, a := range n.Args {
					if isErrorCall(a) {
						t.Errorf("%s: strings.%s on an error's text: decide with errors.Is/As or a typed error", f.fset.Position(n.Pos()), sel.Sel.Name)
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isErrorCall(n.X) || isErrorCall(n.Y)) {
					t.Errorf("%s: an error's text compared: decide with errors.Is/As or a typed error", f.fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// errorTextMatchers are the strings functions that may not be given an
// error's text.
var errorTextMatchers = []string{
	"Contains", "ContainsAny", "HasPrefix", "HasSuffix", "Index", "IndexAny", "LastIndex", "EqualFold", "Count",
	"TrimPrefix", "TrimSuffix", "TrimLeft", "TrimRight", "Trim", "CutPrefix", "CutSuffix", "Cut",
	"Split", "SplitN", "SplitAfter", "SplitAfterN", "Fields",
}

// stringsIn returns the string literals of a file that contain any of
// the needles, with their positions.
func stringsIn(f file, needles ...string) []string {
	var out []string
	ast.Inspect(f.ast, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		for _, nd := range needles {
			if strings.Contains(s, nd) {
				out = append(out, f.fset.Position(lit.Pos()).String()+": "+strconv.Quote(nd))
			}
		}
		return true
	})
	return out
}

// TestJournalctlWordingInOnePlace: journalctl's complaints are read by
// journal.Classify alone (journal/journalctl.go); everyone else decides
// with its errors.
func TestJournalctlWordingInOnePlace(t *testing.T) {
	for _, f := range sources(t) {
		if f.path == "journal/journalctl.go" {
			continue
		}
		for _, hit := range stringsIn(f, "No such boot ID", "Failed to add filter for units", "has no effect") {
			t.Errorf("%s: journalctl's wording outside journal.Classify", hit)
		}
	}
}

// TestAuthWordingStaysInAuth: the lines package auth logs are for people;
// no other package reads them (diag asks auth.Authenticator.FailuresSince).
func TestAuthWordingStaysInAuth(t *testing.T) {
	for _, f := range sources(t) {
		if strings.HasPrefix(f.path, "auth/") {
			continue
		}
		for _, hit := range stringsIn(f, "auth failed", "auth failures held back") {
			t.Errorf("%s: auth's log wording read outside package auth", hit)
		}
	}
}
