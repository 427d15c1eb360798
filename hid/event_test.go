package hid

import (
	"errors"
	"fmt"
	"testing"
)

// TestParseJSON: what kvmd's validators accept and drop
// (kvmd/apps/kvmd/api/hid.py, kvmd/validators/{basic,hid}.py).
func TestParseJSON(t *testing.T) {
	for _, tc := range []struct {
		typ, event string
		want       string // fmt of the parsed event's fields; "" = dropped
	}{
		{"key", `{"key":"KeyA","state":true}`, "key KeyA true false"},
		{"key", `{"key":" KeyA ","state":"yes","finish":1}`, "key KeyA true true"},
		{"key", `{"key":"KeyA","state":"False"}`, "key KeyA false false"},
		{"key", `{"key":"KeyA","state":0}`, "key KeyA false false"},
		{"key", `{"key":"keya","state":true}`, ""},
		{"key", `{"key":"KeyA"}`, ""},
		{"key", `{"key":"KeyA","state":null}`, ""},
		{"key", `{"key":"KeyA","state":2}`, ""},
		{"key", `{"key":"KeyA","state":1.0}`, ""},
		{"key", `{"key":"KeyA","state":true,"finish":"maybe"}`, ""},
		{"key", `{"key":"                KeyA","state":true}`, ""}, // longer than 16
		{"key", `{"key":1,"state":true}`, ""},
		{"key", `["KeyA",true]`, ""},
		{"key", `null`, ""},
		{"mouse_button", `{"button":"LEFT","state":"true"}`, "button left true"}, // pikvm-lib's strings
		{"mouse_button", `{"button":"down","state":false}`, "button down false"},
		{"mouse_button", `{"button":"back","state":false}`, ""},
		{"mouse_move", `{"to":{"x":-32768,"y":32767}}`, "move -32768 32767"},
		{"mouse_move", `{"to":{"x":"100","y":"0x10"}}`, "move 100 16"},
		{"mouse_move", `{"to":{"x":99999,"y":-99999}}`, "move 32767 -32768"},
		{"mouse_move", `{"to":{"x":1.5,"y":0}}`, ""},
		{"mouse_move", `{"to":{"x":123456789,"y":0}}`, ""}, // longer than 8 characters
		{"mouse_move", `{"to":[1,2]}`, ""},
		{"mouse_move", `{"x":1,"y":2}`, ""},
		{"mouse_wheel", `{"delta":{"x":0,"y":-5}}`, "wheel [{0 -5}] false"},
		{"mouse_wheel", `{"delta":[{"x":1,"y":2},{"x":-200,"y":200}],"squash":true}`, "wheel [{1 2} {-127 127}] true"},
		{"mouse_wheel", `{"delta":1}`, "wheel [{0 1}] false"}, // pikvm-lib's form
		{"mouse_wheel", `{"delta":-300}`, "wheel [{0 -127}] false"},
		{"mouse_wheel", `{"delta":null}`, ""},
		{"mouse_wheel", `{}`, ""},
		{"mouse_relative", `{"delta":{"x":5,"y":6}}`, "relative [{5 6}] false"},
		{"mouse_relative", `{"delta":1}`, ""},
		{"mouse_relative", `{"delta":[]}`, "relative [] false"},
		{"ping", `{}`, ""},
	} {
		ev, err := ParseJSON(tc.typ, []byte(tc.event))
		got := describe(ev)
		if err != nil {
			got = ""
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s %s: error %v is not ErrMalformed", tc.typ, tc.event, err)
			}
		}
		if got != tc.want {
			t.Errorf("%s %s: %q, want %q (err %v)", tc.typ, tc.event, got, tc.want, err)
		}
	}
}

func describe(ev Event) string {
	switch ev.Kind {
	case EventKey:
		return fmt.Sprintf("key %s %v %v", ev.Key.Name, ev.State, ev.Finish)
	case EventMouseButton:
		return fmt.Sprintf("button %s %v", ev.Button.Name, ev.State)
	case EventMouseMove:
		return fmt.Sprintf("move %d %d", ev.X, ev.Y)
	case EventMouseRelative:
		return fmt.Sprintf("relative %v %v", fmtDeltas(ev.Deltas), ev.Squash)
	case EventMouseWheel:
		return fmt.Sprintf("wheel %v %v", fmtDeltas(ev.Deltas), ev.Squash)
	}
	return ""
}

