package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

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

// xkbKey is a key of a compiled keymap: its XKB keycode (the Linux code
// + 8) and the keysym names of its first group's levels.
type xkbKey struct {
	name   string
	code   int
	levels []xkbLevel
}

// xkbLevel is a level's keysym and, when print can reach it (Shift and
// AltGr, the right Alt, are all it holds), the modifiers that do.
type xkbLevel struct {
	level
	reached bool
	sym     string
}

// keycodeRAlt is the right Alt's XKB keycode (KEY_RIGHTALT + 8).
const keycodeRAlt = 108

// parseXKB reads the keys of a keymap as xkbcli compile-keymap writes it.
// AltGr levels are reached only when the right Alt is ISO_Level3_Shift
// (the key print holds for AltGr).
func parseXKB(keymap string) ([]xkbKey, error) {
	codes := map[string]int{}
	kc := section(keymap, "keycodes")
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
	for _, m := range typeRE.FindAllStringSubmatch(section(keymap, "types"), -1) {
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

	altgrOnRAlt := false
	matches := keyRE.FindAllStringSubmatch(section(keymap, "symbols"), -1)
	for _, m := range matches {
		if codes[m[1]] == keycodeRAlt && strings.Contains(m[2], "ISO_Level3_Shift") {
			altgrOnRAlt = true
		}
	}
	var keys []xkbKey
	for _, m := range matches {
		name, body := m[1], m[2]
		code, ok := codes[name]
		if !ok {
			continue
		}
		levels := implicit
		if t := keyTypeRE.FindStringSubmatch(body); t != nil {
			if levels, ok = types[t[1]]; !ok {
				return nil, fmt.Errorf("key <%s>: unknown type %q", name, t[1])
			}
		}
		sm := symsRE.FindStringSubmatch(strings.TrimSpace(body))
		if sm == nil {
			continue
		}
		k := xkbKey{name: name, code: code}
		for i, sym := range strings.Split(sm[1], ",") {
			lv, ok := levels[i+1]
			sym = strings.TrimSpace(sym)
			if sym == "NoSymbol" {
				continue
			}
			k.levels = append(k.levels, xkbLevel{lv, ok && (!lv.altgr || altgrOnRAlt), sym})
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ownKeyText is a keymap of a layout's own symbols, without the "pc"
// symbols that xkeyboard-config's rules add to every layout (the evdev
// rules compile layout L as symbols "pc+L+inet(evdev)").
func ownKeyText(l Layout) string {
	return fmt.Sprintf(`xkb_keymap {
	xkb_keycodes { include "evdev+aliases(qwerty)" };
	xkb_types { include "complete" };
	xkb_compat { include "complete" };
	xkb_symbols { include "%s" };
};
`, l.symbols())
}

// symbols is the layout's symbols as xkeyboard-config names them:
// "layout" or "layout(variant)".
func (l Layout) symbols() string {
	if l.Variant == "" {
		return l.XKB
	}
	return l.XKB + "(" + l.Variant + ")"
}

// keyboard returns the XKB keycodes of the keys of a layout's keyboard,
// from its keymap as a host compiles it (full) and that of its own
// symbols (own, see ownKeyText): the keys its own symbols give
// characters, and those the "pc" symbols give characters that the layout
// does not type otherwise with at most Shift. The "pc" symbols give every
// layout the 102nd key, less and greater: US and Japanese keyboards do
// not have it, and their layouts type < and > with Shift and the comma
// and period; the ISO layouts that leave the key to "pc" (French,
// Spanish...) have no other way to type them than AltGr and Shift.
func keyboard(full, own []xkbKey, syms *Keysyms) (map[int]bool, error) {
	on := map[int]bool{}
	shifted := map[rune]bool{} // typed by the layout's own keys with at most Shift
	for _, k := range own {
		if len(k.levels) > 0 {
			on[k.code] = true
		}
		for _, c := range shiftLevelChars(k, syms) {
			shifted[c] = true
		}
	}
	if len(on) == 0 {
		return nil, fmt.Errorf("no keys in the layout's own symbols")
	}
	for _, k := range full {
		if on[k.code] {
			continue
		}
		for _, c := range shiftLevelChars(k, syms) {
			if !shifted[c] {
				on[k.code] = true
			}
		}
	}
	return on, nil
}

// shiftLevelChars returns the characters a key types with at most Shift.
func shiftLevelChars(k xkbKey, syms *Keysyms) []rune {
	var cs []rune
	for _, lv := range k.levels {
		if !lv.reached || lv.altgr {
			continue
		}
		if v, ok := syms.Value(lv.sym); ok {
			if c, ok := syms.Char(v); ok && c >= 0x20 && c != 0x7f {
				cs = append(cs, c)
			}
		}
	}
	return cs
}
