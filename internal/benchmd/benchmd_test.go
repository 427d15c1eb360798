package benchmd

import (
	"os"
	"path/filepath"
	"testing"
)

func sec(name, body string) string { return Begin(name) + "\n" + body + "\n" + End(name) + "\n" }

// TestWriteSection: the section replaces the old one or is added at the
// end, the rest of the file (another section included) stays.
func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	other := sec("other", "kept")
	for _, tc := range []struct{ name, old, want string }{
		{"no file", "", sec("a", "new")},
		{"appended", "# B\n\nrows\n", "# B\n\nrows\n\n" + sec("a", "new")},
		{"replaced", "# B\n" + sec("a", "old") + "\n## after\n", "# B\n" + sec("a", "new") + "\n## after\n"},
		{"replaced at the end", "# B\n\n" + sec("a", "old"), "# B\n\n" + sec("a", "new")},
		{"beside another", "# B\n\n" + sec("a", "old") + "\n" + other, "# B\n\n" + sec("a", "new") + "\n" + other},
		{"added after another", "# B\n\n" + other, "# B\n\n" + other + "\n" + sec("a", "new")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteSection(path, "a", sec("a", "new")); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	if err := os.WriteFile(path, []byte("# B\n"+Begin("a")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "a", sec("a", "new")); err == nil {
		t.Error("a begin marker without its end: no error")
	}
}

// TestKept: every marked section, in order, without what is around them.
func TestKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	a, b := sec("imagetest", "## Booted\n\n| a | b |"), sec("revocation", "## Revoked")
	for _, tc := range []struct{ name, old, want string }{
		{"no file", "", ""},
		{"no section", "# old\n", ""},
		{"one", "# old\n\n" + a + "\n## more old\n", a[:len(a)-1]},
		{"two", "# old\n\n" + a + "\nrows\n\n" + b, a + "\n" + b[:len(b)-1]},
		{"end before begin", "# old\n" + End("a") + "\n" + Begin("a") + "\n", ""},
		{"unended, then one", "# old\n" + Begin("x") + "\n" + b, b[:len(b)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Kept(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
