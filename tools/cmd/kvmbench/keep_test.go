package main

import (
	"os"
	"path/filepath"
	"testing"

	"kvmd/internal/benchmd"
)

func TestWithKeptSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	sec := benchmd.Begin("imagetest") + "\n## Booted\n\n| a | b |\n" + benchmd.End("imagetest")
	rev := benchmd.Begin("revocation") + "\n## Revocation\n" + benchmd.End("revocation")
	for _, tc := range []struct{ name, old, want string }{
		{"no file", "", "# new\n"},
		{"no section", "# old\n", "# new\n"},
		{"kept", "# old\n\n" + sec + "\n\n## more old\n", "# new\n\n" + sec + "\n"},
		{"two kept", "# old\n\n" + sec + "\n\n## more old\n\n" + rev + "\n", "# new\n\n" + sec + "\n\n" + rev + "\n"},
		{"end before begin", "# old\n" + benchmd.End("imagetest") + "\n" + benchmd.Begin("imagetest") + "\n", "# new\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if tc.old != "" {
				if err := os.WriteFile(path, []byte(tc.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := withKeptSection(path, []byte("# new\n"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
