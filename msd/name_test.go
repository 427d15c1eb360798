package msd

import (
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{
		"debian-12.iso", "Windows 11 x64.iso", "a", "ubuntu_24.04+desktop (1).img", "Образ.iso", "日本語.img",
		"a.b.c", "x~y@z=#%!,;'[]{}", strings.Repeat("a", 255), "lost+found2",
	} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"", ".", "..", ".hidden.iso", ".kvmd-upload-123", "a/b.iso", "/etc/passwd", "../x.iso", "x/../y", `a\b.iso`,
		"lost+found", " lead.iso", "trail.iso ", "tab\t.iso", "nl\n.iso", "nul\x00.iso", "del\x7f.iso",
		"c1\u0085.iso", "rtl\u202egnp.iso", "zw\u200b.iso", "nbsp\u00a0x.iso", "\xff\xfe.iso",
		strings.Repeat("a", 256), strings.Repeat("я", 128),
	} {
		err := CheckName(bad)
		if err == nil {
			t.Errorf("CheckName(%q) = nil, want an error", bad)
		} else if !errors.Is(err, ErrBadName) {
			t.Errorf("CheckName(%q) = %v, not ErrBadName", bad, err)
		}
	}
}

// FuzzCheckName: whatever CheckName accepts is one harmless file name in
// the storage directory.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"debian.iso", "../x", "a/b", ".h", "x\x00y", "é.iso", " a", "lost+found", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		const dir = "/var/lib/kvmd/msd"
		p := filepath.Join(dir, name)
		if filepath.Dir(p) != dir || filepath.Base(p) != name {
			t.Fatalf("%q leaves the directory: %q", name, p)
		}
		if !utf8.ValidString(name) || len(name) > MaxNameLen || name[0] == '.' || name == "lost+found" {
			t.Fatalf("%q accepted", name)
		}
		for _, r := range name {
			if r == '/' || r == '\\' || r == 0 || unicode.IsControl(r) || !unicode.IsPrint(r) {
				t.Fatalf("%q accepted with %U", name, r)
			}
		}
		if strings.TrimSpace(name) != name {
			t.Fatalf("%q accepted with outer space", name)
		}
		// It survives a query string both ways.
		q, err := url.ParseQuery("image=" + url.QueryEscape(name))
		if err != nil || q.Get("image") != name {
			t.Fatalf("%q does not round-trip a query: %q %v", name, q.Get("image"), err)
		}
	})
}
