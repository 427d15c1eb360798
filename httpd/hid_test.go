package httpd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/atx"
	"kvmd/gadget"
	"kvmd/hid"
	"kvmd/hid/hidtest"
	"kvmd/hw"
	"kvmd/subsystem"
)

// hidEnv is a server whose devices have the real keyboard and mouse
// (package hid) on a stand-in host (hidtest).
type hidEnv struct {
	*env
	host *hidtest.Host
	hid  *hid.HID
}

func newHIDEnv(t *testing.T) *hidEnv {
	t.Helper()
	h, host := testHID(t)
	d, b := testDevices(t)
	d.HID = h
	d.Subsystems = testSubsystems(atx.Subsystem{C: b.ctl}, nil, subsystem.Of[hid.KeymapsState](hid.KeymapsSubsystem{K: h.Keymaps()}))
	e := newEnv(t, envOpts{devices: d})
	return &hidEnv{env: e, host: host, hid: h}
}

// testHID is the real keyboard and mouse on a stand-in host, running
// until the test ends.
func testHID(t *testing.T) (*hid.HID, *hidtest.Host) {
	t.Helper()
	root := t.TempDir()
	if err := hidtest.Gadget(root, 7); err != nil {
		t.Fatal(err)
	}
	return runHID(t, root)
}

// runHID runs the real keyboard and mouse of the gadget under root on a
// stand-in host until the test ends.
func runHID(t *testing.T, root string) (*hid.HID, *hidtest.Host) {
	t.Helper()
	host := hidtest.NewHost()
	t.Cleanup(host.Close)
	h := hid.New(hid.Config{FS: hw.New(root), Open: host.Open})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, host
}

// newHIDEnvMouseAlt is newHIDEnv with kvmd otg's second, relative mouse.
func newHIDEnvMouseAlt(t *testing.T) *hidEnv {
	t.Helper()
	root := t.TempDir()
	if err := hidtest.Gadget(root, 7); err != nil {
		t.Fatal(err)
	}
	if err := hidtest.GadgetMouseAlt(root, 5); err != nil {
		t.Fatal(err)
	}
	h, host := runHID(t, root)
	d, _ := testDevices(t)
	d.HID = h
	return &hidEnv{env: newEnv(t, envOpts{devices: d}), host: host, hid: h}
}

// keys returns what the host's keyboard got, as hidtest.Keys describes
// each report, until it is quiet for 200 ms.
func (e *hidEnv) keys() string {
	var out []string
	for _, r := range e.host.ReadAll(gadget.Keyboard, 200*time.Millisecond) {
		out = append(out, "["+hidtest.Keys(r)+"]")
	}
	return strings.Join(out, " ")
}

func (e *hidEnv) mouse() string { return e.reports(gadget.Mouse) }

// reports returns the reports function got, in hex, until it is quiet
// for 200 ms.
func (e *hidEnv) reports(function string) string {
	var out []string
	for _, r := range e.host.ReadAll(function, 200*time.Millisecond) {
		out = append(out, fmt.Sprintf("%x", r))
	}
	return strings.Join(out, " ")
}

var operatorAuth = map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator-pass"}
var viewerAuth = map[string]string{"X-KVMD-User": "viewer", "X-KVMD-Passwd": "viewer pass"}

