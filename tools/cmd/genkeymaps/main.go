// Command genkeymaps writes the keymaps that POST /api/hid/print types
// with (hid/keymaps/), from xkeyboard-config's layouts: each layout is
// compiled by libxkbcommon's xkbcli (Debian packages xkb-data and
// libxkbcommon-tools), and each character a key types at its first four
// levels becomes a line "U+XXXX KeyName [shift] [altgr]". Keysym names
// are turned into characters with X11's keysymdef.h (Debian x11proto-dev).
//
//	cd tools && go run ./cmd/genkeymaps -out ../hid/keymaps
//
// Its output is committed; hid's tests check it parses and types what
// each layout's keys say, and this command's test regenerates it where
// the tools are installed and compares.
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"kvmd/hid"
)

// Layout is one keymap: kvmd's name for it (its contrib/keymaps file
// names, which clients send as keymap=) and the xkeyboard-config layout
// and variant it is made from.
type Layout struct {
	Name, XKB, Variant string
}

// Layouts are the keymaps made: the names kvmd ships, each from the
// xkeyboard-config layout of the same language and country.
var Layouts = []Layout{
	{"ar", "ara", ""},
	{"bepo", "fr", "bepo"},
	{"cz", "cz", ""},
	{"da", "dk", ""},
	{"de", "de", ""},
	{"de-ch", "ch", ""},
	{"en-gb", "gb", ""},
	{"en-us", "us", ""},
	{"en-us-altgr-intl", "us", "altgr-intl"},
	{"en-us-colemak", "us", "colemak"},
	{"es", "es", ""},
	{"et", "ee", ""},
	{"fi", "fi", ""},
	{"fo", "fo", ""},
	{"fr", "fr", ""},
	{"fr-be", "be", ""},
	{"fr-ca", "ca", ""},
	{"fr-ch", "ch", "fr"},
	{"hr", "hr", ""},
	{"hu", "hu", ""},
	{"is", "is", ""},
	{"it", "it", ""},
	{"ja", "jp", ""},
	{"lt", "lt", ""},
	{"lv", "lv", ""},
	{"mk", "mk", ""},
	{"nl", "nl", ""},
	{"no", "no", ""},
	{"pl", "pl", ""},
	{"pt", "pt", ""},
	{"pt-br", "br", ""},
	{"ru", "ru", ""},
	{"sl", "si", ""},
	{"sv", "se", ""},
	{"th", "th", ""},
	{"tr", "tr", ""},
}

