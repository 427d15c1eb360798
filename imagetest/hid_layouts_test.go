package imagetest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"kvmd/hid"
	"kvmd/internal/xkbtest"
)

// layoutPrints are the prints the booted test checks at the guest's
// keyboard, each with what its layout cannot type: dead keys (German's ^,
// ` and ê, French's ê, ë, ô, ^ and ¨), the 102nd key of ISO layouts and
// not of the US one (en-us's < is Shift and the comma), and the Japanese
// keyboard's own keys (\ and _ on IntlRo, | on IntlYen).
var layoutPrints = []struct {
	keymap, text, skipped string
}{
	{"en-us", "Hello <World>, ~^`|\\ 1@#$ kvmd_1 {ok}?\n", ""},
	{"de", "Grüße aus Köln: ^2 `x` ê é à ô ñ ß@€|<>\n", "ñ"},
	{"fr", "Là-bas, où l'été ê ë ô ^ ` ¨ <€> ç~ #{[|\\@]}\n", ""},
	{"ja", "Tokyo: \\100 |_kvmd_| {ok} é\n", "é"},
}

// testHIDLayouts prints layoutPrints and reads the guest's keyboard: the
// key codes that arrive are those the built-in keymap says, in order, and
// libxkbcommon, reading them on this machine with the keymap's
// xkeyboard-config layout and compose table, types the text but for what
// the layout cannot type, which print's answer names.
func (s *system) testHIDLayouts(t *testing.T) {
	start := time.Now()
	if _, st := s.m.shell.run(t, "command -v kvmd-input"); st != 0 {
		s.buildGuestTool(t) // the hid subtest did not run
	}
	kbd, _ := s.inputNodes(t)
	w := s.startWatch(t, "layouts", kbd)
	defer s.m.shell.run(t, "kill "+w.pid)
	keymaps := hid.BuiltinKeymaps()
	var layouts []xkbtest.Layout
	var wants []string
	for _, p := range layoutPrints {
		km, err := keymaps.Get(p.keymap)
		if err != nil {
			t.Fatal(err)
		}
		st, body := s.post(t, "/api/hid/print?limit=0&keymap="+url.QueryEscape(p.keymap), p.text)
		var ans struct {
			Result struct {
				Skipped struct {
					Count int      `json:"count"`
					Chars []string `json:"chars"`
				} `json:"skipped"`
			} `json:"result"`
		}
		if st != 200 || json.Unmarshal([]byte(body), &ans) != nil {
			t.Fatalf("print %s: %d %s", p.keymap, st, body)
		}
		if sk := ans.Result.Skipped; sk.Count != len([]rune(p.skipped)) || strings.Join(sk.Chars, "") != p.skipped {
			t.Errorf("print %s: the answer says it skipped %d: %q, want %q", p.keymap, sk.Count, sk.Chars, p.skipped)
		}
		n := 0
		evs := keyEvents(w.events(t, 20*time.Second, quiet(&n)))
		seq, _ := km.Type(p.text)
		var want, got []string
		for _, kp := range seq {
			want = append(want, fmt.Sprintf("%d=%d", kp.Key.Evdev, map[bool]int{true: 1}[kp.Press]))
		}
		var presses []xkbtest.Press
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%d=%d", e.code, e.value))
			presses = append(presses, xkbtest.Press{Code: uint16(e.code), Down: e.value == 1})
		}
		if g, wnt := strings.Join(got, " "), strings.Join(want, " "); g != wnt {
			t.Errorf("print %s %q: the guest's keyboard got the key codes\n%s\nwant the keymap's\n%s", p.keymap, p.text, g, wnt)
		}
		layouts = append(layouts, xkbtest.Layout{Layout: km.Layout, Variant: km.Variant, Cases: [][]xkbtest.Press{presses}})
		text := p.text
		for _, c := range p.skipped {
			text = strings.ReplaceAll(text, string(c), "")
		}
		wants = append(wants, text)
	}
	for i, typed := range xkbtest.Type(t, layouts) {
		p := layoutPrints[i]
		if got := strings.ReplaceAll(typed[0].Text, "\r", "\n"); got != wants[i] || typed[0].Pending {
			t.Errorf("print %s: what the guest's keyboard got, read by libxkbcommon with layout %s %s, types\n%q\nwant\n%q",
				p.keymap, layouts[i].Layout, layouts[i].Variant, got, wants[i])
		}
	}
	if held := s.m.shell.must(t, "kvmd-input held "+kbd); held != "" {
		t.Errorf("after the prints, keys held at the guest: %s", held)
	}
	t.Logf("hid layouts: %d prints checked in %v", len(layoutPrints), time.Since(start).Round(100*time.Millisecond))
}