func TestHIDEvents(t *testing.T) {
	e := newHIDEnv(t)
	const none = `{"ok":true,"result":{}}`
	for _, tc := range []struct {
		path, body string
		keys       string
		answer     string
	}{
		{"/api/hid/events/send_key?key=KeyA", "", "[KeyA] []", none},
		{"/api/hid/events/send_key?key=ShiftLeft&state=1", "", "[ShiftLeft]", none},
		{"/api/hid/events/send_key?key=Digit1&state=true&finish=yes", "", "[ShiftLeft+Digit1] [ShiftLeft]", none},
		{"/api/hid/events/send_key?key=ShiftLeft&state=0", "", "[]", none},
		{"/api/hid/events/send_shortcut?keys=ControlLeft,AltLeft,Delete", "", "[ControlLeft] [ControlLeft+AltLeft] [ControlLeft+AltLeft+Delete] [ControlLeft+AltLeft] [ControlLeft] []", none},
		{"/api/hid/events/send_shortcut?keys=", "", "", none},
		{"/api/hid/print", "Hi", "[ShiftLeft] [ShiftLeft+KeyH] [ShiftLeft] [] [KeyI] []", `{"ok":true,"result":{"skipped":{"count":0,"chars":[]}}}`},
		{"/api/hid/print?keymap=de&limit=2", "zYx", "[KeyY] [] [ShiftLeft] [ShiftLeft+KeyZ] [ShiftLeft] []", `{"ok":true,"result":{"skipped":{"count":0,"chars":[]}}}`},
		// What the layout cannot type is skipped and said: Russian has no
		// Latin letters, en-us no é (nor another character in its place).
		{"/api/hid/print?keymap=ru", "аbжb€", "[KeyF] [] [Semicolon] []", `{"ok":true,"result":{"skipped":{"count":3,"chars":["b","€"]}}}`},
		{"/api/hid/print", "é", "", `{"ok":true,"result":{"skipped":{"count":1,"chars":["é"]}}}`},
	} {
		if r := e.req("POST", tc.path, operatorAuth, tc.body); r.status != 200 || string(r.body) != tc.answer {
			t.Fatalf("%s: %d %s, want %s", tc.path, r.status, r.body, tc.answer)
		}
		if got := e.keys(); got != tc.keys {
			t.Errorf("%s: the host got %s, want %s", tc.path, got, tc.keys)
		}
	}
	for _, tc := range []struct {
		path  string
		mouse string
	}{
		{"/api/hid/events/send_mouse_move?to_x=32767&to_y=-32768", "00ff7f00000000"},
		{"/api/hid/events/send_mouse_move?to_x=0x10&to_y=99999", "000740ff7f0000"}, // (16+32768)*32767/65535 = 16391
		{"/api/hid/events/send_mouse_button?button=right", "020740ff7f0000 000740ff7f0000"},
		{"/api/hid/events/send_mouse_button?button=Left&state=1", "010740ff7f0000"},
		{"/api/hid/events/send_mouse_wheel?delta_x=-1&delta_y=200", "010740ff7f7fff"},
		{"/api/hid/events/send_mouse_relative?delta_x=1&delta_y=1", ""}, // an absolute mouse: ignored, as in kvmd
	} {
		if r := e.req("POST", tc.path, operatorAuth, ""); r.status != 200 {
			t.Fatalf("%s: %d %s", tc.path, r.status, r.body)
		}
		if got := e.mouse(); got != tc.mouse {
			t.Errorf("%s: the host got %s, want %s", tc.path, got, tc.mouse)
		}
	}
	if r := e.req("POST", "/api/hid/reset", operatorAuth, ""); r.status != 200 {
		t.Fatalf("reset: %d", r.status)
	}
	if got := e.mouse(); got != "000740ff7f0000" {
		t.Errorf("reset: the mouse got %s, want the button released", got)
	}
}

