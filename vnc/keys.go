package vnc

import (
	"kvmd/hid"
)

// Keymap says how the host's keyboard layout types a character: the
// strokes in order (a dead key, then a key), nil when it cannot. Package
// hid's *Keymap is one.
type Keymap interface {
	Strokes(r rune) []hid.Stroke
}

var (
	keyShiftLeft  = mustKey("ShiftLeft")
	keyShiftRight = mustKey("ShiftRight")
	keyAltGr      = mustKey("AltRight")
	keySpace      = mustKey("Space")
)

func mustKey(name string) hid.Key {
	k, ok := hid.KeyByName(name)
	if !ok {
		panic("vnc: no key " + name)
	}
	return k
}

// keyboard turns a client's key events, X keysyms, into the host's key
// presses. A keysym of a key that types no character (Enter, F1, Shift)
// is that key. A character is typed as the keymap types it on the host:
// Shift and AltGr are pressed or released around its key as the host's
// layout needs them, whatever the client holds, and put back as the
// client holds them when the key is released (so that a client whose
// layout differs from the host's types the character it shows: a German
// client's Shift+, is ';', which the en-us host types without Shift). The
// dead keys of a stroke sequence are tapped on the press; the last key is
// held until the release. A dead keysym is the host's dead key of the
// same accent.
type keyboard struct {
	km   Keymap
	send func(k hid.Key, press bool)
	// host is what the host has been told is held.
	host map[hid.Key]bool
	// client are the modifiers the client holds (Shift, AltGr), as the
	// host should have them between characters.
	client map[hid.Key]bool
	// held is the key pressed for each keysym held, for its release.
	held map[uint32]hid.Key
}

func newKeyboard(km Keymap, send func(hid.Key, bool)) *keyboard {
	return &keyboard{km: km, send: send, host: map[hid.Key]bool{}, client: map[hid.Key]bool{}, held: map[uint32]hid.Key{}}
}

func (kb *keyboard) set(k hid.Key, press bool) {
	if kb.host[k] == press {
		return
	}
	if press {
		kb.host[k] = true
	} else {
		delete(kb.host, k)
	}
	kb.send(k, press)
}

// mods sets the host's Shift and AltGr: as a stroke needs them, or with s
// nil as the client holds them; those to release first, so that no other
// combination is held on the way.
func (kb *keyboard) mods(s *hid.Stroke) {
	keys := [...]hid.Key{keyShiftLeft, keyShiftRight, keyAltGr}
	var want [len(keys)]bool
	shifted := kb.client[keyShiftLeft] || kb.client[keyShiftRight]
	for i, k := range keys {
		switch {
		case s == nil:
			want[i] = kb.client[k]
		case k == keyAltGr:
			want[i] = s.AltGr
		default:
			// Shift is Shift: the client's own, else the left one.
			want[i] = s.Shift && (kb.client[k] || !shifted && k == keyShiftLeft)
		}
	}
	for _, press := range []bool{false, true} {
		for i, k := range keys {
			if want[i] == press {
				kb.set(k, press)
			}
		}
	}
}

// event applies one key event.
func (kb *keyboard) event(ks uint32, down bool) {
	if !down {
		k, ok := kb.held[ks]
		if !ok {
			return
		}
		delete(kb.held, ks)
		delete(kb.client, k)
		kb.set(k, false)
		kb.mods(nil)
		return
	}
	if k, ok := keysymKey(ks); ok {
		if isMod(k) {
			kb.client[k] = true
			kb.held[ks] = k
			kb.set(k, true)
			return
		}
		kb.mods(nil)
		kb.held[ks] = k
		kb.set(k, true)
		return
	}
	seq := kb.strokes(ks)
	if len(seq) == 0 {
		return
	}
	if old, ok := kb.held[ks]; ok {
		kb.set(old, false) // an auto-repeat: the key again
	}
	for _, s := range seq[:len(seq)-1] {
		kb.mods(&s)
		kb.set(s.Key, true)
		kb.set(s.Key, false)
	}
	last := seq[len(seq)-1]
	kb.mods(&last)
	kb.held[ks] = last.Key
	kb.set(last.Key, true)
}

// strokes returns how the host types a character keysym, or its dead key.
func (kb *keyboard) strokes(ks uint32) []hid.Stroke {
	if r, ok := deadKeysyms[ks]; ok {
		seq := kb.km.Strokes(r)
		if len(seq) >= 2 && seq[len(seq)-1].Key == keySpace {
			return seq[:1] // the dead key alone: the host composes with the next key
		}
		return seq
	}
	if r, ok := keysymRune(ks); ok {
		return kb.km.Strokes(r)
	}
	return nil
}

// releaseAll releases every key held on the host.
func (kb *keyboard) releaseAll() {
	for k := range kb.host {
		kb.set(k, false)
	}
	clear(kb.held)
	clear(kb.client)
}

// isMod tells the modifiers a character's typing may change.
func isMod(k hid.Key) bool { return k == keyShiftLeft || k == keyShiftRight || k == keyAltGr }
