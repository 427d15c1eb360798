package imagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// inputEvent is a line of kvmd-input watch: the device's index (0 the
// keyboard, 1 the mouse), the kernel's time, type, code and value.
type inputEvent struct {
	dev       int
	at        float64
	typ, code int
	value     int
}

// Linux input event codes (linux/input-event-codes.h).
const (
	evKey, evRel, evAbs, evMsc = 1, 2, 3, 4
	keyLeftShift, keyRightAlt  = 42, 100
	keyRightShift              = 54
	btnLeft                    = 0x110
	relHWheel, relWheel        = 6, 8
	absX, absY                 = 0, 1
)

// watcher follows kvmd-input watch's log in the guest.
type watcher struct {
	s    *system
	log  string
	pid  string
	seen int
}

// startWatch holds devs open in the guest and logs their events.
func (s *system) startWatch(t *testing.T, name string, devs ...string) *watcher {
	t.Helper()
	w := &watcher{s: s, log: "/run/kvmd-input-" + name + ".log"}
	// At a real-time priority: under emulation a reader of normal
	// priority falls behind a print (a report a millisecond), and the
	// kernel drops the events it has no room for (SYN_DROPPED).
	w.pid = s.m.shell.must(t, "setsid nohup chrt -f 50 kvmd-input watch "+strings.Join(devs, " ")+" >"+w.log+" 2>&1 & echo $!")
	if !waitFor(context.Background(), 20*time.Second, 100*time.Millisecond, func() bool {
		out, _ := s.m.shell.run(t, "head -1 "+w.log)
		return out == "ready"
	}) {
		out, _ := s.m.shell.run(t, "cat "+w.log)
		t.Fatalf("kvmd-input watch %v did not start: %s", devs, out)
	}
	w.seen = 1
	return w
}

// events returns the events logged since the last call, waiting until
// done holds for them (at most d). Each poll takes the log's line count
// first and reads up to it, so that the next call starts right after what
// this one returned; the scan codes (EV_MSC) are left out in the guest,
// to keep the serial shell's output short.
func (w *watcher) events(t *testing.T, d time.Duration, done func([]inputEvent) bool) []inputEvent {
	t.Helper()
	evs, dropped := w.eventsOrDropped(t, d, done)
	if dropped != "" {
		t.Errorf("kvmd-input watch: the kernel dropped events of device %s (its reader fell behind): the events read are incomplete", dropped)
	}
	return evs
}

// eventsOrDropped is events, saying which device's events the kernel
// dropped (SYN_DROPPED: the reader fell behind), if any, rather than
// failing: what was read is then incomplete through the observer's fault,
// not the daemon's.
func (w *watcher) eventsOrDropped(t *testing.T, d time.Duration, done func([]inputEvent) bool) (evs []inputEvent, dropped string) {
	t.Helper()
	upTo := w.seen
	waitFor(context.Background(), d, 200*time.Millisecond, func() bool {
		out := w.s.m.shell.must(t, fmt.Sprintf(`n=$(wc -l <%s); echo "lines $n"; sed -n "%d,${n}p" %s | grep -v '^[0-9]* [0-9.]* 4 4 ' || true`,
			w.log, w.seen+1, w.log))
		evs, dropped = nil, ""
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 2 && f[0] == "lines" {
				upTo, _ = strconv.Atoi(f[1])
			}
			if len(f) == 2 && f[1] == "dropped" {
				dropped = f[0]
			}
			if len(f) != 5 {
				continue
			}
			var e inputEvent
			e.dev, _ = strconv.Atoi(f[0])
			e.at, _ = strconv.ParseFloat(f[1], 64)
			e.typ, _ = strconv.Atoi(f[2])
			e.code, _ = strconv.Atoi(f[3])
			e.value, _ = strconv.Atoi(f[4])
			evs = append(evs, e)
		}
		return done(evs)
	})
	w.seen = upTo
	return evs, dropped
}

// quiet is a done for events: nothing new for a while.
func quiet(n *int) func([]inputEvent) bool {
	return func(evs []inputEvent) bool {
		stable := len(evs) == *n && len(evs) > 0
		*n = len(evs)
		return stable
	}
}

