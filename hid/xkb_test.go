package hid

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"kvmd/internal/xkbtest"
)

// presses turns print's key presses into the events a Linux host reads.
func presses(seq []KeyPress) []xkbtest.Press {
	out := make([]xkbtest.Press, len(seq))
	for i, kp := range seq {
		out[i] = xkbtest.Press{Code: kp.Key.Evdev, Down: kp.Press}
	}
	return out
}

// hostText is what a host typed, with the carriage return of its Enter
// read as the newline print types it for.
func hostText(s string) string { return strings.ReplaceAll(s, "\r", "\n") }

// modCombos are the modifiers print holds for a stroke: none, Shift,
// AltGr (the right Alt), both.
var modCombos = []struct{ shift, altgr bool }{{false, false}, {true, false}, {false, true}, {true, true}}

// strokeCase is the events of one key pressed with modifiers held.
func strokeCase(k Key, shift, altgr bool) []xkbtest.Press {
	var seq []KeyPress
	if shift {
		seq = append(seq, KeyPress{keyShift, true})
	}
	if altgr {
		seq = append(seq, KeyPress{keyAltGr, true})
	}
	seq = append(seq, KeyPress{k, true}, KeyPress{k, false})
	if altgr {
		seq = append(seq, KeyPress{keyAltGr, false})
	}
	if shift {
		seq = append(seq, KeyPress{keyShift, false})
	}
	return presses(seq)
}

// probeKeys are the keys tried one at a time on each layout: every key
// but the modifiers, and but ContextMenu and KanaMode, whose codes here
// are kvmd's, not the ones a Linux host reads for them (see Key.Evdev);
// neither types a character.
func probeKeys() []Key {
	var ks []Key
	for _, k := range Keys() {
		if !k.Modifier() && k.Name != "ContextMenu" && k.Name != "KanaMode" {
			ks = append(ks, k)
		}
	}
	return ks
}

// layoutStroke is a key with modifiers and what it typed alone.
type layoutStroke struct {
	key          Key
	shift, altgr bool
	typed        xkbtest.Typed
}

func (s layoutStroke) events() []xkbtest.Press { return strokeCase(s.key, s.shift, s.altgr) }

func (s layoutStroke) String() string {
	n := s.key.Name
	if s.shift {
		n = "Shift+" + n
	}
	if s.altgr {
		n = "AltGr+" + n
	}
	return n
}