func fmtDeltas(d []Delta) string {
	if d == nil {
		d = []Delta{}
	}
	return fmt.Sprint(d)
}

func TestParseBinary(t *testing.T) {
	for _, tc := range []struct {
		msg  []byte
		want string
	}{
		{append([]byte{1, 1}, "KeyA"...), "key KeyA true false"},
		{append([]byte{1, 3}, " Enter"...), "key Enter true true"},
		{[]byte{1, 0x81, 0, 30}, "key KeyA true false"},              // KEY_A
		{[]byte{1, 0x80, 0x01, 0xb6}, "key ContextMenu false false"}, // KEY_CONTEXT_MENU
		{[]byte{1, 0x80, 0, 30, 0}, ""},
		{[]byte{1, 0x81, 0x02, 0x00}, ""},
		{append([]byte{1, 1}, "Key\xc3\xa4"...), ""},
		{[]byte{1}, ""},
		{append([]byte{2, 1}, "Middle"...), "button middle true"},
		{[]byte{2, 0x80, 0x01, 0x16}, "button up false"}, // BTN_BACK
		{[]byte{2, 0x80, 0x01, 0x13}, ""},                // BTN_SIDE: not kvmd's
		{[]byte{3, 0x80, 0x00, 0x7f, 0xff}, "move -32768 32767"},
		{[]byte{3, 0, 0, 0}, ""},
		{[]byte{4, 1, 0xff, 0x80, 5, 6}, "relative [{-1 -127} {5 6}] true"},
		{[]byte{5, 0, 0, 1}, "wheel [{0 1}] false"},
		{[]byte{5, 0}, "wheel [] false"},
		{[]byte{5, 0, 1}, ""},
		{[]byte{5}, ""},
		{[]byte{6, 0}, ""},
	} {
		ev, err := ParseBinary(tc.msg)
		got := describe(ev)
		if err != nil {
			got = ""
		}
		if got != tc.want {
			t.Errorf("%x: %q, want %q (err %v)", tc.msg, got, tc.want, err)
		}
	}
}

// checkEvent fails on a parsed event out of kvmd's ranges.
func checkEvent(t *testing.T, ev Event) {
	switch ev.Kind {
	case EventKey:
		if _, ok := KeyByName(ev.Key.Name); !ok {
			t.Fatalf("unknown key %+v", ev.Key)
		}
	case EventMouseButton:
		if _, ok := ButtonByName(ev.Button.Name); !ok {
			t.Fatalf("unknown button %+v", ev.Button)
		}
	case EventMouseMove:
		if ev.X < MoveMin || ev.X > MoveMax || ev.Y < MoveMin || ev.Y > MoveMax {
			t.Fatalf("move out of range: %+v", ev)
		}
	case EventMouseRelative, EventMouseWheel:
		for _, d := range ev.Deltas {
			if d.X < DeltaMin || d.Y < DeltaMin {
				t.Fatalf("delta out of range: %+v", ev)
			}
		}
	default:
		t.Fatalf("parsed an event of no kind: %+v", ev)
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []struct{ typ, ev string }{
		{"key", `{"key":"KeyA","state":true}`},
		{"mouse_move", `{"to":{"x":"0x10","y":-5}}`},
		{"mouse_wheel", `{"delta":[{"x":1,"y":2}],"squash":1}`},
		{"mouse_wheel", `{"delta":-1}`},
		{"mouse_button", `{"button":"left","state":"no"}`},
	} {
		f.Add(s.typ, []byte(s.ev))
	}
	f.Fuzz(func(t *testing.T, typ string, event []byte) {
		ev, err := ParseJSON(typ, event)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if !IsInputEvent(typ) {
			t.Fatalf("parsed %q, not an input event type", typ)
		}
		checkEvent(t, ev)
	})
}

func FuzzParseBinary(f *testing.F) {
	for _, s := range [][]byte{
		append([]byte{1, 1}, "KeyA"...), {1, 0x81, 0, 30}, {2, 0x80, 1, 0x10}, {3, 1, 2, 3, 4}, {4, 1, 0x80, 0x7f}, {5, 0},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ev, err := ParseBinary(msg)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if _, ok := BinaryEventType(msg); !ok {
			t.Fatalf("parsed %x, not an input handler", msg)
		}
		checkEvent(t, ev)
	})
}