func keyEvents(evs []inputEvent) []inputEvent {
	var out []inputEvent
	for _, e := range evs {
		if e.typ == evKey && e.value != 2 { // not autorepeat
			out = append(out, e)
		}
	}
	return out
}

// describeTimed is describeEvents with the kernel's times.
func describeTimed(evs []inputEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%.3f %d:%d/%d=%d\n", e.at, e.dev, e.typ, e.code, e.value)
	}
	return b.String()
}

func describeEvents(evs []inputEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%d/%d=%d ", e.dev, e.typ, e.code, e.value)
	}
	return b.String()
}

// layout is what a key types on a host with that keyboard layout, written
// from the layouts' legends: unshifted, shifted and AltGr characters by
// Linux key code.
type layout map[int][3]rune

func rowLayout(rows map[int]string) layout {
	l := layout{}
	for first, row := range rows {
		rs := []rune(row)
		for i := 0; i+1 < len(rs); i += 2 {
			l[first+i/2] = [3]rune{rs[i], rs[i+1], 0}
		}
	}
	return l
}

// usLayout: US QWERTY.
var usLayout = rowLayout(map[int]string{
	2: "1!2@3#4$5%6^7&8*9(0)-_=+", 16: "qQwWeErRtTyYuUiIoOpP[{]}", 30: "aAsSdDfFgGhHjJkKlL;:'\"`~",
	43: "\\|zZxXcCvVbBnNmM,<.>/?", 57: "  ",
})

// deLayout: German QWERTZ, with the AltGr characters used below.
var deLayout = func() layout {
	l := rowLayout(map[int]string{
		2: "1!2\"3§4$5%6&7/8(9)0=", 16: "qQwWeErRtTzZuUiIoOpPüÜ+*", 30: "aAsSdDfFgGhHjJkKlLöÖäÄ^°",
		43: "#'yYxXcCvVbBnNmM,;.:-_", 57: "  ", 86: "<>",
	})
	l[12] = [3]rune{'ß', '?', '\\'}
	for code, c := range map[int]rune{16: '@', 18: '€', 86: '|'} {
		k := l[code]
		k[2] = c
		l[code] = k
	}
	return l
}()

// typed decodes key events as a host with layout l types them.
func typed(evs []inputEvent, l layout) string {
	var b strings.Builder
	held := map[int]bool{}
	for _, e := range keyEvents(evs) {
		held[e.code] = e.value == 1
		if e.value != 1 {
			continue
		}
		switch e.code {
		case keyLeftShift, keyRightShift, keyRightAlt:
			continue
		case 28:
			b.WriteRune('\n')
			continue
		}
		k, ok := l[e.code]
		i := 0
		switch {
		case held[keyRightAlt]:
			i = 2
		case held[keyLeftShift] || held[keyRightShift]:
			i = 1
		}
		if !ok || k[i] == 0 {
			fmt.Fprintf(&b, "<%d>", e.code)
			continue
		}
		b.WriteRune(k[i])
	}
	return b.String()
}

// buildGuestTool builds kvmd-input for the guest into the shared
// directory and installs it there.
func (s *system) buildGuestTool(t *testing.T) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(s.share, "kvmd-input"), "./kvmd-input")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kvmd-input: %v\n%s", err, out)
	}
	s.m.shell.must(t, "mkdir -p /run/kvmd-imagetest && mount -t 9p -o trans=virtio,version=9p2000.L,ro kvmd /run/kvmd-imagetest && "+
		"install -m 0755 /run/kvmd-imagetest/kvmd-input /usr/local/bin/; st=$?; umount /run/kvmd-imagetest; exit $st")
}

