package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/hid"
	"kvmd/internal/testutil"
)

// TestCommittedKeymaps regenerates every keymap from this machine's
// xkeyboard-config and compares it with the committed file: the files are
// what the generator makes of the data they name in their headers. Where
// the xkb-data version differs from the one the files were made from, the
// header says so and the comparison is skipped (make deps installs the
// Debian 12 packages the files come from).
func TestCommittedKeymaps(t *testing.T) {
	for _, tool := range []string{"xkbcli", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Missing(t, tool+" (make deps installs libxkbcommon-tools): "+err.Error())
		}
	}
	const keysymdef = "/usr/include/X11/keysymdef.h"
	if _, err := os.Stat(keysymdef); err != nil {
		testutil.Missing(t, "keysymdef.h (make deps installs x11proto-dev): "+err.Error())
	}
	out := t.TempDir()
	if _, err := os.Stat(composeFile); err != nil {
		testutil.Missing(t, "libX11's compose table (make deps installs libx11-data): "+err.Error())
	}
	if err := run(out, inputs{keysymdef: keysymdef, compose: composeFile, xkbcli: "xkbcli"}); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "..", "hid", "keymaps")
	for _, l := range Layouts {
		want, err := os.ReadFile(filepath.Join(committed, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		if header(got) != header(want) {
			t.Skipf("%s: this machine's xkb-data differs from the committed files' (%q, %q)", l.Name, header(got), header(want))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the committed file is not what genkeymaps makes of xkb-data; regenerate (cd tools && go run ./cmd/genkeymaps)", l.Name)
		}
		if _, err := hid.ParseKeymap(l.Name, bytes.NewReader(got)); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
}

// header is a keymap file's line naming the xkb-data and libx11-data it
// came from.
func header(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "xkb-data") {
			return l
		}
	}
	return ""
}

// testSyms is a keysymdef.h of a few keysyms, as the real one writes them.
const testSyms = `#define XK_space                          0x0020  /* U+0020 SPACE */
#define XK_a                              0x0061  /* U+0061 LATIN SMALL LETTER A */
#define XK_e                              0x0065  /* U+0065 LATIN SMALL LETTER E */
#define XK_asciicircum                    0x005e  /* U+005E CIRCUMFLEX ACCENT */
#define XK_ecircumflex                    0x00ea  /* U+00EA LATIN SMALL LETTER E WITH CIRCUMFLEX */
#define XK_dead_circumflex                0xfe52
#define XK_dead_acute                     0xfe51
`

// TestParseCompose: a compose table read as libxkbcommon 1.5 reads it
// (src/compose/parser.c): strings with escapes, a keysym alone, a later
// sequence replacing an earlier one of the same keys or one it goes on
// from, and one that would end where another goes on left out.
func TestParseCompose(t *testing.T) {
	syms, err := ParseKeysymdef(strings.NewReader(testSyms))
	if err != nil {
		t.Fatal(err)
	}
	table := `# comment
<dead_circumflex> <space>	: "^"	asciicircum # CIRCUMFLEX ACCENT
<dead_circumflex> <e>		: "\303\252" # UTF-8 in octal
<dead_circumflex> <dead_circumflex> : ecircumflex
<dead_acute> <a>		: "x"
<dead_acute> <a>		: "\"y\\"  # the later wins
<dead_acute> <e>		: "z"
<dead_acute> <e> <a>		: "w"  # goes on from <dead_acute> <e>: replaces it
<dead_acute> <dead_acute>	: "\x41"
<dead_acute>			: "v"  # ends where others go on: left out
<U00EA> <NoSuchKeysym>		: "u"  # a keysym keysymdef.h does not name: left out
`
	root, err := ParseCompose(strings.NewReader(table), syms)
	if err != nil {
		t.Fatal(err)
	}
	look := func(names ...string) string {
		nd := root
		for _, n := range names {
			v, ok := syms.Value(n)
			if !ok {
				t.Fatalf("no keysym %s", n)
			}
			if nd = nd.next[v]; nd == nil {
				return "(none)"
			}
		}
		if !nd.leaf {
			return "(more)"
		}
		return nd.text
	}
	for _, tc := range []struct {
		seq  []string
		want string
	}{
		{[]string{"dead_circumflex", "space"}, "^"},
		{[]string{"dead_circumflex", "e"}, "ê"},
		{[]string{"dead_circumflex", "dead_circumflex"}, "ê"},
		{[]string{"dead_acute", "a"}, `"y\`},
		{[]string{"dead_acute", "e"}, "(more)"},
		{[]string{"dead_acute", "e", "a"}, "w"},
		{[]string{"dead_acute", "dead_acute"}, "A"},
		{[]string{"dead_acute"}, "(more)"},
		{[]string{"U00EA"}, "(none)"},
	} {
		if got := look(tc.seq...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.seq, got, tc.want)
		}
	}
	for _, bad := range []string{"<a> <e>\n", "<a> e : \"x\"\n", "<a> : \"x\n", "<a> :\n", "include \"%L\"\n", "<a> : \"\\352\"\n"} {
		if _, err := ParseCompose(strings.NewReader(bad), syms); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestKeysymValue: keysym names as libxkbcommon's xkb_keysym_from_name
// reads them.
func TestKeysymValue(t *testing.T) {
	syms, err := ParseKeysymdef(strings.NewReader(testSyms))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{
		"dead_acute": 0xfe51, "U0041": 0x41, "U00EA": 0xea, "U20AC": 0x010020ac, "0x1000041": 0x1000041,
	} {
		if v, ok := syms.Value(name); !ok || v != want {
			t.Errorf("%s: %#x %v, want %#x", name, v, ok, want)
		}
	}
	for _, name := range []string{"U001F", "U0085", "U110000", "nosuch", "0xZZ"} {
		if v, ok := syms.Value(name); ok {
			t.Errorf("%s: %#x, want none", name, v)
		}
	}
	if c, ok := syms.Char(0x010020ac); !ok || c != '€' {
		t.Errorf("Char(U20AC) = %q %v", c, ok)
	}
}