func TestHIDBadRequests(t *testing.T) {
	e := newHIDEnv(t)
	for _, tc := range []struct {
		method, path, body, name string
		status                   int
	}{
		{"POST", "/api/hid/events/send_key", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_key?key=keya", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_key?key=KeyA&state=2", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_shortcut", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_shortcut?keys=ControlLeft,Nope", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_mouse_button?button=back", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_mouse_move?to_x=1", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_mouse_move?to_x=1.5&to_y=0", "", "ValidatorError", 400},
		{"POST", "/api/hid/events/send_mouse_wheel?delta_x=0", "", "ValidatorError", 400},
		{"POST", "/api/hid/print?keymap=xx", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print?keymap=../en-us", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print?limit=-1", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print?delay=5.5", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print?delay=nan", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print?slow=maybe", "a", "ValidatorError", 400},
		{"POST", "/api/hid/print", "\xff\xfe", "BadRequestError", 400},
		{"POST", "/api/hid/set_params?mouse_output=ps3", "", "ValidatorError", 400},
		{"POST", "/api/hid/set_params?jiggler=x", "", "ValidatorError", 400},
		{"POST", "/api/hid/set_connected", "", "ValidatorError", 400},
		{"GET", "/api/hid/events/send_key?key=KeyA", "", "MethodNotAllowedError", 405},
	} {
		r := e.req(tc.method, tc.path, operatorAuth, tc.body)
		if r.status != tc.status || r.errName != tc.name {
			t.Errorf("%s %s: %d %s %s, want %d %s", tc.method, tc.path, r.status, r.errName, r.errMsg, tc.status, tc.name)
		}
	}
	if got := e.keys(); got != "" {
		t.Errorf("bad requests reached the host: %s", got)
	}
	// A text larger than the usual body limit is taken by print.
	big := strings.Repeat("a", 5000)
	if r := e.req("POST", "/api/hid/print?limit=3", operatorAuth, big); r.status != 200 {
		t.Errorf("a 5000-byte text: %d %s", r.status, r.body)
	}
	if got := e.keys(); got != "[KeyA] [] [KeyA] [] [KeyA] []" {
		t.Errorf("limit=3 typed %s", got)
	}
	if r := e.req("POST", "/api/hid/events/send_key?key=KeyA", operatorAuth, big); r.errName != "RequestTooLargeError" {
		t.Errorf("a 5000-byte body elsewhere: %d %s", r.status, r.errName)
	}
}

func TestHIDState(t *testing.T) {
	e := newHIDEnv(t)
	r := e.req("GET", "/api/hid/keymaps", viewerAuth, "")
	var km struct {
		Result struct {
			Keymaps struct {
				Default   string   `json:"default"`
				Available []string `json:"available"`
			} `json:"keymaps"`
		} `json:"result"`
	}
	if json.Unmarshal(r.body, &km); r.status != 200 || km.Result.Keymaps.Default != "en-us" ||
		!strings.Contains(strings.Join(km.Result.Keymaps.Available, ","), "de,de-ch") {
		t.Errorf("keymaps: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/hid/inactivity", viewerAuth, ""); r.status != 200 || !strings.Contains(string(r.body), `"inactivity":`) {
		t.Errorf("inactivity: %d %s", r.status, r.body)
	}
	if r := e.req("POST", "/api/hid/set_params?jiggler=1&keyboard_output=usb&mouse_output=usb", operatorAuth, ""); r.status != 200 {
		t.Errorf("set_params: %d %s", r.status, r.body)
	}
	if !e.hid.State().Jiggler.Active {
		t.Error("the jiggler is not on")
	}
	if r := e.req("POST", "/api/hid/set_connected?connected=0", operatorAuth, ""); r.status != 200 {
		t.Errorf("set_connected: %d %s", r.status, r.body)
	}
}

// TestHIDViewer: a viewer sees the state, and every input of theirs is
// refused (HTTP) or dropped and counted (WebSocket); nothing reaches the
// host.
func TestHIDViewer(t *testing.T) {
	e := newHIDEnv(t)
	for _, p := range []string{"/api/hid/events/send_key?key=KeyA", "/api/hid/print", "/api/hid/events/send_shortcut?keys=KeyA",
		"/api/hid/events/send_mouse_button?button=left", "/api/hid/events/send_mouse_move?to_x=0&to_y=0", "/api/hid/reset",
		"/api/hid/set_params?jiggler=1"} {
		if r := e.req("POST", p, viewerAuth, "x"); r.status != 403 || r.errName != "ForbiddenError" {
			t.Errorf("viewer %s: %d %s", p, r.status, r.errName)
		}
	}
	if r := e.req("GET", "/api/hid/keymaps", viewerAuth, ""); r.status != 200 {
		t.Errorf("viewer keymaps: %d", r.status)
	}
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-Kvmd-User": {"viewer"}, "X-Kvmd-Passwd": {"viewer pass"}})
	wsSend(t, c, websocket.MessageText, `{"event_type":"key","event":{"key":"KeyA","state":true}}`)
	wsSend(t, c, websocket.MessageBinary, "\x01\x01KeyB")
	wsPing(t, c)
	if got := e.keys() + e.mouse(); got != "" {
		t.Errorf("a viewer's input reached the host: %s", got)
	}
	if n := e.hid.Counts().Dropped["forbidden"]; n != 2 {
		t.Errorf("forbidden drops counted %d, want 2", n)
	}
}

func wsSend(t *testing.T, c *websocket.Conn, typ websocket.MessageType, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, typ, []byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

// wsPing sends kvmd's binary ping and reads messages up to its pong: the
// messages before it were handled, and the socket is open.
func wsPing(t *testing.T, c *websocket.Conn) {
	t.Helper()
	wsSend(t, c, websocket.MessageBinary, "\x00")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("no pong: %v", err)
		}
		if typ == websocket.MessageBinary && string(b) == "\xff" {
			return
		}
	}
}

// TestWSInput: kvmd's JSON and binary input messages reach the host; a
// malformed one is dropped and counted, and the socket stays open.
func TestWSInput(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-Kvmd-User": {"operator"}, "X-Kvmd-Passwd": {"operator-pass"}})
	for _, m := range []struct {
		typ websocket.MessageType
		msg string
	}{
		{websocket.MessageText, `{"event_type":"key","event":{"key":"KeyA","state":true}}`},
		{websocket.MessageText, `{"event_type":"key","event":{"key":"KeyA","state":false}}`},
		{websocket.MessageBinary, "\x01\x03Enter"},                 // press and finish
		{websocket.MessageBinary, "\x01\x81\x00\x2a"},              // KEY_LEFTSHIFT by code
		{websocket.MessageText, `{"event_type":"key","event":{}}`}, // malformed
		{websocket.MessageText, `not json`},                        // malformed
		{websocket.MessageBinary, "\x01\x80\x00"},                  // malformed
		{websocket.MessageText, `{"event_type":"mouse_move","event":{"to":{"x":0,"y":0}}}`},
		{websocket.MessageBinary, "\x02\x01left"},
		{websocket.MessageText, `{"event_type":"mouse_wheel","event":{"delta":-1}}`}, // pikvm-lib's
		{websocket.MessageBinary, "\x05\x00\x00\x02"},
	} {
		wsSend(t, c, m.typ, m.msg)
	}
	wsPing(t, c)
	if got, want := e.keys(), "[KeyA] [] [Enter] [] [ShiftLeft]"; got != want {
		t.Errorf("keyboard: %s, want %s", got, want)
	}
	if got, want := e.mouse(), "00ff3fff3f0000 01ff3fff3f0000 01ff3fff3fff00 01ff3fff3f0200"; got != want {
		t.Errorf("mouse: %s, want %s", got, want)
	}
	if n := e.hid.Counts().Dropped["malformed"]; n != 3 {
		t.Errorf("malformed drops counted %d, want 3", n)
	}
	// The client leaves holding Shift and the left button: both released.
	c.Close(websocket.StatusNormalClosure, "")
	if got := e.keys(); got != "[]" {
		t.Errorf("after the client left, the keyboard got %s, want everything released", got)
	}
	if got := e.mouse(); got != "00ff3fff3f0000" {
		t.Errorf("after the client left, the mouse got %s, want the button released", got)
	}
}

func TestWSHIDKeymapsEvent(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", adminHeader)
	var got []string
	for range 8 {
		ev := readEvent(t, c)
		got = append(got, ev.Type)
		if ev.Type == "hid_keymaps" && !strings.Contains(string(ev.Event), `"default":"en-us"`) {
			t.Errorf("hid_keymaps %s", ev.Event)
		}
	}
	if want := "loop gpio hid atx msd streamer hid_keymaps clients"; strings.Join(got, " ") != want {
		t.Errorf("initial events %q, want %q", strings.Join(got, " "), want)
	}
}

// TestPrintStopsWithTheSession: a slow print ends when its session does
// (the user logs out), and every key is released; a print whose client
// leaves goes on.
func TestPrintStopsWithTheSession(t *testing.T) {
	e := newHIDEnv(t)
	cookie := map[string]string{"Cookie": "auth_token=" + e.login("operator", "operator-pass")}
	done := make(chan reply, 1)
	go func() { done <- e.req("POST", "/api/hid/print?delay=0.02", cookie, strings.Repeat("A", 200)) }()
	for !e.hid.State().Busy {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if r := e.req("POST", "/api/auth/logout", cookie, ""); r.status != 200 {
		t.Fatalf("logout: %d", r.status)
	}
	select {
	case r := <-done:
		if r.status != 409 || r.errName != "HidInterruptedError" {
			t.Errorf("print after logout: %d %s", r.status, r.errName)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("print went on after the session ended")
	}
	reports := e.host.ReadAll(gadget.Keyboard, 200*time.Millisecond)
	if len(reports) == 0 || len(reports) > 30 {
		t.Fatalf("%d reports: the print did not start, or did not stop", len(reports))
	}
	if last := hidtest.Keys(reports[len(reports)-1]); last != "" {
		t.Errorf("last report holds %s", last)
	}
}

// TestHIDLatency times 1000 /api/ws key messages (a real WebSocket over
// loopback TCP, operator credentials) each until its report can be read
// at the far end of the keyboard's node (the hidtest socketpair standing
// in for /dev/hidg0): parsing, the queue and the writer's write. It logs
// the median and the 99th percentile (BENCHMARKS.md); it fails only on
// times no machine should take.
func TestHIDLatency(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-KVMD-User": {"operator"}, "X-KVMD-Passwd": {"operator-pass"}})
	go func() { // the events the server sends are not wanted
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	const n = 1000
	times := make([]time.Duration, 0, n)
	for i := range n {
		msg := fmt.Sprintf(`{"event_type":"key","event":{"key":"KeyA","state":%v}}`, i%2 == 0)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Write(ctx, websocket.MessageText, []byte(msg))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.host.Read(gadget.Keyboard, 5*time.Second)
		if err != nil {
			t.Fatalf("message %d: no report: %v", i, err)
		}
		times = append(times, time.Since(start))
		if want := map[bool]string{true: "KeyA", false: ""}[i%2 == 0]; hidtest.Keys(r) != want {
			t.Fatalf("message %d: report %x", i, r)
		}
	}
	slices.Sort(times)
	med, p99 := times[n/2], times[n*99/100]
	t.Logf("/api/ws key message to the report at the node: median %v, p99 %v (of %d)", med, p99, n)
	if p99 > time.Second {
		t.Errorf("p99 %v", p99)
	}
}

// TestHIDMouseOutput: set_params' mouse_output sends the pointer's input
// to the gadget's absolute mouse (usb) or its relative one (usb_rel), as
// kvmd's OTG HID with a mouse_alt does: HTTP and WebSocket relative moves
// reach the relative mouse only when it is chosen; the outputs kvmd knows
// but the gadget has not change nothing.
func TestHIDMouseOutput(t *testing.T) {
	e := newHIDEnvMouseAlt(t)
	state := func() string {
		s := e.hid.State()
		return fmt.Sprintf("%v %s", s.Mouse.Outputs, s.Mouse.Output)
	}
	if got := state(); got != "[usb usb_rel] usb" {
		t.Errorf("at start: %s", got)
	}
	post := func(path string) {
		t.Helper()
		if r := e.req("POST", path, operatorAuth, ""); r.status != 200 || string(r.body) != `{"ok":true,"result":{}}` {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	post("/api/hid/events/send_mouse_relative?delta_x=3&delta_y=-4")
	if got := e.reports(gadget.MouseAlt) + e.mouse(); got != "" {
		t.Errorf("a relative move on usb reached the mice: %s", got)
	}
	post("/api/hid/set_params?mouse_output=USB_REL")
	if got := state(); got != "[usb usb_rel] usb_rel" {
		t.Errorf("usb_rel: %s", got)
	}
	if got := e.mouse(); got != "00000000000000" {
		t.Errorf("the absolute mouse, left: %s, want its buttons released", got)
	}
	post("/api/hid/events/send_mouse_relative?delta_x=3&delta_y=-4")
	post("/api/hid/events/send_mouse_move?to_x=100&to_y=100") // ignored by a relative mouse
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-Kvmd-User": {"operator"}, "X-Kvmd-Passwd": {"operator-pass"}})
	wsSend(t, c, websocket.MessageText, `{"event_type":"mouse_relative","event":{"delta":[{"x":100,"y":0},{"x":100,"y":-1}],"squash":true}}`)
	wsSend(t, c, websocket.MessageBinary, "\x04\x00\x81\x7f")
	wsPing(t, c)
	if got, want := e.reports(gadget.MouseAlt), "0003fc0000 0064000000 0064ff0000 00817f0000"; got != want {
		t.Errorf("relative moves: %s, want %s", got, want)
	}
	for _, o := range []string{"usb_win98", "ps2", "disabled"} {
		post("/api/hid/set_params?mouse_output=" + o)
		if got := state(); got != "[usb usb_rel] usb_rel" {
			t.Errorf("%s: %s", o, got)
		}
	}
	post("/api/hid/set_params?mouse_output=usb&keyboard_output=usb")
	if got := state(); got != "[usb usb_rel] usb" {
		t.Errorf("usb: %s", got)
	}
	if got := e.reports(gadget.MouseAlt); got != "0000000000" {
		t.Errorf("the relative mouse, left: %s, want its buttons released", got)
	}
}

// TestFirstRunes: print's limit counts characters, not bytes.
func TestFirstRunes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{{"Zähler", 2, "Zä"}, {"Zähler", 6, "Zähler"}, {"Zähler", 60, "Zähler"}, {"€x", 1, "€"}, {"", 3, ""}} {
		if got := firstRunes(tc.s, tc.n); got != tc.want {
			t.Errorf("firstRunes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