// inputNodes waits for the gadget's keyboard and mouse event nodes.
func (s *system) inputNodes(t *testing.T) (kbd, mouse string) {
	t.Helper()
	if !waitFor(context.Background(), 30*time.Second, 300*time.Millisecond, func() bool {
		kbd, mouse = "", ""
		for _, l := range strings.Split(s.m.shell.must(t, "kvmd-input find"), "\n") {
			if v, ok := strings.CutPrefix(l, "keyboard "); ok {
				kbd = v
			}
			if v, ok := strings.CutPrefix(l, "mouse "); ok {
				mouse = v
			}
		}
		return kbd != "" && mouse != ""
	}) {
		out, _ := s.m.shell.run(t, "cat /proc/bus/input/devices")
		t.Fatalf("no keyboard and mouse of the gadget:\n%s", out)
	}
	return kbd, mouse
}

// hidState is /api/hid as the test reads it.
type hidState struct {
	Online   bool `json:"online"`
	Busy     bool `json:"busy"`
	Keyboard struct {
		Online bool `json:"online"`
		Leds   struct {
			Caps, Scroll, Num bool
		} `json:"leds"`
	} `json:"keyboard"`
	Mouse struct {
		Online   bool `json:"online"`
		Absolute bool `json:"absolute"`
	} `json:"mouse"`
}

func (s *system) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	st, b, err := s.c.do("POST", path, s.creds(t), strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return st, string(b)
}

func wsWrite(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatalf("ws write %q: %v", msg, err)
	}
}

