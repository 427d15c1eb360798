package hid

import (
	"bytes"
	"fmt"
	"testing"
)

func key(t *testing.T, name string) Key {
	t.Helper()
	k, ok := KeyByName(name)
	if !ok {
		t.Fatalf("no key %q", name)
	}
	return k
}

func hexReports(rs [][]byte) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%x", r)
	}
	return b.String()
}

// TestKeyboardReports follows kvmd's keyboard process
// (kvmd/plugins/hid/otg/keyboard.py): modifiers are bits, keys take the
// first free of six slots, a key pressed again is released first, a
// seventh key releases the six.
func TestKeyboardReports(t *testing.T) {
	type step struct {
		key   string
		press bool
		want  string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"press and release", []step{
			{"KeyA", true, "0000040000000000"},
			{"KeyA", false, "0000000000000000"},
		}},
		{"release of a key not held says nothing", []step{{"KeyA", false, ""}}},
		{"modifiers are bits", []step{
			{"ShiftLeft", true, "0200000000000000"},
			{"AltRight", true, "4200000000000000"},
			{"KeyQ", true, "4200140000000000"},
			{"ShiftLeft", false, "4000140000000000"},
			{"MetaRight", true, "c000140000000000"},
		}},
		{"a held key pressed again is released first", []step{
			{"KeyA", true, "0000040000000000"},
			{"KeyA", true, "0000000000000000 0000040000000000"},
			{"ShiftRight", true, "2000040000000000"},
			{"ShiftRight", true, "0000040000000000 2000040000000000"},
		}},
		{"a freed slot is reused first", []step{
			{"KeyA", true, "0000040000000000"},
			{"KeyB", true, "0000040500000000"},
			{"KeyA", false, "0000000500000000"},
			{"KeyC", true, "0000060500000000"},
		}},
		{"the seventh key releases the six", []step{
			{"Digit1", true, "00001e0000000000"},
			{"Digit2", true, "00001e1f00000000"},
			{"Digit3", true, "00001e1f20000000"},
			{"Digit4", true, "00001e1f20210000"},
			{"Digit5", true, "00001e1f20212200"},
			{"Digit6", true, "00001e1f20212223"},
			{"Digit7", true, "0000000000000000 0000240000000000"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s keyboard
			for i, st := range tc.steps {
				if got := hexReports(s.key(key(t, st.key), st.press)); got != st.want {
					t.Errorf("step %d %s %v: %q, want %q", i, st.key, st.press, got, st.want)
				}
			}
		})
	}
}

func TestMouseReports(t *testing.T) {
	left, _ := ButtonByName("LEFT")
	up, _ := ButtonByName("up")
	abs7 := mouse{format: MouseFormat{Absolute: true, HorizontalWheel: true}}
	abs6 := mouse{format: MouseFormat{Absolute: true}}
	rel5 := mouse{format: MouseFormat{HorizontalWheel: true}}
	for _, tc := range []struct {
		name string
		m    *mouse
		do   func(m *mouse) [][]byte
		want string
	}{
		{"corner", &abs7, func(m *mouse) [][]byte { return m.move(MoveMin, MoveMin) }, "00000000000000"},
		{"far corner", &abs7, func(m *mouse) [][]byte { return m.move(MoveMax, MoveMax) }, "00ff7fff7f0000"},
		// (0 + 32768) * 32767 / 65535 = 16383.75, rounded down: 0x3fff.
		{"middle", &abs6, func(m *mouse) [][]byte { return m.move(0, 0) }, "00ff3fff3f00"},
		{"button held over a move", &abs6, func(m *mouse) [][]byte {
			m.move(0, 0)
			return append(m.button(left, true), m.move(MoveMin, 0)...)
		}, "01ff3fff3f00 010000ff3f00"},
		{"wheel: y before x", &abs7, func(m *mouse) [][]byte { return m.wheel(-1, 5) }, "000000000005ff"},
		{"side button is bit 3", &abs6, func(m *mouse) [][]byte { return m.button(up, true) }, "080000000000"},
		{"relative ignores moves", &rel5, func(m *mouse) [][]byte { return m.move(100, 100) }, ""},
		{"relative move", &rel5, func(m *mouse) [][]byte { return m.relative(-1, 127) }, "00ff7f0000"},
		{"absolute ignores relative moves", &abs7, func(m *mouse) [][]byte { return m.relative(1, 1) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *tc.m
			if got := hexReports(tc.do(&m)); got != tc.want {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestMouseFormatFor(t *testing.T) {
	for _, tc := range []struct {
		proto, n int
		want     MouseFormat
		ok       bool
	}{
		{0, 6, MouseFormat{Absolute: true}, true},
		{0, 7, MouseFormat{Absolute: true, HorizontalWheel: true}, true},
		{2, 4, MouseFormat{}, true},
		{2, 5, MouseFormat{HorizontalWheel: true}, true},
		{0, 8, MouseFormat{}, false},
		{2, 6, MouseFormat{}, false},
	} {
		got, err := MouseFormatFor(tc.proto, tc.n)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("MouseFormatFor(%d, %d) = %+v, %v", tc.proto, tc.n, got, err)
		}
	}
}

func TestSquash(t *testing.T) {
	in := []Delta{{100, 0}, {20, 1}, {10, 0}, {-5, -5}}
	if got := fmt.Sprint(squashDeltas(in, true)); got != "[{120 1} {5 -5}]" {
		t.Errorf("squashed: %s", got)
	}
	if got := squashDeltas(in, false); len(got) != 4 {
		t.Errorf("not squashed: %v", got)
	}
}

func TestKeyTable(t *testing.T) {
	seen := map[byte]string{}
	for _, k := range Keys() {
		if other, dup := seen[k.Usage]; dup {
			t.Errorf("usage %#x: %s and %s", k.Usage, other, k.Name)
		}
		seen[k.Usage] = k.Name
		if got, _ := KeyByEvdev(k.Evdev); got != k {
			t.Errorf("KeyByEvdev(%d) = %v, want %v", k.Evdev, got, k)
		}
	}
	if len(seen) != 126 {
		t.Errorf("%d keys, want kvmd's 126", len(seen))
	}
	if k := key(t, "ShiftLeft"); !k.Modifier() || k.modBit() != 2 {
		t.Errorf("ShiftLeft: %+v", k)
	}
	if _, ok := KeyByName("keya"); ok {
		t.Error("key names are case-sensitive in kvmd")
	}
}
