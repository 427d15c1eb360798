package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The release builds' sizes are reported, arm64 against its limit.
func TestCrossSizes(t *testing.T) {
	dir := t.TempDir()
	for arch, size := range map[string]int{"arm64": 16 << 20, "armv6": 1 << 20} {
		if err := os.WriteFile(filepath.Join(dir, "kvmd-linux-"+arch), make([]byte, size), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := readCrossSizes(dir)
	if len(got) != 2 || got[0] != (crossSize{"arm64", 16 << 20}) || got[1] != (crossSize{"armv6", 1 << 20}) {
		t.Fatalf("readCrossSizes = %v", got)
	}
	var b strings.Builder
	(&report{crossSizes: got}).writeTable(&b)
	for _, want := range []string{
		"| binary size, release build `kvmd-linux-arm64` (static, stripped) | 16 MiB | ≤ 12 MiB | MISS |",
		"| binary size, release build `kvmd-linux-armv6` (static, stripped) | 1 MiB | — | — |",
		"arm64 binary size",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
