package hid

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EventKind is what an input event does.
type EventKind int

// The input events of kvmd's /api/ws.
const (
	EventKey EventKind = iota + 1
	EventMouseButton
	EventMouseMove
	EventMouseRelative
	EventMouseWheel
)

// Event is one input event from a client.
type Event struct {
	Kind EventKind
	// Key, State and Finish: EventKey (Finish: release right after).
	Key    Key
	State  bool
	Finish bool
	// Button and State: EventMouseButton.
	Button Button
	// X, Y: EventMouseMove, each in MoveMin..MoveMax.
	X, Y int
	// Deltas and Squash: EventMouseRelative and EventMouseWheel.
	Deltas []Delta
	Squash bool
}

// IsInputEvent reports whether a text message's event_type is one of the
// input events ParseJSON reads.
func IsInputEvent(eventType string) bool {
	switch eventType {
	case "key", "mouse_button", "mouse_move", "mouse_relative", "mouse_wheel":
		return true
	}
	return false
}

// ErrMalformed is returned for an input message kvmd would drop.
var ErrMalformed = errors.New("hid: malformed input event")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// ParseJSON reads the event object of a text message of one of the input
// event types, with kvmd's validators (kvmd/apps/kvmd/api/hid.py,
// kvmd/validators/): a key by its KeyboardEvent.code name; booleans as
// JSON booleans, 0/1 or "true"/"yes"/"0"..., in any case; numbers as JSON
// integers or decimal (or 0x hex) strings, clamped to their range. The one
// form kvmd does not take is mouse_wheel's delta as a bare number (the
// vertical steps), which pikvm-lib sends.
func ParseJSON(eventType string, event []byte) (Event, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(event, &obj); err != nil || obj == nil {
		return Event{}, malformed("the event is not a JSON object")
	}
	switch eventType {
	case "key":
		name, err := keyName(obj["key"])
		if err != nil {
			return Event{}, err
		}
		k, ok := KeyByName(name)
		if !ok {
			return Event{}, malformed("unknown key")
		}
		state, err := jsonBool(obj["state"], nil)
		if err != nil {
			return Event{}, err
		}
		f := false
		finish, err := jsonBool(obj["finish"], &f)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: EventKey, Key: k, State: state, Finish: finish}, nil
	case "mouse_button":
		s, err := jsonString(obj["button"], 16)
		if err != nil {
			return Event{}, err
		}
		b, ok := ButtonByName(strings.TrimSpace(s))
		if !ok {
			return Event{}, malformed("unknown mouse button")
		}
		state, err := jsonBool(obj["state"], nil)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: EventMouseButton, Button: b, State: state}, nil
	case "mouse_move":
		var to map[string]json.RawMessage
		if err := json.Unmarshal(obj["to"], &to); err != nil || to == nil {
			return Event{}, malformed("to is not an object")
		}
		x, err := jsonInt(to["x"], MoveMin, MoveMax)
		if err != nil {
			return Event{}, err
		}
		y, err := jsonInt(to["y"], MoveMin, MoveMax)
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: EventMouseMove, X: x, Y: y}, nil
	case "mouse_relative", "mouse_wheel":
		ev := Event{Kind: EventMouseRelative}
		if eventType == "mouse_wheel" {
			ev.Kind = EventMouseWheel
		}
		raw := bytes.TrimSpace(obj["delta"])
		var list []json.RawMessage
		switch {
		case len(raw) > 0 && raw[0] == '[':
			if err := json.Unmarshal(raw, &list); err != nil {
				return Event{}, malformed("delta is not a list")
			}
		case ev.Kind == EventMouseWheel && len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
			// pikvm-lib's wheel: "delta": 1 (up) or -1 (down).
			y, err := jsonInt(raw, DeltaMin, DeltaMax)
			if err != nil {
				return Event{}, err
			}
			list = nil
			ev.Deltas = []Delta{{0, int8(y)}}
		default:
			list = []json.RawMessage{raw}
		}
		for _, d := range list {
			var xy map[string]json.RawMessage
			if err := json.Unmarshal(d, &xy); err != nil || xy == nil {
				return Event{}, malformed("a delta is not an object")
			}
			x, err := jsonInt(xy["x"], DeltaMin, DeltaMax)
			if err != nil {
				return Event{}, err
			}
			y, err := jsonInt(xy["y"], DeltaMin, DeltaMax)
			if err != nil {
				return Event{}, err
			}
			ev.Deltas = append(ev.Deltas, Delta{int8(x), int8(y)})
		}
		f := false
		squash, err := jsonBool(obj["squash"], &f)
		if err != nil {
			return Event{}, err
		}
		ev.Squash = squash
		return ev, nil
	}
	return Event{}, malformed("not an input event type")
}

// keyName reads a key name as kvmd's valid_hid_key: a string of at most
// 16 characters, trimmed.
func keyName(raw json.RawMessage) (string, error) {
	s, err := jsonString(raw, 16)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// jsonString reads a JSON string of at most max characters.
func jsonString(raw json.RawMessage, max int) (string, error) {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return "", malformed("not a string")
	}
	if utf8.RuneCountInString(s) > max {
		return "", malformed("too long")
	}
	return s, nil
}

// scalar returns the text kvmd's validators see for a JSON value (Python's
// str() of it): a string as it is, a number as written, true and false
// capitalised; ok is false for null, objects and lists, which no
// validator here accepts.
func scalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case 't':
		return "True", string(raw) == "true"
	case 'f':
		return "False", string(raw) == "false"
	case 'n', '{', '[':
		return "", false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return "", false
	}
	return n.String(), true
}