// TestKeymapsTypeRight is the proof that print never types a wrong
// character: for each of the built-in keymaps, every character it types,
// typed by print's presses on a host with the keymap's xkeyboard-config
// layout, as libxkbcommon itself reads them there with the en_US.UTF-8
// compose table (dead keys included), comes out as itself; every other
// character (those of the other keymaps, ASCII, Latin-1 and a few more)
// is skipped, with no key pressed. The whole of each keymap's characters
// in one text, where Shift and AltGr stay held across characters, comes
// out whole. And nothing is skipped that the layout types: every
// character that libxkbcommon's layout types with one key of the layout's
// own keyboard, with or without Shift and AltGr, or with a dead key and
// such a key, print types; and print presses no key that the layout's own
// symbols (without the "pc" ones every layout is compiled with) leave
// empty: no IntlBackslash on en-us.
func TestKeymapsTypeRight(t *testing.T) {
	k := BuiltinKeymaps()
	var kms []*Keymap
	others := map[rune]bool{} // characters some keymap types
	for _, name := range k.Names() {
		km, err := k.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if km.Layout == "" {
			t.Fatalf("keymap %s names no xkeyboard-config layout", name)
		}
		kms = append(kms, km)
		for _, r := range km.Chars() {
			others[r] = true
		}
	}
	for r := rune(0); r < 0x180; r++ {
		others[r] = true
	}
	for _, r := range "€ẞж中😀\u0301\u200b\ufffd\U0010ffff" {
		others[r] = true
	}
	probe := probeKeys()

	// First run: each character alone; each key alone with each of the
	// modifiers, on the host's layout and on its own symbols (which keys
	// the layout's keyboard has); and all of the characters in one text.
	type plan struct {
		typed       []rune // the characters sent, in the order of their cases
		skipped     []rune
		whole       string
		strokeCases int
	}
	plans := make([]plan, len(kms))
	var first []xkbtest.Layout
	for i, km := range kms {
		p := &plans[i]
		host := xkbtest.Layout{Layout: km.Layout, Variant: km.Variant}
		for r := range others {
			if r == '\r' {
				continue // a line ending's, typed as Enter (TestTypeLineEnds)
			}
			seq, skipped := km.Type(string(r))
			switch {
			case skipped.Count == 0 && len(seq) > 0:
				p.typed = append(p.typed, r)
			case skipped.Count == 1 && len(seq) == 0:
				p.skipped = append(p.skipped, r)
			default:
				t.Errorf("%s: %q gives %d presses and %d skipped", km.Name, r, len(seq), skipped.Count)
			}
		}
		slices.Sort(p.typed)
		for _, r := range p.typed {
			seq, _ := km.Type(string(r))
			host.Cases = append(host.Cases, presses(seq))
		}
		for _, key := range probe {
			for _, m := range modCombos {
				host.Cases = append(host.Cases, strokeCase(key, m.shift, m.altgr))
			}
		}
		p.strokeCases = len(probe) * len(modCombos)
		whole := slices.Clone(p.typed)
		rand.New(rand.NewPCG(uint64(i), 38)).Shuffle(len(whole), func(a, b int) { whole[a], whole[b] = whole[b], whole[a] })
		p.whole = string(whole)
		seq, _ := km.Type(p.whole)
		host.Cases = append(host.Cases, presses(seq))
		own := xkbtest.Layout{Layout: km.Layout, Variant: km.Variant, OwnSymbols: true}
		for _, key := range probe {
			for _, m := range modCombos {
				own.Cases = append(own.Cases, strokeCase(key, m.shift, m.altgr))
			}
		}
		first = append(first, host, own)
	}
	res := xkbtest.Type(t, first)

	// Second run: each dead key the layout has, then each key.
	var second []xkbtest.Layout
	strokes := make([][]layoutStroke, len(kms))
	for i, km := range kms {
		p := &plans[i]
		host, own := res[2*i], res[2*i+1]
		for j, r := range p.typed {
			if got := host[j]; hostText(got.Text) != string(r) || got.Pending || got.Cancelled {
				seq, _ := km.Type(string(r))
				t.Errorf("%s: %q (%U) typed as %s comes out as %q on a host with layout %s %s (pending %v, cancelled %v)",
					km.Name, r, r, typed(seq), got.Text, km.Layout, km.Variant, got.Pending, got.Cancelled)
			}
		}
		// The keys of the layout's keyboard: those its own symbols give
		// characters, and those the "pc" symbols do that type something
		// the layout's own keys do not type with at most Shift (the 102nd
		// key of an ISO layout that leaves it to "pc", not that of a US
		// one, whose < and > are Shift and the comma and period).
		n := len(p.typed)
		onKeyboard := map[Key]bool{keyEnter: true, keyShift: true, keyAltGr: true, strokesTab[0].Key: true}
		shifted := map[rune]bool{}
		for j, key := range probe {
			for m, mods := range modCombos {
				s := layoutStroke{key, mods.shift, mods.altgr, host[n+j*len(modCombos)+m]}
				strokes[i] = append(strokes[i], s)
				o := own[j*len(modCombos)+m]
				if o.Text != "" || o.Pending {
					onKeyboard[key] = true
				}
				if c, ok := oneChar(o); ok && !mods.altgr {
					shifted[c] = true
				}
			}
		}
		for _, s := range strokes[i] {
			if c, ok := oneChar(s.typed); ok && !s.altgr && !shifted[c] {
				onKeyboard[s.key] = true
			}
		}
		if got := hostText(host[n+p.strokeCases].Text); got != p.whole {
			t.Errorf("%s: all its %d characters in one text come out as\n%q\nwant\n%q", km.Name, len(p.typed), got, p.whole)
		}
		for _, r := range km.Chars() {
			for _, s := range km.Strokes(r) {
				if !onKeyboard[s.Key] {
					t.Errorf("%s: %q is typed with %s, a key layout %s's own keyboard does not have", km.Name, r, s.Key.Name, km.Layout)
				}
			}
		}
		// Strokes of keys not on the keyboard are left out of what the
		// layout types, as print leaves them out, and so are the
		// keypad's: what they type depends on the host's Num Lock.
		strokes[i] = slices.DeleteFunc(strokes[i], func(s layoutStroke) bool {
			return !onKeyboard[s.key] || strings.HasPrefix(s.key.Name, "Numpad")
		})
		l := xkbtest.Layout{Layout: km.Layout, Variant: km.Variant}
		for _, d := range strokes[i] {
			if !d.typed.Pending {
				continue
			}
			for _, s := range strokes[i] {
				l.Cases = append(l.Cases, append(d.events(), s.events()...))
			}
		}
		second = append(second, l)
	}
	res2 := xkbtest.Type(t, second)

	// What the layout types, one key or a dead key and a key: print types
	// each of those characters.
	for i, km := range kms {
		can := map[rune]string{}
		note := func(typed xkbtest.Typed, how string) {
			if c, ok := oneChar(typed); ok {
				if _, seen := can[c]; !seen {
					can[c] = how
				}
			}
		}
		var dead []layoutStroke
		for _, s := range strokes[i] {
			if s.typed.Pending {
				dead = append(dead, s)
			} else {
				note(s.typed, s.String())
			}
		}
		c := 0
		for _, d := range dead {
			for _, s := range strokes[i] {
				note(res2[i][c], d.String()+" "+s.String())
				c++
			}
		}
		var missed []string
		for r, how := range can {
			if km.Strokes(r) == nil {
				missed = append(missed, fmt.Sprintf("%q (%s)", r, how))
			}
		}
		slices.Sort(missed)
		if len(missed) > 0 {
			t.Errorf("%s: layout %s %s types %d characters print skips: %s", km.Name, km.Layout, km.Variant, len(missed), strings.Join(missed, ", "))
		}
		if len(can) == 0 {
			t.Errorf("%s: libxkbcommon typed nothing with layout %s %s", km.Name, km.Layout, km.Variant)
		}
		t.Logf("%s: types %d characters (%d through dead keys), skipped %d of the %d tried; the layout types %d with one key or a dead key and a key",
			km.Name, km.Len(), deadCount(km), len(plans[i].skipped), len(others), len(can))
	}
}

