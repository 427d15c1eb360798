package hid

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// KeyboardReportLen is the length of a boot keyboard's input report:
// modifiers, a reserved byte and six key slots (USB HID 1.11, appendix B).
const KeyboardReportLen = 8

// keyboard is what the host has been told is held: the modifier bits and
// six slots of usages (0: free). Its methods return the reports that tell
// the host of a change, in kvmd's order (kvmd/plugins/hid/otg/keyboard.py,
// github.com/pikvm/kvmd at f14596e8): a key pressed again is first
// released; a seventh key releases the six held (six-key rollover).
type keyboard struct {
	mods  byte
	slots [6]byte
}

func (s *keyboard) report() []byte {
	r := make([]byte, KeyboardReportLen)
	r[0] = s.mods
	copy(r[2:], s.slots[:])
	return r
}

// key applies a press or release of k.
func (s *keyboard) key(k Key, press bool) [][]byte {
	var out [][]byte
	if k.Modifier() {
		if s.mods&k.modBit() != 0 {
			s.mods &^= k.modBit()
			out = append(out, s.report())
		}
		if press {
			s.mods |= k.modBit()
			out = append(out, s.report())
		}
		return out
	}
	if i := s.slot(k.Usage); i >= 0 {
		s.slots[i] = 0
		out = append(out, s.report())
	} else if press && s.slot(0) < 0 {
		s.slots = [6]byte{}
		out = append(out, s.report())
	}
	if press {
		s.slots[s.slot(0)] = k.Usage
		out = append(out, s.report())
	}
	return out
}

// slot returns the index of the first slot holding usage u, -1 if none.
func (s *keyboard) slot(u byte) int {
	for i, v := range s.slots {
		if v == u {
			return i
		}
	}
	return -1
}

// clear releases everything.
func (s *keyboard) clear() []byte {
	*s = keyboard{}
	return s.report()
}

// held reports whether anything is held.
func (s *keyboard) held() bool { return *s != keyboard{} }

// Button is a mouse button, by kvmd's name.
type Button struct {
	Name string
	// bit is its bit in the report's buttons byte (button 1 is bit 0).
	bit byte
	// Evdev is the code kvmd's binary WebSocket frames carry for it.
	Evdev uint16
}

// buttons are kvmd's mouse buttons (kvmd/mouse.py and
// plugins/hid/otg/events.py): up and down are the side buttons 4 and 5
// (BTN_BACK, BTN_FORWARD), which a Linux host reports as BTN_SIDE and
// BTN_EXTRA.
var buttons = []Button{
	{"left", 0x01, 0x110},
	{"right", 0x02, 0x111},
	{"middle", 0x04, 0x112},
	{"up", 0x08, 0x116},
	{"down", 0x10, 0x115},
}

// ButtonByName returns a button by its name, in any case.
func ButtonByName(name string) (Button, bool) {
	name = strings.ToLower(name)
	for _, b := range buttons {
		if b.Name == name {
			return b, true
		}
	}
	return Button{}, false
}

// ButtonByEvdev returns a button by its Linux input event code.
func ButtonByEvdev(code uint16) (Button, bool) {
	for _, b := range buttons {
		if b.Evdev == code {
			return b, true
		}
	}
	return Button{}, false
}

// MouseFormat is the layout of a mouse function's input report, as its
// report descriptor declares it (kvmd/apps/otg/hid/mouse.py): buttons,
// then X and Y (absolute: two little-endian uint16 in 0..32767; relative:
// two int8), then the wheel (int8), then the horizontal wheel (AC Pan,
// int8) when HorizontalWheel is set.
type MouseFormat struct {
	Absolute        bool
	HorizontalWheel bool
}

// Len is the report's length in bytes.
func (f MouseFormat) Len() int {
	n := 4
	if f.Absolute {
		n = 6
	}
	if f.HorizontalWheel {
		n++
	}
	return n
}

// MouseFormatFor returns the format of a mouse function from its
// configfs protocol (0: none, as PiKVM's absolute mouse; 2: boot mouse,
// relative) and report_length.
func MouseFormatFor(protocol, reportLen int) (MouseFormat, error) {
	for _, f := range []MouseFormat{{true, false}, {true, true}, {false, false}, {false, true}} {
		if f.Len() == reportLen && (protocol == 2) != f.Absolute {
			return f, nil
		}
	}
	return MouseFormat{}, fmt.Errorf("hid: mouse protocol %d with %d-byte reports is not a layout kvmd's gadget makes", protocol, reportLen)
}

// The range of an absolute position kvmd's clients send, and of the
// report (kvmd/mouse.py MouseRange; the descriptor's logical range).
const (
	MoveMin   = -32768
	MoveMax   = 32767
	reportMax = 32767
)

// DeltaMin and DeltaMax bound a relative move or a wheel step.
const (
	DeltaMin = -127
	DeltaMax = 127
)

// mouse is what the host has been told of the mouse: the buttons held and,
// for an absolute mouse, where it is.
type mouse struct {
	format  MouseFormat
	buttons byte
	x, y    uint16
}

// toReport maps a position in MoveMin..MoveMax to 0..32767, rounding
// down as kvmd's tools.remap does.
func toReport(v int) uint16 {
	v = min(max(v, MoveMin), MoveMax)
	return uint16((v - MoveMin) * reportMax / (MoveMax - MoveMin))
}

func (m *mouse) report(dx, dy, wheelX, wheelY int8) []byte {
	r := make([]byte, m.format.Len())
	r[0] = m.buttons
	i := 1
	if m.format.Absolute {
		binary.LittleEndian.PutUint16(r[1:], m.x)
		binary.LittleEndian.PutUint16(r[3:], m.y)
		i = 5
	} else {
		r[1], r[2] = byte(dx), byte(dy)
		i = 3
	}
	r[i] = byte(wheelY)
	if m.format.HorizontalWheel {
		r[i+1] = byte(wheelX)
	}
	return r
}

func (m *mouse) button(b Button, press bool) [][]byte {
	var out [][]byte
	if m.buttons&b.bit != 0 {
		m.buttons &^= b.bit
		out = append(out, m.report(0, 0, 0, 0))
	}
	if press {
		m.buttons |= b.bit
		out = append(out, m.report(0, 0, 0, 0))
	}
	return out
}

// move sets the absolute position; a relative mouse ignores it, as kvmd's.
func (m *mouse) move(x, y int) [][]byte {
	if !m.format.Absolute {
		return nil
	}
	m.x, m.y = toReport(x), toReport(y)
	return [][]byte{m.report(0, 0, 0, 0)}
}

// relative moves a relative mouse; an absolute one ignores it, as kvmd's.
func (m *mouse) relative(dx, dy int8) [][]byte {
	if m.format.Absolute {
		return nil
	}
	return [][]byte{m.report(dx, dy, 0, 0)}
}

func (m *mouse) wheel(dx, dy int8) [][]byte {
	return [][]byte{m.report(0, 0, dx, dy)}
}

// clear releases the buttons; an absolute mouse stays where it is.
func (m *mouse) clear() []byte {
	m.buttons = 0
	return m.report(0, 0, 0, 0)
}

func (m *mouse) held() bool { return m.buttons != 0 }
