package vnc

import (
	"fmt"
	"strings"
	"testing"

	"kvmd/hid"
)

// TestKeyboardLayouts: keysyms typed on a German host, as the reports
// would change: Shift, AltGr and the dead keys as de's layout needs them,
// whatever the client holds, the client's modifiers put back after.
func TestKeyboardLayouts(t *testing.T) {
	km, err := hid.BuiltinKeymaps().Get("de")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		keys []keysym
		want string
	}{
		{"z is y's key", []keysym{{'z', true}, {'z', false}}, "+KeyY -KeyY"},
		{"@ with AltGr", []keysym{{'@', true}, {'@', false}}, "+AltRight +KeyQ -KeyQ -AltRight"},
		// An en-us client's Shift+; is ':', Shift+. on de: the client's
		// Shift stays.
		{"client's shift kept", []keysym{{0xffe1, true}, {':', true}, {':', false}, {0xffe1, false}},
			"+ShiftLeft +Period -Period -ShiftLeft"},
		// An en-us client's ';' (no Shift) is Shift+, on de.
		{"shift added", []keysym{{';', true}, {';', false}}, "+ShiftLeft +Comma -Comma -ShiftLeft"},
		// An en-us client's Shift+2 is '@': Shift released for AltGr+Q,
		// pressed again after.
		{"shift taken away", []keysym{{0xffe1, true}, {'@', true}, {'@', false}, {0xffe1, false}},
			"+ShiftLeft -ShiftLeft +AltRight +KeyQ -KeyQ -AltRight +ShiftLeft -ShiftLeft"},
		// ê through the dead key, the letter held until released.
		{"dead key sequence", []keysym{{0xea, true}, {0xea, false}}, "+Backquote -Backquote +KeyE -KeyE"},
		// dead_circumflex is de's dead key alone; then e.
		{"dead keysym", []keysym{{0xfe52, true}, {0xfe52, false}, {'e', true}, {'e', false}},
			"+Backquote -Backquote +KeyE -KeyE"},
		{"not on the layout", []keysym{{0x01000000 + 'ж', true}, {0x01000000 + 'ж', false}}, ""},
		{"function keys", []keysym{{0xffbe, true}, {0xffbe, false}, {0xffd5, true}, {0xff0d, true}, {0xff0d, false}},
			"+F1 -F1 +F24 +Enter -Enter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			kb := newKeyboard(km, func(k hid.Key, press bool) {
				got = append(got, fmt.Sprintf("%s%s", map[bool]string{true: "+", false: "-"}[press], k.Name))
			})
			for _, k := range tt.keys {
				kb.event(k.ks, k.down)
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("got  %s\nwant %s", s, tt.want)
			}
		})
	}
}
