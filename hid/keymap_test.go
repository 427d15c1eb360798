package hid

import (
	"archive/zip"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

func typed(seq []KeyPress) string {
	var b strings.Builder
	for i, kp := range seq {
		if i > 0 {
			b.WriteByte(' ')
		}
		if kp.Press {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(kp.Key.Name)
	}
	return b.String()
}

func TestBuiltinKeymaps(t *testing.T) {
	k := BuiltinKeymaps()
	names := k.Names()
	if len(names) < 30 || names[0] != "ar" || k.Default != "en-us" {
		t.Fatalf("keymaps %v, default %q", names, k.Default)
	}
	for _, n := range names {
		km, err := k.Get(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if km.Len() < 90 {
			t.Errorf("%s types only %d characters", n, km.Len())
		}
	}
	us, _ := k.Get("")
	for r := rune(0x20); r < 0x7f; r++ {
		if _, ok := us.Stroke(r); !ok {
			t.Errorf("en-us does not type %q", r)
		}
	}
	for _, bad := range []string{"xx", "../en-us", "COPYING.xkeyboard-config", "EN-US"} {
		if _, err := k.Get(bad); !errors.Is(err, ErrNoKeymap) {
			t.Errorf("Get(%q): %v, want ErrNoKeymap", bad, err)
		}
	}
}

// TestType: the strokes of known layouts, written from the layouts'
// legends (not from the generated files), and kvmd's printer rules.
func TestType(t *testing.T) {
	k := BuiltinKeymaps()
	for _, tc := range []struct {
		keymap, text, want string
	}{
		{"en-us", "aB", "+KeyA -KeyA +ShiftLeft +KeyB -KeyB -ShiftLeft"},
		{"en-us", "AB!", "+ShiftLeft +KeyA -KeyA +KeyB -KeyB +Digit1 -Digit1 -ShiftLeft"},
		{"en-us", "a\n\tb", "+KeyA -KeyA +Enter -Enter +Tab -Tab +KeyB -KeyB"},
		{"en-us", "“x”—\x07\r", "+ShiftLeft +Quote -Quote -ShiftLeft +KeyX -KeyX +ShiftLeft +Quote -Quote -ShiftLeft +Minus -Minus +Minus -Minus"},
		{"en-us", "ä", ""},
		// German: Y and Z swapped, @ is AltGr+Q, ü has its own key.
		{"de", "zY@ü", "+KeyY -KeyY +ShiftLeft +KeyZ -KeyZ -ShiftLeft +AltRight +KeyQ -KeyQ -AltRight +BracketLeft -BracketLeft"},
		{"de", "|", "+AltRight +IntlBackslash -IntlBackslash -AltRight"},
		// French: AZERTY, digits shifted.
		{"fr", "a1q", "+KeyQ -KeyQ +ShiftLeft +Digit1 -Digit1 -ShiftLeft +KeyA -KeyA"},
		// Russian: Cyrillic on the Latin keys; Latin letters from en-us.
		{"ru", "аb", "+KeyF -KeyF +KeyB -KeyB"},
	} {
		km, err := k.Get(tc.keymap)
		if err != nil {
			t.Fatal(err)
		}
		if got := typed(km.Type(tc.text, k.fallback())); got != tc.want {
			t.Errorf("%s %q:\n got %s\nwant %s", tc.keymap, tc.text, got, tc.want)
		}
	}
}

func TestParseKeymap(t *testing.T) {
	fsys := fstest.MapFS{
		"good":       {Data: []byte("# comment\nU+0061 KeyA\nU+0061 KeyB # the first wins\n\nU+00e4 Quote shift altgr\n")},
		"bad":        {Data: []byte("U+0061 KeyNope\n")},
		"SOURCES.md": {Data: []byte("not a keymap")},
	}
	k, err := NewKeymaps(fsys, "good")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Names(), ","); got != "bad,good" {
		t.Errorf("names %q", got)
	}
	km, err := k.Get("good")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := km.Stroke('a'); s.Key.Name != "KeyA" {
		t.Errorf("a: %+v", s)
	}
	if s, _ := km.Stroke('ä'); !s.Shift || !s.AltGr || s.Key.Name != "Quote" {
		t.Errorf("ä: %+v", s)
	}
	if _, err := k.Get("bad"); err == nil || errors.Is(err, ErrNoKeymap) {
		t.Errorf("a bad file: %v", err)
	}
	if _, err := NewKeymaps(fsys, "none"); !errors.Is(err, ErrNoKeymap) {
		t.Errorf("a missing default: %v", err)
	}
}

// TestBuiltinZip: the archive the daemon embeds holds exactly the files of
// the directory keymaps, byte for byte (regenerate both with cd tools &&
// go run ./cmd/genkeymaps).
func TestBuiltinZip(t *testing.T) {
	zr, err := zip.NewReader(strings.NewReader(builtinZip), int64(len(builtinZip)))
	if err != nil {
		t.Fatal(err)
	}
	inZip := map[string]bool{}
	for _, f := range zr.File {
		inZip[f.Name] = true
		got, err := fs.ReadFile(zr, f.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("keymaps", f.Name))
		if err != nil {
			t.Errorf("%s is in keymaps.zip, not in keymaps/: %v", f.Name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs between keymaps.zip and keymaps/", f.Name)
		}
	}
	ents, err := os.ReadDir("keymaps")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !inZip[e.Name()] {
			t.Errorf("keymaps/%s is not in keymaps.zip", e.Name())
		}
	}
}
