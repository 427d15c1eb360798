package vnc

import (
	"strconv"

	"kvmd/hid"
)

// keysymKeys are the X keysyms of keys that type no character, by the
// key's KeyboardEvent.code name: the values are X11's keysymdef.h and
// XF86keysym.h (xorgproto), the names those of package hid. A keysym of a
// character goes through the keymap instead (keysymRune).
var keysymKeys = map[uint32]string{
	0xff08: "Backspace", 0xff09: "Tab", 0xff0d: "Enter", 0xff13: "Pause", 0xff14: "ScrollLock",
	0xff15: "PrintScreen", // Sys_Req
	0xff1b: "Escape", 0xffff: "Delete",
	0xff50: "Home", 0xff51: "ArrowLeft", 0xff52: "ArrowUp", 0xff53: "ArrowRight", 0xff54: "ArrowDown",
	0xff55: "PageUp", 0xff56: "PageDown", 0xff57: "End",
	0xff61: "PrintScreen", 0xff63: "Insert", 0xff67: "ContextMenu",
	0xff22: "NonConvert", 0xff23: "Convert", 0xff27: "KanaMode", // Muhenkan, Henkan, Hiragana_Katakana
	0xff7f: "NumLock", 0xffe5: "CapsLock",
	// The keypad: digits and operators, and the keys it gives with Num
	// Lock off (KP_Home is the 7...).
	0xff8d: "NumpadEnter", 0xffaa: "NumpadMultiply", 0xffab: "NumpadAdd", 0xffac: "NumpadDecimal",
	0xffad: "NumpadSubtract", 0xffae: "NumpadDecimal", 0xffaf: "NumpadDivide",
	0xffb0: "Numpad0", 0xffb1: "Numpad1", 0xffb2: "Numpad2", 0xffb3: "Numpad3", 0xffb4: "Numpad4",
	0xffb5: "Numpad5", 0xffb6: "Numpad6", 0xffb7: "Numpad7", 0xffb8: "Numpad8", 0xffb9: "Numpad9",
	0xff95: "Numpad7", 0xff96: "Numpad4", 0xff97: "Numpad8", 0xff98: "Numpad6", 0xff99: "Numpad2",
	0xff9a: "Numpad9", 0xff9b: "Numpad3", 0xff9c: "Numpad1", 0xff9d: "Numpad5", 0xff9e: "Numpad0",
	0xff9f: "NumpadDecimal",
	// Modifiers. Meta and Super are the same key on a PC keyboard (the
	// Windows key); ISO_Level3_Shift and Mode_switch are AltGr.
	0xffe1: "ShiftLeft", 0xffe2: "ShiftRight", 0xffe3: "ControlLeft", 0xffe4: "ControlRight",
	0xffe7: "MetaLeft", 0xffe8: "MetaRight", 0xffe9: "AltLeft", 0xffea: "AltRight",
	0xffeb: "MetaLeft", 0xffec: "MetaRight", 0xfe03: "AltRight", 0xff7e: "AltRight",
	// XF86 media keys.
	0x1008ff11: "AudioVolumeDown", 0x1008ff12: "AudioVolumeMute", 0x1008ff13: "AudioVolumeUp",
	0x1008ff2a: "Power",
}

// F1 to F24 are 0xffbe to 0xffd5.
const (
	keysymF1  = 0xffbe
	keysymF24 = 0xffd5
)

// deadKeysyms are X's dead keys, by the character each puts on its own
// (what the dead key then Space types): the host's dead key is the first
// key of how its layout types that character.
var deadKeysyms = map[uint32]rune{
	0xfe50: '`', 0xfe51: '´', 0xfe52: '^', 0xfe53: '~', 0xfe54: '¯', 0xfe55: '˘',
	0xfe56: '˙', 0xfe57: '¨', 0xfe58: '˚', 0xfe59: '˝', 0xfe5a: 'ˇ', 0xfe5b: '¸', 0xfe5c: '˛',
}

// keysymKey returns the key of a keysym that types no character.
func keysymKey(ks uint32) (hid.Key, bool) {
	if ks >= keysymF1 && ks <= keysymF24 {
		return hid.KeyByName("F" + strconv.Itoa(int(ks-keysymF1)+1))
	}
	name, ok := keysymKeys[ks]
	if !ok {
		return hid.Key{}, false
	}
	return hid.KeyByName(name)
}

// keysymRune returns the character of a keysym: Latin-1's keysyms are
// their code points, and 0x01000000 plus a code point is that character
// (keysymdef.h's Unicode keysyms). The legacy keysyms of other scripts
// (Latin-2, Cyrillic, Greek, 0x1a1 to 0xeff) are not read: a limit
// docs/vnc.md states.
func keysymRune(ks uint32) (rune, bool) {
	switch {
	case ks >= 0x20 && ks <= 0x7e, ks >= 0xa0 && ks <= 0xff:
		return rune(ks), true
	case ks >= 0x01000020 && ks <= 0x0110ffff:
		return rune(ks - 0x01000000), true
	}
	return 0, false
}
