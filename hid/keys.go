package hid

// Key is one key of the keyboard: its name as a browser's
// KeyboardEvent.code gives it (W3C UI Events, "KeyboardEvent code
// Values"), its usage on the USB HID Keyboard/Keypad page (0x07, the byte
// a boot keyboard report carries) and its Linux input event code.
type Key struct {
	Name  string
	Usage byte
	// Evdev is the code kvmd's binary WebSocket frames carry for the key
	// (linux/input-event-codes.h). It is the code a Linux host reports
	// for the usage, except ContextMenu (KEY_CONTEXT_MENU here; usbhid
	// reports usage 0x65 as KEY_COMPOSE) and KanaMode (KEY_KATAKANA;
	// usbhid reports usage 0x88 as KEY_KATAKANAHIRAGANA), as in kvmd.
	Evdev uint16
}

// Modifier reports whether k is one of the eight modifiers, which a boot
// report carries as bits of its first byte rather than in a key slot.
func (k Key) Modifier() bool { return k.Usage >= 0xe0 && k.Usage <= 0xe7 }

// modBit is the bit of a modifier in the report's first byte.
func (k Key) modBit() byte { return 1 << (k.Usage - 0xe0) }

// keys are the keys kvmd accepts (the web_name column of its keymap.csv,
// github.com/pikvm/kvmd at f14596e8), so that every name its clients send
// is known here; ordered by usage. The columns are facts of the three
// standards named on Key, not kvmd's table.
var keys = []Key{
	{"KeyA", 0x04, 30},             // KEY_A
	{"KeyB", 0x05, 48},             // KEY_B
	{"KeyC", 0x06, 46},             // KEY_C
	{"KeyD", 0x07, 32},             // KEY_D
	{"KeyE", 0x08, 18},             // KEY_E
	{"KeyF", 0x09, 33},             // KEY_F
	{"KeyG", 0x0a, 34},             // KEY_G
	{"KeyH", 0x0b, 35},             // KEY_H
	{"KeyI", 0x0c, 23},             // KEY_I
	{"KeyJ", 0x0d, 36},             // KEY_J
	{"KeyK", 0x0e, 37},             // KEY_K
	{"KeyL", 0x0f, 38},             // KEY_L
	{"KeyM", 0x10, 50},             // KEY_M
	{"KeyN", 0x11, 49},             // KEY_N
	{"KeyO", 0x12, 24},             // KEY_O
	{"KeyP", 0x13, 25},             // KEY_P
	{"KeyQ", 0x14, 16},             // KEY_Q
	{"KeyR", 0x15, 19},             // KEY_R
	{"KeyS", 0x16, 31},             // KEY_S
	{"KeyT", 0x17, 20},             // KEY_T
	{"KeyU", 0x18, 22},             // KEY_U
	{"KeyV", 0x19, 47},             // KEY_V
	{"KeyW", 0x1a, 17},             // KEY_W
	{"KeyX", 0x1b, 45},             // KEY_X
	{"KeyY", 0x1c, 21},             // KEY_Y
	{"KeyZ", 0x1d, 44},             // KEY_Z
	{"Digit1", 0x1e, 2},            // KEY_1
	{"Digit2", 0x1f, 3},            // KEY_2
	{"Digit3", 0x20, 4},            // KEY_3
	{"Digit4", 0x21, 5},            // KEY_4
	{"Digit5", 0x22, 6},            // KEY_5
	{"Digit6", 0x23, 7},            // KEY_6
	{"Digit7", 0x24, 8},            // KEY_7
	{"Digit8", 0x25, 9},            // KEY_8
	{"Digit9", 0x26, 10},           // KEY_9
	{"Digit0", 0x27, 11},           // KEY_0
	{"Enter", 0x28, 28},            // KEY_ENTER
	{"Escape", 0x29, 1},            // KEY_ESC
	{"Backspace", 0x2a, 14},        // KEY_BACKSPACE
	{"Tab", 0x2b, 15},              // KEY_TAB
	{"Space", 0x2c, 57},            // KEY_SPACE
	{"Minus", 0x2d, 12},            // KEY_MINUS
	{"Equal", 0x2e, 13},            // KEY_EQUAL
	{"BracketLeft", 0x2f, 26},      // KEY_LEFTBRACE
	{"BracketRight", 0x30, 27},     // KEY_RIGHTBRACE
	{"Backslash", 0x31, 43},        // KEY_BACKSLASH
	{"Semicolon", 0x33, 39},        // KEY_SEMICOLON
	{"Quote", 0x34, 40},            // KEY_APOSTROPHE
	{"Backquote", 0x35, 41},        // KEY_GRAVE
	{"Comma", 0x36, 51},            // KEY_COMMA
	{"Period", 0x37, 52},           // KEY_DOT
	{"Slash", 0x38, 53},            // KEY_SLASH
	{"CapsLock", 0x39, 58},         // KEY_CAPSLOCK
	{"F1", 0x3a, 59},               // KEY_F1
	{"F2", 0x3b, 60},               // KEY_F2
	{"F3", 0x3c, 61},               // KEY_F3
	{"F4", 0x3d, 62},               // KEY_F4
	{"F5", 0x3e, 63},               // KEY_F5
	{"F6", 0x3f, 64},               // KEY_F6
	{"F7", 0x40, 65},               // KEY_F7
	{"F8", 0x41, 66},               // KEY_F8
	{"F9", 0x42, 67},               // KEY_F9
	{"F10", 0x43, 68},              // KEY_F10
	{"F11", 0x44, 87},              // KEY_F11
	{"F12", 0x45, 88},              // KEY_F12
	{"PrintScreen", 0x46, 99},      // KEY_SYSRQ
	{"ScrollLock", 0x47, 70},       // KEY_SCROLLLOCK
	{"Pause", 0x48, 119},           // KEY_PAUSE
	{"Insert", 0x49, 110},          // KEY_INSERT
	{"Home", 0x4a, 102},            // KEY_HOME
	{"PageUp", 0x4b, 104},          // KEY_PAGEUP
	{"Delete", 0x4c, 111},          // KEY_DELETE
	{"End", 0x4d, 107},             // KEY_END
	{"PageDown", 0x4e, 109},        // KEY_PAGEDOWN
	{"ArrowRight", 0x4f, 106},      // KEY_RIGHT
	{"ArrowLeft", 0x50, 105},       // KEY_LEFT
	{"ArrowDown", 0x51, 108},       // KEY_DOWN
	{"ArrowUp", 0x52, 103},         // KEY_UP
	{"NumLock", 0x53, 69},          // KEY_NUMLOCK
	{"NumpadDivide", 0x54, 98},     // KEY_KPSLASH
	{"NumpadMultiply", 0x55, 55},   // KEY_KPASTERISK
	{"NumpadSubtract", 0x56, 74},   // KEY_KPMINUS
	{"NumpadAdd", 0x57, 78},        // KEY_KPPLUS
	{"NumpadEnter", 0x58, 96},      // KEY_KPENTER
	{"Numpad1", 0x59, 79},          // KEY_KP1
	{"Numpad2", 0x5a, 80},          // KEY_KP2
	{"Numpad3", 0x5b, 81},          // KEY_KP3
	{"Numpad4", 0x5c, 75},          // KEY_KP4
	{"Numpad5", 0x5d, 76},          // KEY_KP5
	{"Numpad6", 0x5e, 77},          // KEY_KP6
	{"Numpad7", 0x5f, 71},          // KEY_KP7
	{"Numpad8", 0x60, 72},          // KEY_KP8
	{"Numpad9", 0x61, 73},          // KEY_KP9
	{"Numpad0", 0x62, 82},          // KEY_KP0
	{"NumpadDecimal", 0x63, 83},    // KEY_KPDOT
	{"IntlBackslash", 0x64, 86},    // KEY_102ND
	{"ContextMenu", 0x65, 438},     // KEY_CONTEXT_MENU
	{"Power", 0x66, 116},           // KEY_POWER
	{"F13", 0x68, 183},             // KEY_F13
	{"F14", 0x69, 184},             // KEY_F14
	{"F15", 0x6a, 185},             // KEY_F15
	{"F16", 0x6b, 186},             // KEY_F16
	{"F17", 0x6c, 187},             // KEY_F17
	{"F18", 0x6d, 188},             // KEY_F18
	{"F19", 0x6e, 189},             // KEY_F19
	{"F20", 0x6f, 190},             // KEY_F20
	{"F21", 0x70, 191},             // KEY_F21
	{"F22", 0x71, 192},             // KEY_F22
	{"F23", 0x72, 193},             // KEY_F23
	{"F24", 0x73, 194},             // KEY_F24
	{"AudioVolumeMute", 0x7f, 113}, // KEY_MUTE
	{"AudioVolumeUp", 0x80, 115},   // KEY_VOLUMEUP
	{"AudioVolumeDown", 0x81, 114}, // KEY_VOLUMEDOWN
	{"IntlRo", 0x87, 89},           // KEY_RO
	{"KanaMode", 0x88, 90},         // KEY_KATAKANA
	{"IntlYen", 0x89, 124},         // KEY_YEN
	{"Convert", 0x8a, 92},          // KEY_HENKAN
	{"NonConvert", 0x8b, 94},       // KEY_MUHENKAN
	{"ControlLeft", 0xe0, 29},      // KEY_LEFTCTRL
	{"ShiftLeft", 0xe1, 42},        // KEY_LEFTSHIFT
	{"AltLeft", 0xe2, 56},          // KEY_LEFTALT
	{"MetaLeft", 0xe3, 125},        // KEY_LEFTMETA
	{"ControlRight", 0xe4, 97},     // KEY_RIGHTCTRL
	{"ShiftRight", 0xe5, 54},       // KEY_RIGHTSHIFT
	{"AltRight", 0xe6, 100},        // KEY_RIGHTALT
	{"MetaRight", 0xe7, 126},       // KEY_RIGHTMETA
}

var keyByName, keyByEvdev = func() (map[string]Key, map[uint16]Key) {
	byName, byEvdev := map[string]Key{}, map[uint16]Key{}
	for _, k := range keys {
		byName[k.Name] = k
		byEvdev[k.Evdev] = k
	}
	return byName, byEvdev
}()

// KeyByName returns the key of a KeyboardEvent.code name ("KeyA",
// "ShiftLeft"); the name is case-sensitive, as in kvmd.
func KeyByName(name string) (Key, bool) {
	k, ok := keyByName[name]
	return k, ok
}

// KeyByEvdev returns the key of a Linux input event code (KEY_A is 30).
func KeyByEvdev(code uint16) (Key, bool) {
	k, ok := keyByEvdev[code]
	return k, ok
}

// Keys returns every key, ordered by usage.
func Keys() []Key { return append([]Key(nil), keys...) }
