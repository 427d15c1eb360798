package main

import (
	"bufio"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
)

var defineRE = regexp.MustCompile(`^#define XK_(\w+)\s+0x([0-9a-fA-F]+)\s*(?:/\*\s*\(?U\+([0-9A-Fa-f]{4,6}))?`)

// Keysyms maps keysym names to their values and values to characters.
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
		return nil, errors.New("keysymdef.h: no keysyms")
	}
	return k, sc.Err()
}

// unicodeKeysym is the offset of the keysyms that stand for a Unicode
// code point (keysym 0x01000000 + the code point).
const unicodeKeysym = 0x01000000

// Value returns the keysym a name stands for, as libxkbcommon's
// xkb_keysym_from_name reads it: the names of keysymdef.h, "Uxxxx" (the
// Latin-1 keysym for the code points that have one, else the Unicode
// keysym) and "0x" hexadecimal values.
func (k *Keysyms) Value(name string) (uint32, bool) {
	if v, ok := k.byName[name]; ok {
		return v, true
	}
	if len(name) >= 2 && name[0] == 'U' {
		cp, err := strconv.ParseUint(name[1:], 16, 32)
		switch {
		case err != nil || cp > 0x10ffff || cp < 0x20 || cp >= 0x7f && cp < 0xa0:
			return 0, false
		case cp < 0x100:
			return uint32(cp), true
		}
		return unicodeKeysym + uint32(cp), true
	}
	if h, ok := strings.CutPrefix(name, "0x"); ok {
		v, err := strconv.ParseUint(h, 16, 32)
		return uint32(v), err == nil
	}
	return 0, false
}

// Char returns the character a keysym types, if any: Unicode keysyms, and
// those keysymdef.h gives a character.
func (k *Keysyms) Char(v uint32) (rune, bool) {
	if v >= unicodeKeysym+0x20 && v <= unicodeKeysym+0x10ffff {
		return rune(v - unicodeKeysym), true
	}
	r, ok := k.chars[v]
	return r, ok
}
