package httpd

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The keyboard and mouse requests of PiKVM's third-party clients, as
// their source sends them (each test names the file it was read from);
// what arrives at the host is checked.

// TestHomeAssistantPrint: the Home Assistant integration "pikvm"
// (github.com/pschmitt/homeassistant-pikvm at 9cd02d8,
// custom_components/pikvm/api.py, async_send_text): aiohttp's
// session.request("POST", "/api/hid/print", params={"limit": "0",
// "keymap": keymap}, data=text.encode(), headers X-KVMD-User and
// X-KVMD-Passwd); bytes as data go as application/octet-stream; its
// default keymap is "de" (const.py). Any status >= 400 is an error to it.
func TestHomeAssistantPrint(t *testing.T) {
	e := newHIDEnv(t)
	hdr := map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator-pass", "Content-Type": "application/octet-stream"}
	r := e.req("POST", "/api/hid/print?limit=0&keymap=de", hdr, "Zähler")
	if r.status != 200 || !r.ok {
		t.Fatalf("print: %d %s", r.status, r.body)
	}
	// German layout: Z is Shift and the key of Y, ä the key of '.
	if got, want := e.keys(), "[ShiftLeft] [ShiftLeft+KeyY] [ShiftLeft] [] [Quote] [] [KeyH] [] [KeyL] [] [KeyE] [] [KeyR] []"; got != want {
		t.Errorf("the host got %s, want %s", got, want)
	}
}

// TestHomeAssistantSendKey: the same integration's async_send_key: a
// WebSocket /api/ws?stream=0 with the headers, send_json of {"event_type":
// "key", "event": {"key": key, "state": state}}; for ctrl-alt-del
// ControlLeft, AltLeft, Delete pressed and released, then AltLeft and
// ControlLeft released.
func TestHomeAssistantSendKey(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-KVMD-User": {"operator"}, "X-KVMD-Passwd": {"operator-pass"}})
	for _, m := range []string{
		`{"event_type": "key", "event": {"key": "ControlLeft", "state": true}}`,
		`{"event_type": "key", "event": {"key": "AltLeft", "state": true}}`,
		`{"event_type": "key", "event": {"key": "Delete", "state": true}}`,
		`{"event_type": "key", "event": {"key": "Delete", "state": false}}`,
		`{"event_type": "key", "event": {"key": "AltLeft", "state": false}}`,
		`{"event_type": "key", "event": {"key": "ControlLeft", "state": false}}`,
	} {
		wsSend(t, c, websocket.MessageText, m)
	}
	wsPing(t, c)
	if got, want := e.keys(), "[ControlLeft] [ControlLeft+AltLeft] [ControlLeft+AltLeft+Delete] [ControlLeft+AltLeft] [ControlLeft] []"; got != want {
		t.Errorf("the host got %s, want %s", got, want)
	}
}

// TestDocsRecipes: PiKVM's API documentation (github.com/pikvm/pikvm at
// 818c5bc, docs/api.md): the WebSocket example "Sending key events using
// Python" (websocket-client with the X-KVMD headers, Enter pressed, 50 ms,
// released) and the print example (curl -d "Einige Worte", so a form
// Content-Type, with ?keymap=de): kvmd answers it {"ok": true, "result":
// {}}; this daemon adds what it skipped to the result, nothing here.
func TestDocsRecipes(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-KVMD-User": {"admin"}, "X-KVMD-Passwd": {"admin-pass"}})
	wsSend(t, c, websocket.MessageText, `{"event_type": "key", "event": {"key": "Enter", "state": true}}`)
	time.Sleep(50 * time.Millisecond)
	wsSend(t, c, websocket.MessageText, `{"event_type": "key", "event": {"key": "Enter", "state": false}}`)
	c.Close(websocket.StatusNormalClosure, "")
	if got := e.keys(); got != "[Enter] []" {
		t.Errorf("the docs' WebSocket recipe: the host got %s", got)
	}
	hdr := map[string]string{"Authorization": basic("admin", "admin-pass"), "Content-Type": "application/x-www-form-urlencoded"}
	if r := e.req("POST", "/api/hid/print?keymap=de", hdr, "Einige Worte"); r.status != 200 || string(r.body) != `{"ok":true,"result":{"skipped":{"count":0,"chars":[]}}}` {
		t.Fatalf("the docs' print: %d %s", r.status, r.body)
	}
	if got := e.keys(); !strings.HasPrefix(got, "[ShiftLeft] [ShiftLeft+KeyE] [ShiftLeft] [] [KeyI] [] [KeyN] []") || !strings.Contains(got, "[Space]") {
		t.Errorf("the docs' print: the host got %s", got)
	}
}

// TestPikvmLib: pikvm-lib (github.com/guanana/pikvm-lib at 35b3c08,
// src/pikvm_lib/): PiKVMWebsocket connects to /api/ws?stream=0 with the
// X-KVMD headers; _create_event formats keys as {"event_type": "key",
// "event": {"key": "...", "state": true}}; send_ctrl_alt_sup presses
// Ctrl, Alt, Delete and releases Ctrl, Alt, Delete in that order;
// pikvm_mouse sends the button state as the strings "true"/"false", the
// move in -32768..32767 and the wheel's delta as a bare number (which
// kvmd drops; taken here as the vertical wheel).
func TestPikvmLib(t *testing.T) {
	e := newHIDEnv(t)
	c := dialWS(t, e.env, "?stream=0", http.Header{"X-KVMD-User": {"operator"}, "X-KVMD-Passwd": {"operator-pass"}})
	for _, m := range []string{
		`{"event_type": "key", "event": {"key": "ControlLeft", "state": true}}`,
		`{"event_type": "key", "event": {"key": "AltLeft", "state": true}}`,
		`{"event_type": "key", "event": {"key": "Delete", "state": true}}`,
		`{"event_type": "key", "event": {"key": "ControlLeft", "state": false}}`,
		`{"event_type": "key", "event": {"key": "AltLeft", "state": false}}`,
		`{"event_type": "key", "event": {"key": "Delete", "state": false}}`,
		`{"event_type": "mouse_move", "event": {"to": {"x": 32767, "y": -32768}}}`,
		`{"event_type": "mouse_button", "event": {"button": "left", "state": "true"}}`,
		`{"event_type": "mouse_button", "event": {"button": "left", "state": "false"}}`,
		`{"event_type": "mouse_wheel", "event": {"delta": -1}}`,
	} {
		wsSend(t, c, websocket.MessageText, m)
	}
	wsPing(t, c)
	if got, want := e.keys(), "[ControlLeft] [ControlLeft+AltLeft] [ControlLeft+AltLeft+Delete] [AltLeft+Delete] [Delete] []"; got != want {
		t.Errorf("keyboard: the host got %s, want %s", got, want)
	}
	if got, want := e.mouse(), "00ff7f00000000 01ff7f00000000 00ff7f00000000 00ff7f0000ff00"; got != want {
		t.Errorf("mouse: the host got %s, want %s", got, want)
	}
	if n := e.hid.Counts().Dropped["malformed"]; n != 0 {
		t.Errorf("%d of pikvm-lib's messages dropped as malformed", n)
	}
}
