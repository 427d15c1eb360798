package hid

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var update = flag.Bool("update", false, "rewrite the keymaps' table in docs/hid.md")

// docChar writes a character for a Markdown table: in a code span, the
// pipe escaped, the backtick in a longer one, spaces and invisible ones
// by code point.
func docChar(r rune) string {
	switch {
	case r == '`':
		return "`` ` ``"
	case r == '|':
		return "`\\|`"
	case unicode.IsSpace(r) || !unicode.IsGraphic(r) || unicode.Is(unicode.Mn, r):
		return fmt.Sprintf("U+%04X", r)
	}
	return "`" + string(r) + "`"
}

// docChars writes characters in order, runs of four or more consecutive
// code points as a range.
func docChars(rs []rune) string {
	var parts []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if j-i >= 3 {
			parts = append(parts, docChar(rs[i])+"–"+docChar(rs[j]))
			i = j + 1
			continue
		}
		parts = append(parts, docChar(rs[i]))
		i++
	}
	return strings.Join(parts, " ")
}

// docKeymapTable is the table of docs/hid.md's "Keymaps": for each
// keymap, its layout, how many characters it types, those it types
// through a dead key (the letters counted, the rest listed), and which
// of printable ASCII and Latin-1 it skips.
func docKeymapTable(t *testing.T) string {
	var b strings.Builder
	b.WriteString("| keymap | xkeyboard-config | types | through a dead key | skips, of printable ASCII and Latin-1 |\n|---|---|---|---|---|\n")
	k := BuiltinKeymaps()
	for _, name := range k.Names() {
		km, err := k.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		layout := km.Layout
		if km.Variant != "" {
			layout += "(" + km.Variant + ")"
		}
		var dead []rune
		letters := 0
		for _, r := range km.Chars() {
			if len(km.Strokes(r)) < 2 {
				continue
			}
			if unicode.IsLetter(r) {
				letters++
			} else {
				dead = append(dead, r)
			}
		}
		viaDead := "none"
		switch {
		case len(dead) > 0 && letters > 0:
			viaDead = fmt.Sprintf("%d: %s and %d letters", len(dead)+letters, docChars(dead), letters)
		case len(dead) > 0:
			viaDead = fmt.Sprintf("%d: %s", len(dead), docChars(dead))
		case letters > 0:
			viaDead = fmt.Sprintf("%d letters", letters)
		}
		var skips []rune
		for r := rune(0x20); r <= 0xff; r++ {
			if (r < 0x7f || r >= 0xa0) && km.Strokes(r) == nil {
				skips = append(skips, r)
			}
		}
		skipped := "none"
		if len(skips) > 0 {
			skipped = fmt.Sprintf("%d: %s", len(skips), docChars(skips))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", name, layout, km.Len(), viaDead, skipped)
	}
	return b.String()
}

// TestDocsKeymapTable holds docs/hid.md's table of the keymaps to the
// keymaps built in (rewrite it with go test ./hid -run
// TestDocsKeymapTable -update).
func TestDocsKeymapTable(t *testing.T) {
	const (
		begin = "<!-- keymaps: generated from hid/keymaps by go test ./hid -run TestDocsKeymapTable -update -->\n"
		end   = "<!-- /keymaps -->\n"
	)
	path := filepath.Join("..", "docs", "hid.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(begin))
	if i < 0 || bytes.Count(data, []byte(begin)) != 1 {
		t.Fatalf("%s: want one line %q", path, begin)
	}
	i += len(begin)
	j := bytes.Index(data[i:], []byte(end))
	if j < 0 {
		t.Fatalf("%s: no %q after the table", path, end)
	}
	want, got := docKeymapTable(t), string(data[i:i+j])
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, slices.Concat(data[:i], []byte(want), data[i+j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the keymaps' table is not the keymaps'; rerun with -update. It should be:\n%s", path, want)
}