func main() {
	out := flag.String("out", "../hid/keymaps", "directory to write the keymaps to")
	zipPath := flag.String("zip", "../hid/keymaps.zip", "the archive of the directory's files that the daemon embeds")
	keysymdef := flag.String("keysymdef", "/usr/include/X11/keysymdef.h", "X11's keysymdef.h")
	xkbcli := flag.String("xkbcli", "xkbcli", "libxkbcommon's xkbcli")
	flag.Parse()
	err := run(*out, *keysymdef, *xkbcli)
	if err == nil {
		err = writeZip(*zipPath, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genkeymaps:", err)
		os.Exit(1)
	}
}

func run(out, keysymdef, xkbcli string) error {
	f, err := os.Open(keysymdef)
	if err != nil {
		return err
	}
	syms, err := ParseKeysymdef(f)
	f.Close()
	if err != nil {
		return err
	}
	version := xkbDataVersion()
	for _, l := range Layouts {
		args := []string{"compile-keymap", "--layout", l.XKB}
		if l.Variant != "" {
			args = append(args, "--variant", l.Variant)
		}
		keymap, err := exec.Command(xkbcli, args...).Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w", xkbcli, strings.Join(args, " "), err)
		}
		var b bytes.Buffer
		if err := Generate(&b, l, version, keymap, syms); err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		if err := os.WriteFile(filepath.Join(out, l.Name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeZip writes the regular files of dir, sorted by name, into a zip
// archive at path, deflated at the best compression and without times, so
// that the same files make the same archive. The daemon embeds the archive
// (package hid), not the directory: a tenth of the size.
func writeZip(path, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	for _, e := range ents { // ReadDir sorts them
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name(), Method: zip.Deflate})
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// xkbDataVersion is Debian's version of xkb-data, for the files' headers.
func xkbDataVersion() string {
	b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "xkb-data").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

var defineRE = regexp.MustCompile(`^#define XK_(\w+)\s+0x([0-9a-fA-F]+)\s*(?:/\*\s*\(?U\+([0-9A-Fa-f]{4,6}))?`)

// Keysyms maps keysym names to their values and characters.
type Keysyms struct {
	byName map[string]uint32
	chars  map[uint32]rune
}

// ParseKeysymdef reads keysymdef.h: each "#define XK_name 0xVALUE" with,
// in its comment, the character it stands for ("U+00F6").
func ParseKeysymdef(r io.Reader) (*Keysyms, error) {
	k := &Keysyms{byName: map[string]uint32{}, chars: map[uint32]rune{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := defineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, _ := strconv.ParseUint(m[2], 16, 32)
		k.byName[m[1]] = uint32(v)
		if m[3] != "" {
			cp, _ := strconv.ParseUint(m[3], 16, 32)
			if _, ok := k.chars[uint32(v)]; !ok {
				k.chars[uint32(v)] = rune(cp)
			}
		}
	}
	if len(k.byName) == 0 {
		return nil, fmt.Errorf("keysymdef.h: no keysyms")
	}
	return k, sc.Err()
}

// Char returns the character a keysym name (as xkbcli writes it) types:
// Uxxxx names, keysyms 0x01000000 + the code point, and the keysyms
// keysymdef.h gives a character.
func (k *Keysyms) Char(name string) (rune, bool) {
	if len(name) >= 5 && name[0] == 'U' {
		if cp, err := strconv.ParseUint(name[1:], 16, 32); err == nil {
			return rune(cp), true
		}
	}
	v, ok := k.byName[name]
	if !ok {
		u, err := strconv.ParseUint(strings.TrimPrefix(name, "0x"), 16, 32)
		if !strings.HasPrefix(name, "0x") || err != nil {
			return 0, false
		}
		v = uint32(u)
	}
	if v >= 0x01000000 && v <= 0x0110ffff {
		return rune(v - 0x01000000), true
	}
	r, ok := k.chars[v]
	return r, ok
}

// level is a set of modifiers: shift and LevelThree (AltGr).
type level struct{ shift, altgr bool }

var (
	sectionRE = regexp.MustCompile(`(?m)^xkb_(keycodes|types|compatibility|symbols)\b[^{]*\{`)
	keycodeRE = regexp.MustCompile(`<(\w+)>\s*=\s*(\d+);`)
	aliasRE   = regexp.MustCompile(`alias\s+<(\w+)>\s*=\s*<(\w+)>;`)
	typeRE    = regexp.MustCompile(`(?s)type\s+"([^"]+)"\s*\{(.*?)\};`)
	mapRE     = regexp.MustCompile(`map\[([^\]]+)\]\s*=\s*(?:Level)?(\d+);`)
	keyRE     = regexp.MustCompile(`(?s)key\s+<(\w+)>\s*\{(.*?)\};`)
	keyTypeRE = regexp.MustCompile(`type(?:\[Group1\])?\s*=\s*"([^"]+)"`)
	symsRE    = regexp.MustCompile(`(?:symbols\[Group1\]\s*=\s*|^\s*)\[([^\]]*)\]`)
)

// section returns the body of one xkb_* section of a compiled keymap.
func section(keymap, name string) string {
	locs := sectionRE.FindAllStringSubmatchIndex(keymap, -1)
	for i, l := range locs {
		if keymap[l[2]:l[3]] != name {
			continue
		}
		end := len(keymap)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		return keymap[l[1]:end]
	}
	return ""
}

// Generate writes the keymap of layout l from xkbcli's compiled keymap.
func Generate(w io.Writer, l Layout, version string, keymap []byte, syms *Keysyms) error {
	km := string(keymap)
	codes := map[string]int{}
	kc := section(km, "keycodes")
	for _, m := range keycodeRE.FindAllStringSubmatch(kc, -1) {
		codes[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, m := range aliasRE.FindAllStringSubmatch(kc, -1) {
		if c, ok := codes[m[2]]; ok {
			codes[m[1]] = c
		}
	}
	// Each type's levels reachable with Shift and LevelThree alone.
	types := map[string]map[int]level{}
	for _, m := range typeRE.FindAllStringSubmatch(section(km, "types"), -1) {
		lv := map[int]level{1: {}}
		for _, mm := range mapRE.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.Atoi(mm[2])
			var l level
			ok := true
			for _, mod := range strings.Split(mm[1], "+") {
				switch strings.TrimSpace(mod) {
				case "Shift":
					l.shift = true
				case "LevelThree":
					l.altgr = true
				default:
					ok = false
				}
			}
			if _, seen := lv[n]; ok && !seen {
				lv[n] = l
			}
		}
		types[m[1]] = lv
	}
	// The levels of a key with no explicit type: the automatic types
	// (TWO_LEVEL, ALPHABETIC, FOUR_LEVEL*) put Shift at 2, LevelThree at
	// 3 and both at 4.
	implicit := map[int]level{1: {}, 2: {shift: true}, 3: {altgr: true}, 4: {shift: true, altgr: true}}

	type cand struct {
		stroke hid.Stroke
		code   int
	}
	best := map[rune]cand{}
	altgrOnRAlt := false
	symbols := section(km, "symbols")
	var keys [][]string
	for _, m := range keyRE.FindAllStringSubmatch(symbols, -1) {
		keys = append(keys, m)
		if codes[m[1]] == 108 && strings.Contains(m[2], "ISO_Level3_Shift") { // <RALT>: KEY_RIGHTALT + 8
			altgrOnRAlt = true
		}
	}
	for _, m := range keys {
		name, body := m[1], m[2]
		code, ok := codes[name]
		if !ok || strings.HasPrefix(name, "KP") {
			continue // the keypad types what the main keys do
		}
		key, ok := hid.KeyByEvdev(uint16(code - 8))
		if !ok {
			continue
		}
		levels := implicit
		if t := keyTypeRE.FindStringSubmatch(body); t != nil {
			if levels, ok = types[t[1]]; !ok {
				return fmt.Errorf("key <%s>: unknown type %q", name, t[1])
			}
		}
		sm := symsRE.FindStringSubmatch(strings.TrimSpace(body))
		if sm == nil {
			continue
		}
		for i, sym := range strings.Split(sm[1], ",") {
			lv, ok := levels[i+1]
			if !ok || (lv.altgr && !altgrOnRAlt) {
				continue
			}
			r, ok := syms.Char(strings.TrimSpace(sym))
			if !ok || r < 0x20 || r == 0x7f {
				continue
			}
			c := cand{hid.Stroke{Key: key, Shift: lv.shift, AltGr: lv.altgr}, code}
			if old, ok := best[r]; !ok || better(c.stroke, c.code, old.stroke, old.code) {
				best[r] = c
			}
		}
	}
	if len(best) == 0 {
		return fmt.Errorf("no characters: is this xkbcli's output?")
	}
	desc := l.XKB
	if l.Variant != "" {
		desc += "(" + l.Variant + ")"
	}
	fmt.Fprintf(w, "# Keymap %s: what the keys of xkeyboard-config's layout %s type, without dead keys.\n", l.Name, desc)
	fmt.Fprintf(w, "# Generated by tools/cmd/genkeymaps from xkeyboard-config (Debian xkb-data %s); do not edit.\n", version)
	fmt.Fprintf(w, "# Licence: COPYING.xkeyboard-config and COPYING.keysymdef beside this file.\n")
	runes := make([]rune, 0, len(best))
	for r := range best {
		runes = append(runes, r)
	}
	slices.Sort(runes)
	for _, r := range runes {
		s := best[r].stroke
		line := fmt.Sprintf("U+%04X %s", r, s.Key.Name)
		if s.Shift {
			line += " shift"
		}
		if s.AltGr {
			line += " altgr"
		}
		fmt.Fprintf(w, "%-28s # %s\n", line, printable(r))
	}
	return nil
}

// better prefers the stroke with fewer modifiers (none, Shift, AltGr, both),
// then the key with the lower code.
func better(a hid.Stroke, ac int, b hid.Stroke, bc int) bool {
	rank := func(s hid.Stroke) int {
		n := 0
		if s.Shift {
			n++
		}
		if s.AltGr {
			n += 2
		}
		return n
	}
	if rank(a) != rank(b) {
		return rank(a) < rank(b)
	}
	return ac < bc
}

func printable(r rune) string {
	switch {
	case r == ' ':
		return "space"
	case !unicode.IsGraphic(r) || unicode.Is(unicode.Mn, r):
		return "(not shown)"
	}
	return string(r)
}