// jsonBool reads a boolean as kvmd's valid_bool; an absent one is def, or
// an error when def is nil.
func jsonBool(raw json.RawMessage, def *bool) (bool, error) {
	if raw == nil && def != nil {
		return *def, nil
	}
	s, ok := scalar(raw)
	if !ok || len(s) > 16 {
		return false, malformed("not a boolean")
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes":
		return true, nil
	case "0", "false", "no":
		return false, nil
	}
	return false, malformed("not a boolean")
}

// jsonInt reads an integer as kvmd's valid_number (at most 8 characters,
// decimal or 0x hex) and clamps it to lo..hi.
func jsonInt(raw json.RawMessage, lo, hi int) (int, error) {
	s, ok := scalar(raw)
	if !ok || len(s) > 8 {
		return 0, malformed("not an integer")
	}
	n, err := parseInt(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	return min(max(n, lo), hi), nil
}

// parseInt parses an integer as Python's int() does for the strings kvmd
// gets: an optional sign, then digits (underscores between them allowed),
// or 0x and hex digits.
func parseInt(s string) (int, error) {
	if rest, ok := strings.CutPrefix(s, "0x"); ok || strings.HasPrefix(s, "0X") {
		if !ok {
			rest = s[2:]
		}
		n, err := strconv.ParseInt(rest, 16, 64)
		if err != nil {
			return 0, malformed("not an integer")
		}
		return int(n), nil
	}
	if s == "" || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, malformed("not an integer")
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, malformed("not an integer")
	}
	return int(n), nil
}

// ParseBinary reads a binary input message (kvmd's binary WebSocket
// handlers 1 to 5, kvmd/apps/kvmd/api/hid.py); msg[0] is the handler.
//
//   - 1 key: flags (bit 0 pressed, bit 1 finish, bit 7 a code follows),
//     then the key's name in ASCII, or its Linux code as a big-endian uint16.
//   - 2 mouse button: flags (bit 0 pressed, bit 7 a code follows), then the
//     button's name or Linux code.
//   - 3 mouse move: x and y as big-endian int16.
//   - 4 mouse relative, 5 mouse wheel: flags (bit 0 squash), then (x, y)
//     pairs of int8.
func ParseBinary(msg []byte) (Event, error) {
	if len(msg) < 1 {
		return Event{}, malformed("empty")
	}
	typ, data := msg[0], msg[1:]
	switch typ {
	case 1, 2:
		if len(data) < 1 {
			return Event{}, malformed("no flags")
		}
		flags, rest := data[0], data[1:]
		ev := Event{State: flags&1 != 0}
		if typ == 1 {
			ev.Kind, ev.Finish = EventKey, flags&2 != 0
		} else {
			ev.Kind = EventMouseButton
		}
		var ok bool
		if flags&0x80 != 0 {
			if len(rest) != 2 {
				return Event{}, malformed("a code is two bytes")
			}
			code := binary.BigEndian.Uint16(rest)
			if typ == 1 {
				ev.Key, ok = KeyByEvdev(code)
			} else {
				ev.Button, ok = ButtonByEvdev(code)
			}
		} else {
			name := rest[:min(len(rest), 32)]
			for _, c := range name {
				if c >= 0x80 {
					return Event{}, malformed("the name is not ASCII")
				}
			}
			s := string(name)
			if len(s) > 16 {
				return Event{}, malformed("the name is too long")
			}
			s = strings.TrimSpace(s)
			if typ == 1 {
				ev.Key, ok = KeyByName(s)
			} else {
				ev.Button, ok = ButtonByName(s)
			}
		}
		if !ok {
			return Event{}, malformed("unknown key or button")
		}
		return ev, nil
	case 3:
		if len(data) != 4 {
			return Event{}, malformed("a move is four bytes")
		}
		return Event{Kind: EventMouseMove,
			X: int(int16(binary.BigEndian.Uint16(data))), Y: int(int16(binary.BigEndian.Uint16(data[2:])))}, nil
	case 4, 5:
		if len(data) < 1 || len(data)%2 != 1 {
			return Event{}, malformed("deltas are pairs of bytes after the flags")
		}
		ev := Event{Kind: EventMouseRelative, Squash: data[0]&1 != 0}
		if typ == 5 {
			ev.Kind = EventMouseWheel
		}
		for i := 1; i < len(data); i += 2 {
			ev.Deltas = append(ev.Deltas, Delta{clampDelta(int8(data[i])), clampDelta(int8(data[i+1]))})
		}
		return ev, nil
	}
	return Event{}, malformed("not an input handler")
}

// BinaryEventType is the input event type of a binary message, by its
// first byte as kvmd's input handlers number them (1 key, 2 mouse_button,
// 3 mouse_move, 4 mouse_relative, 5 mouse_wheel); false for another.
func BinaryEventType(msg []byte) (string, bool) {
	if len(msg) < 1 || msg[0] < 1 || int(msg[0]) > len(binaryTypes) {
		return "", false
	}
	return binaryTypes[msg[0]-1], true
}

var binaryTypes = []string{"key", "mouse_button", "mouse_move", "mouse_relative", "mouse_wheel"}

func clampDelta(v int8) int8 { return max(v, DeltaMin) }
