package imagetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Linux input event codes (linux/input-event-codes.h) of the relative
// mouse and the lock lights.
const (
	relX, relY                 = 0, 1
	ledNumL, ledCapsL, ledScrL = 0, 1, 2
)

// hidOutputs is /api/hid's mouse and lights as this test reads them.
type hidOutputs struct {
	Keyboard struct {
		Leds leds `json:"leds"`
	} `json:"keyboard"`
	Mouse struct {
		Online   bool `json:"online"`
		Absolute bool `json:"absolute"`
		Outputs  struct {
			Available []string `json:"available"`
			Active    string   `json:"active"`
		} `json:"outputs"`
	} `json:"mouse"`
}

// leds are /api/hid's keyboard.leds.
type leds struct {
	Caps   bool `json:"caps"`
	Scroll bool `json:"scroll"`
	Num    bool `json:"num"`
}

func (h hidOutputs) String() string {
	return fmt.Sprintf("outputs %v active %q absolute %v online %v", h.Mouse.Outputs.Available, h.Mouse.Outputs.Active, h.Mouse.Absolute, h.Mouse.Online)
}

// relMouseNode waits for the event node of the gadget's relative mouse.
func (s *system) relMouseNode(t *testing.T) string {
	t.Helper()
	var rel string
	if !waitFor(context.Background(), 30*time.Second, 300*time.Millisecond, func() bool {
		for _, l := range strings.Split(s.m.shell.must(t, "kvmd-input find"), "\n") {
			if v, ok := strings.CutPrefix(l, "relmouse "); ok {
				rel = v
			}
		}
		return rel != ""
	}) {
		out, _ := s.m.shell.run(t, "cat /proc/bus/input/devices")
		t.Fatalf("no relative mouse of the gadget:\n%s", out)
	}
	return rel
}

// waitHID polls /api/hid until cond holds (10 s at most).
func (s *system) waitHID(t *testing.T, what string, cond func(hidOutputs) bool) hidOutputs {
	t.Helper()
	var st hidOutputs
	if !waitFor(context.Background(), 10*time.Second, 200*time.Millisecond, func() bool {
		s.getJSON(t, "/api/hid", &st)
		return cond(st)
	}) {
		t.Errorf("%s: /api/hid says %v, leds %+v", what, st, st.Keyboard.Leds)
	}
	return st
}

// moves returns the guest's ABS and REL X/Y events of evs, by device.
func moves(evs []inputEvent) string {
	var out []string
	for _, e := range evs {
		if (e.typ == evAbs && (e.code == absX || e.code == absY)) || (e.typ == evRel && (e.code == relX || e.code == relY)) {
			out = append(out, fmt.Sprintf("%d:%d/%d=%d", e.dev, e.typ, e.code, e.value))
		}
	}
	return strings.Join(out, " ")
}

// testHIDOutputs: the gadget's two mice reach the guest's input layer as
// an absolute and a relative pointer; mouse_output=usb moves the first
// (ABS_X/ABS_Y), usb_rel the second (REL_X/REL_Y, from HTTP and
// /api/ws), each ignoring the other's moves; /api/hid says which. Then
// each lock light the host sets (Num, Caps, Scroll: EV_LED written to the
// keyboard's event node, which usbhid sends the gadget as its output
// report) shows alone in /api/hid.
func (s *system) testHIDOutputs(t *testing.T) {
	sh := s.m.shell
	start := time.Now()
	if _, st := sh.run(t, "command -v kvmd-input"); st != 0 {
		s.buildGuestTool(t)
	}
	kbd, mouse := s.inputNodes(t)
	rel := s.relMouseNode(t)
	w := s.startWatch(t, "outputs", kbd, mouse, rel)
	defer sh.run(t, "kill "+w.pid)
	t.Logf("guest: absolute mouse %s, relative mouse %s", mouse, rel)
	post := func(path string) {
		t.Helper()
		if st, body := s.post(t, path, ""); st != 200 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
	}
	// expect waits for as many moves as want has (and a quiet poll after
	// them, for any extra), at most 10 s.
	expect := func(what, want string) {
		t.Helper()
		n := 0
		got := moves(w.events(t, 10*time.Second, func(evs []inputEvent) bool {
			return len(strings.Fields(moves(evs))) >= len(strings.Fields(want)) && quiet(&n)(evs)
		}))
		if got != want {
			t.Errorf("%s: the guest got %q, want %q", what, got, want)
		}
	}

	st := s.waitHID(t, "at start", func(h hidOutputs) bool { return h.Mouse.Online })
	if got := st.String(); got != `outputs [usb usb_rel] active "usb" absolute true online true` {
		t.Errorf("at start: %s", got)
	}
	// On usb, a relative move is ignored (as kvmd's): only the absolute
	// move arrives, (v + 32768) * 32767 / 65535.
	post("/api/hid/events/send_mouse_relative?delta_x=9&delta_y=9")
	post("/api/hid/events/send_mouse_move?to_x=16384&to_y=-16384")
	expect("usb", "1:3/0=24575 1:3/1=8191")

	post("/api/hid/set_params?mouse_output=usb_rel")
	s.waitHID(t, "usb_rel", func(h hidOutputs) bool {
		return h.Mouse.Outputs.Active == "usb_rel" && !h.Mouse.Absolute && h.Mouse.Online
	})
	post("/api/hid/events/send_mouse_move?to_x=0&to_y=0")
	post("/api/hid/events/send_mouse_relative?delta_x=7&delta_y=-5")
	ws := s.dialWS(t)
	defer ws.close()
	wsWrite(t, ws.c, websocket.MessageText, `{"event_type":"mouse_relative","event":{"delta":[{"x":-20,"y":3}]}}`)
	wsWrite(t, ws.c, websocket.MessageBinary, "\x04\x00\x7f\x81")
	expect("usb_rel", "2:2/0=7 2:2/1=-5 2:2/0=-20 2:2/1=3 2:2/0=127 2:2/1=-127")

	post("/api/hid/set_params?mouse_output=usb")
	s.waitHID(t, "usb again", func(h hidOutputs) bool { return h.Mouse.Outputs.Active == "usb" && h.Mouse.Absolute })
	post("/api/hid/events/send_mouse_relative?delta_x=9&delta_y=9")
	post("/api/hid/events/send_mouse_move?to_x=0&to_y=0")
	expect("usb again", "1:3/0=16383 1:3/1=16383")

	// The host's lock lights, each alone, then all off.
	for _, l := range []struct {
		name string
		code int
		want leds
	}{
		{"Num Lock", ledNumL, leds{Num: true}},
		{"Caps Lock", ledCapsL, leds{Caps: true}},
		{"Scroll Lock", ledScrL, leds{Scroll: true}},
	} {
		sh.must(t, fmt.Sprintf("kvmd-input led %s %d 1", kbd, l.code))
		s.waitHID(t, l.name+" set by the host", func(h hidOutputs) bool { return h.Keyboard.Leds == l.want })
		sh.must(t, fmt.Sprintf("kvmd-input led %s %d 0", kbd, l.code))
		s.waitHID(t, l.name+" cleared by the host", func(h hidOutputs) bool { return h.Keyboard.Leds == leds{} })
	}
	t.Logf("mouse outputs and lock lights: %v", time.Since(start).Round(100*time.Millisecond))
}