// testHID: the keyboard and mouse reach the guest's input layer through
// the gadget and dummy_hcd: print (en-us and de), /api/ws key and mouse
// messages, the host's Caps Lock seen in /api/hid and as a hid event, no
// key held after the gadget is unbound mid-print and bound again; and the
// figures: /api/ws key message to the input layer, print's typing rate.
func (s *system) testHID(t *testing.T, fig *figures) {
	sh := s.m.shell
	start := time.Now()
	s.buildGuestTool(t)
	kbd, mouse := s.inputNodes(t)
	w := s.startWatch(t, "1", kbd, mouse)
	t.Logf("guest: keyboard %s, mouse %s", kbd, mouse)

	// Print: the characters and their case arrive as the key codes of an
	// en-us host, then of a German one.
	for _, tc := range []struct {
		keymap, text string
		l            layout
	}{
		{"en-us", "Hello, World! kvmd_1 {ok}?\n", usLayout},
		{"de", "Grüße aus Köln: yZ@€|ß?", deLayout},
	} {
		st, body := s.post(t, "/api/hid/print?keymap="+tc.keymap, tc.text)
		if st != 200 {
			t.Fatalf("print %s: %d %s", tc.keymap, st, body)
		}
		n := 0
		evs := w.events(t, 20*time.Second, quiet(&n))
		if got := typed(evs, tc.l); got != tc.text {
			t.Errorf("print %q with %s: the guest's keyboard typed %q\n%s", tc.text, tc.keymap, got, describeEvents(keyEvents(evs)))
		}
		if held := sh.must(t, "kvmd-input held "+kbd); held != "" {
			t.Errorf("after print %s, keys held at the guest: %s", tc.keymap, held)
		}
	}

	// /api/ws: key messages (JSON and binary) as EV_KEY, mouse messages as
	// EV_KEY (buttons), EV_ABS (the absolute move) and EV_REL (the wheels).
	ws := s.dialWS(t)
	c := ws.c
	for _, m := range []struct {
		typ websocket.MessageType
		msg string
	}{
		{websocket.MessageText, `{"event_type":"key","event":{"key":"KeyQ","state":true}}`},
		{websocket.MessageText, `{"event_type":"key","event":{"key":"KeyQ","state":false}}`},
		{websocket.MessageBinary, "\x01\x03Enter"},
		{websocket.MessageText, `{"event_type":"mouse_move","event":{"to":{"x":32767,"y":32767}}}`},
		{websocket.MessageText, `{"event_type":"mouse_button","event":{"button":"left","state":true}}`},
		{websocket.MessageBinary, "\x02\x00left"},
		{websocket.MessageText, `{"event_type":"mouse_wheel","event":{"delta":{"x":0,"y":-1}}}`},
		{websocket.MessageBinary, "\x05\x00\x01\x00"},
		{websocket.MessageBinary, "\x03\x00\x00\x00\x00"},
	} {
		wsWrite(t, c, m.typ, m.msg)
	}
	n := 0
	evs := w.events(t, 20*time.Second, quiet(&n))
	got := map[int][]string{}
	for _, e := range evs {
		if e.typ == evMsc || e.typ == evRel && e.code != relWheel && e.code != relHWheel {
			continue // MSC_SCAN (the usage) before each key, and the high-resolution wheel events
		}
		got[e.dev] = append(got[e.dev], fmt.Sprintf("%d/%d=%d", e.typ, e.code, e.value))
	}
	// The absolute position: (v + 32768) * 32767 / 65535, 16383 for 0.
	for dev, want := range []string{
		"1/16=1 1/16=0 1/28=1 1/28=0",
		"3/0=32767 3/1=32767 1/272=1 1/272=0 2/8=-1 2/6=1 3/0=16383 3/1=16383",
	} {
		if g := strings.Join(got[dev], " "); g != want {
			t.Errorf("/api/ws input at the guest's %s:\n got %s\nwant %s", []string{"keyboard", "mouse"}[dev], g, want)
		}
	}

	// The host sets Caps Lock: /api/hid and a hid event say so.
	sh.must(t, "kvmd-input led "+kbd+" 1 1") // LED_CAPSL
	var hs hidState
	if !waitFor(context.Background(), 10*time.Second, 200*time.Millisecond, func() bool {
		s.getJSON(t, "/api/hid", &hs)
		return hs.Keyboard.Leds.Caps
	}) {
		t.Errorf("Caps Lock set by the host, /api/hid says %+v", hs)
	}
	if _, ok := ws.next("hid", 10*time.Second, func(ev json.RawMessage) bool {
		var st hidState
		return json.Unmarshal(ev, &st) == nil && st.Keyboard.Leds.Caps
	}); !ok {
		t.Error("no hid event with Caps Lock on")
	}
	sh.must(t, "kvmd-input led "+kbd+" 1 0")
	if _, ok := ws.next("hid", 10*time.Second, func(ev json.RawMessage) bool {
		var st hidState
		return json.Unmarshal(ev, &st) == nil && !st.Keyboard.Leds.Caps
	}); !ok {
		t.Error("no hid event with Caps Lock off")
	}

	// Typing rate: print's default (no delay) and slow=1, from the guest's
	// own event times, first press to last release.
	rate := func(q string, chars int) float64 {
		text := strings.Repeat("abcdefghijklmnopqrstuvwxyz", chars/26+1)[:chars]
		var evs []inputEvent
		// A print the guest's reader could not keep up with (on a busy
		// host the emulated CPUs run unevenly, and the reader's
		// real-time priority in the guest does not help when its CPU
		// is not scheduled on the host) is printed again, at most
		// twice: the kernel says when it dropped events, so a wrong or
		// missing character with no drop still fails at once.
		for try := 1; ; try++ {
			if st, body := s.post(t, "/api/hid/print?"+q, text); st != 200 {
				t.Fatalf("print %s: %d %s", q, st, body)
			}
			n := 0
			all, dropped := w.eventsOrDropped(t, 60*time.Second, quiet(&n))
			evs = keyEvents(all)
			if dropped == "" {
				break
			}
			if try == 3 {
				t.Errorf("kvmd-input watch: the kernel dropped events of device %s in each of %d prints (its reader fell behind): the events read are incomplete", dropped, try)
				break
			}
			t.Logf("print %s, try %d: the guest's reader fell behind (SYN_DROPPED); printing again", q, try)
		}
		if got := typed(evs, usLayout); got != text {
			t.Errorf("print %s typed %d characters, want %d:\n%q\n%s", q, len([]rune(got)), chars, got, tail(describeTimed(evs), 3000))
		}
		if len(evs) < 2 {
			return 0
		}
		return float64(chars) / (evs[len(evs)-1].at - evs[0].at)
	}
	fig.hidRate = rate("limit=0", 500)
	fig.hidSlowRate = rate("slow=1", 100)
	t.Logf("print: %.0f characters/s by default, %.1f with slow=1", fig.hidRate, fig.hidSlowRate)

	// Latency: /api/ws key message to its EV_KEY at the guest's input layer.
	out := sh.must(t, "kvmd-input wsbench /run/kvmd/kvmd.sock "+kbd+" 1000")
	var us []int
	for _, l := range strings.Split(out, "\n") {
		if v, err := strconv.Atoi(l); err == nil {
			us = append(us, v)
		}
	}
	if len(us) != 1000 {
		t.Fatalf("wsbench gave %d times:\n%s", len(us), tail(out, 500))
	}
	slices.Sort(us)
	fig.hidLatencyMedian, fig.hidLatencyP99 = us[len(us)/2], us[len(us)*99/100]
	t.Logf("/api/ws key message to EV_KEY: median %d µs, p99 %d µs", fig.hidLatencyMedian, fig.hidLatencyP99)
	w.events(t, 3*time.Second, func([]inputEvent) bool { return false }) // skip the bench's events

	// Unplugged mid-print, with Shift held by the print and the right
	// Shift by a WebSocket client: nothing is held once bound again.
	wsWrite(t, c, websocket.MessageText, `{"event_type":"key","event":{"key":"ShiftRight","state":true}}`)
	printed := make(chan [2]string, 1)
	go func() {
		st, body, err := s.c.do("POST", "/api/hid/print?delay=0.01", s.creds(t), strings.NewReader(strings.Repeat("ABCDEFGHIJ", 30)))
		printed <- [2]string{fmt.Sprint(st, err), string(body)}
	}()
	w.events(t, 30*time.Second, func(evs []inputEvent) bool { return len(keyEvents(evs)) >= 20 })
	sh.must(t, "echo '' > "+gadgetDir+"/UDC")
	select {
	case p := <-printed:
		if !strings.HasPrefix(p[0], "409") || !strings.Contains(p[1], "HidInterruptedError") {
			t.Errorf("print when unplugged: %s %s", p[0], p[1])
		}
	case <-time.After(30 * time.Second):
		t.Error("print went on after the gadget was unbound")
	}
	if !waitFor(context.Background(), 10*time.Second, 300*time.Millisecond, func() bool {
		s.getJSON(t, "/api/hid", &hs)
		return !hs.Keyboard.Online
	}) {
		t.Errorf("unbound, /api/hid says %+v", hs)
	}
	if !waitFor(context.Background(), 20*time.Second, 300*time.Millisecond, func() bool {
		return sh.must(t, "kvmd-input find") == ""
	}) {
		t.Error("the guest still has the gadget's keyboard or mouse after the unbind")
	}
	sh.must(t, "echo "+testUDC+" > "+gadgetDir+"/UDC")
	kbd2, mouse2 := s.inputNodes(t)
	w2 := s.startWatch(t, "2", kbd2, mouse2)
	// The daemon writes again once the host took its first report since.
	if !waitFor(context.Background(), 20*time.Second, 300*time.Millisecond, func() bool {
		s.getJSON(t, "/api/hid", &hs)
		return hs.Keyboard.Online && hs.Mouse.Online
	}) {
		t.Errorf("bound again, /api/hid says %+v", hs)
	}
	if st, body := s.post(t, "/api/hid/events/send_key?key=KeyX", ""); st != 200 {
		t.Fatalf("send_key after re-binding: %d %s", st, body)
	}
	n = 0
	evs = keyEvents(w2.events(t, 20*time.Second, quiet(&n)))
	if d := describeEvents(evs); d != "0:1/45=1 0:1/45=0 " {
		t.Errorf("after re-binding, a key typed %s, want KEY_X alone, nothing held", d)
	}
	if held := sh.must(t, "kvmd-input held "+kbd2); held != "" {
		t.Errorf("after re-binding, keys held at the guest: %s", held)
	}
	sh.run(t, "kill "+w.pid+" "+w2.pid) // the first has ended with its devices
	fig.hidTest = time.Since(start)
	t.Logf("hid checks: %v", fig.hidTest.Round(100*time.Millisecond))
}
