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
		if us.Strokes(r) == nil {
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
// legends (not from the generated files), and the printer's rules: a
// character the layout cannot type is skipped and counted, never typed
// as another; one the layout types through a dead key is the dead key
// and then what the host's compose table makes of it.
func TestType(t *testing.T) {
	k := BuiltinKeymaps()
	for _, tc := range []struct {
		keymap, text, want, skipped string
		nSkipped                    int
	}{
		{"en-us", "aB", "+KeyA -KeyA +ShiftLeft +KeyB -KeyB -ShiftLeft", "", 0},
		{"en-us", "AB!", "+ShiftLeft +KeyA -KeyA +KeyB -KeyB +Digit1 -Digit1 -ShiftLeft", "", 0},
		{"en-us", "a\n\tb", "+KeyA -KeyA +Enter -Enter +Tab -Tab +KeyB -KeyB", "", 0},
		// Typographic quotes and dashes are not typed as ASCII ones (kvmd
		// does): the layout has none of them.
		{"en-us", "“x”—\x07", "+KeyX -KeyX", "“”—\x07", 4},
		{"en-us", "äää", "", "ä", 3},
		// A US keyboard has no 102nd key: < is Shift+Comma.
		{"en-us", "<>", "+ShiftLeft +Comma -Comma +Period -Period -ShiftLeft", "", 0},
		// German: Y and Z swapped, @ is AltGr+Q, ü has its own key.
		{"de", "zY@ü", "+KeyY -KeyY +ShiftLeft +KeyZ -KeyZ -ShiftLeft +AltRight +KeyQ -KeyQ -AltRight +BracketLeft -BracketLeft", "", 0},
		{"de", "|", "+AltRight +IntlBackslash -IntlBackslash -AltRight", "", 0},
		// German dead keys: ^ (the key left of 1) and ` (Shift and the key
		// left of Backspace), then Space for the bare accent, or a letter.
		{"de", "^`ê", "+Backquote -Backquote +Space -Space +ShiftLeft +Equal -Equal -ShiftLeft +Space -Space +Backquote -Backquote +KeyE -KeyE", "", 0},
		// French: AZERTY, digits shifted; ^ is AltGr+9 (one stroke beats
		// the dead key of the key right of P and Space), ê that dead key.
		{"fr", "a1q^ê", "+KeyQ -KeyQ +ShiftLeft +Digit1 -Digit1 -ShiftLeft +KeyA -KeyA +AltRight +Digit9 -Digit9 -AltRight +BracketLeft -BracketLeft +KeyE -KeyE", "", 0},
		// Russian: Cyrillic on the Latin keys; no Latin letters at all.
		{"ru", "аbж", "+KeyF -KeyF +Semicolon -Semicolon", "b", 1},
	} {
		km, err := k.Get(tc.keymap)
		if err != nil {
			t.Fatal(err)
		}
		seq, skipped := km.Type(tc.text)
		if got := typed(seq); got != tc.want {
			t.Errorf("%s %q:\n got %s\nwant %s", tc.keymap, tc.text, got, tc.want)
		}
		if got := string(skipped.Chars); got != tc.skipped {
			t.Errorf("%s %q: skipped %q, want %q", tc.keymap, tc.text, got, tc.skipped)
		}
		if skipped.Count != tc.nSkipped {
			t.Errorf("%s %q: skipped %d characters, want %d", tc.keymap, tc.text, skipped.Count, tc.nSkipped)
		}
		if s := km.Skipped(tc.text); s.Count != skipped.Count || string(s.Chars) != string(skipped.Chars) {
			t.Errorf("%s %q: Skipped says %+v, Type %+v", tc.keymap, tc.text, s, skipped)
		}
	}
}

// TestSkippedBound: the characters a print skips are listed once each, at
// most MaxSkippedChars of them; the count is of every one.
func TestSkippedBound(t *testing.T) {
	km, err := BuiltinKeymaps().Get("ru")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for range 3 {
		for r := 'a'; r <= 'z'; r++ {
			b.WriteRune(r)
		}
		for r := rune(0x4e00); r < 0x4e00+100; r++ {
			b.WriteRune(r)
		}
	}
	s := km.Skipped(b.String())
	if s.Count != 3*126 || len(s.Chars) != MaxSkippedChars || s.Chars[0] != 'a' || s.Chars[26] != 0x4e00 {
		t.Errorf("skipped %d, listed %d: %q", s.Count, len(s.Chars), string(s.Chars))
	}
}

func TestParseKeymap(t *testing.T) {
	fsys := fstest.MapFS{
		"good":       {Data: []byte("# comment\nxkb fr bepo\nU+0061 KeyA\nU+0061 KeyB # the first wins\n\nU+00e4 Quote shift altgr\nU+00EA Backquote shift, KeyE\n")},
		"bad":        {Data: []byte("U+0061 KeyNope\n")},
		"badseq":     {Data: []byte("U+0061 KeyA,\n")},
		"SOURCES.md": {Data: []byte("not a keymap")},
	}
	k, err := NewKeymaps(fsys, "good")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.Names(), ","); got != "bad,badseq,good" {
		t.Errorf("names %q", got)
	}
	km, err := k.Get("good")
	if err != nil {
		t.Fatal(err)
	}
	if km.Layout != "fr" || km.Variant != "bepo" {
		t.Errorf("layout %q variant %q", km.Layout, km.Variant)
	}
	if s := km.Strokes('a'); len(s) != 1 || s[0].Key.Name != "KeyA" {
		t.Errorf("a: %+v", s)
	}
	if s := km.Strokes('ä'); len(s) != 1 || !s[0].Shift || !s[0].AltGr || s[0].Key.Name != "Quote" {
		t.Errorf("ä: %+v", s)
	}
	if s := km.Strokes('ê'); len(s) != 2 || s[0].Key.Name != "Backquote" || !s[0].Shift || s[1].Key.Name != "KeyE" || s[1].Shift {
		t.Errorf("ê: %+v", s)
	}
	for _, bad := range []string{"bad", "badseq"} {
		if _, err := k.Get(bad); err == nil || errors.Is(err, ErrNoKeymap) {
			t.Errorf("a bad file %s: %v", bad, err)
		}
	}
	if _, err := NewKeymaps(fsys, "none"); !errors.Is(err, ErrNoKeymap) {
		t.Errorf("a missing default: %v", err)
	}
}

// TestBuiltinZip: the archive the daemon embeds holds exactly the files of
// the directory keymaps, byte for byte but for the comments of their
// characters' lines (regenerate both with cd tools && go run
// ./cmd/genkeymaps).
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
		if !bytes.Equal(got, CompactKeymap(want)) {
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