// oneChar returns the character a stroke or sequence typed, if it typed
// one printable character and finished.
func oneChar(t xkbtest.Typed) (rune, bool) {
	rs := []rune(t.Text)
	if len(rs) != 1 || rs[0] < 0x20 || rs[0] == 0x7f || t.Pending || t.Cancelled {
		return 0, false
	}
	return rs[0], true
}

// deadCount is how many characters km types through a dead key.
func deadCount(km *Keymap) int {
	n := 0
	for _, r := range km.Chars() {
		if len(km.Strokes(r)) > 1 {
			n++
		}
	}
	return n
}

// TestTypeLineEnds: "\n", "\r\n" and "\r" are each one Enter, so that a
// text with any line ends types its lines, and none counts as skipped.
func TestTypeLineEnds(t *testing.T) {
	km, err := BuiltinKeymaps().Get("en-us")
	if err != nil {
		t.Fatal(err)
	}
	seq, skipped := km.Type("a\nb\r\nc\rd\r\r\n")
	if got, want := typed(seq), "+KeyA -KeyA +Enter -Enter +KeyB -KeyB +Enter -Enter +KeyC -KeyC +Enter -Enter +KeyD -KeyD +Enter -Enter +Enter -Enter"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if skipped.Count != 0 || km.Skipped("a\r\nb\r").Count != 0 {
		t.Errorf("line ends counted as skipped: %+v", skipped)
	}
}
