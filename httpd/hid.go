package httpd

import (
	"context"
	"errors"
	"math"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"kvmd/hid"
)

// HID is the keyboard and mouse that /api/hid and /api/ws input drive
// (package hid implements it).
type HID interface {
	Apply(ev hid.Event)
	Key(k hid.Key, press, finish bool)
	MouseButton(b hid.Button, press bool)
	MouseMove(x, y int)
	MouseRelative(deltas []hid.Delta, squash bool)
	MouseWheel(deltas []hid.Delta, squash bool)
	Print(ctx context.Context, text, keymap string, delay time.Duration) error
	Shortcut(ctx context.Context, keys []hid.Key) error
	Reset()
	ReleaseAll()
	SetJiggler(on bool)
	SetMouseOutput(name string)
	Inactivity() int
	Keymaps() *hid.Keymaps
	Dropped(r hid.DropReason)
}

func (s *Server) hidKeymaps(w http.ResponseWriter, r *http.Request) error {
	return WriteJSON(w, s.cfg.Devices.HID.Keymaps().State())
}

func (s *Server) hidInactivity(w http.ResponseWriter, r *http.Request) error {
	return WriteJSON(w, map[string]int{"inactivity": s.cfg.Devices.HID.Inactivity()})
}

// oneOfOptional reads an optional parameter that must be one of values
// (in any case); absent gives "".
func oneOfOptional(r *http.Request, name string, values ...string) (string, error) {
	if _, ok := query(r)[name]; !ok {
		return "", nil
	}
	return oneOf(r, name, values...)
}

// hidSetParams takes kvmd's outputs and jiggler, each checked against
// kvmd's list. This daemon drives the USB gadget only, as kvmd's OTG HID:
// the keyboard output has no effect; the mouse output chooses between the
// gadget's absolute mouse (usb) and its relative one (usb_rel), and the
// others change nothing; the jiggler turns on and off.
func (s *Server) hidSetParams(w http.ResponseWriter, r *http.Request) error {
	if _, err := oneOfOptional(r, "keyboard_output", "usb", "ps2", "disabled"); err != nil {
		return err
	}
	mouse, err := oneOfOptional(r, "mouse_output", "usb", "usb_win98", "usb_rel", "ps2", "disabled")
	if err != nil {
		return err
	}
	if _, ok := query(r)["jiggler"]; ok {
		on, err := queryBool(r, "jiggler", false)
		if err != nil {
			return err
		}
		s.cfg.Devices.HID.SetJiggler(on)
	}
	if mouse != "" {
		s.cfg.Devices.HID.SetMouseOutput(mouse)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// hidSetConnected is kvmd's: the OTG HID cannot disconnect itself from
// the host (the gadget is shared with the drive), so the value is checked
// and has no effect.
func (s *Server) hidSetConnected(w http.ResponseWriter, r *http.Request) error {
	if _, err := requiredBool(r, "connected"); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) hidReset(w http.ResponseWriter, r *http.Request) error {
	s.cfg.Devices.HID.Reset()
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// requiredBool reads a boolean parameter that must be there.
func requiredBool(r *http.Request, name string) (bool, error) {
	if _, ok := query(r)[name]; !ok {
		return false, BadParam(name, "not a boolean (1/true/yes or 0/false/no)")
	}
	return queryBool(r, name, false)
}

// queryInt reads an integer parameter as kvmd's valid_number (decimal or
// 0x hex, at most 8 characters) and clamps it to lo..hi.
func queryInt(r *http.Request, name string, lo, hi int) (int, error) {
	return queryIntN(r, name, 8, lo, hi)
}

// queryIntN is queryInt for values of at most maxLen characters.
func queryIntN(r *http.Request, name string, maxLen, lo, hi int) (int, error) {
	v := strings.TrimSpace(query(r).Get(name))
	if v == "" || len(v) > maxLen {
		return 0, BadParam(name, "not an integer")
	}
	base := 10
	if len(v) > 2 && (v[:2] == "0x" || v[:2] == "0X") {
		v, base = v[2:], 16
	}
	n, err := strconv.ParseInt(v, base, 64)
	if err != nil {
		return 0, BadParam(name, "not an integer")
	}
	return min(max(int(n), lo), hi), nil
}

func queryKey(r *http.Request, name string) (hid.Key, error) {
	k, ok := hid.KeyByName(strings.TrimSpace(query(r).Get(name)))
	if !ok {
		return hid.Key{}, BadParam(name, "not a key name (KeyboardEvent.code: KeyA, Enter, ShiftLeft...)")
	}
	return k, nil
}

func (s *Server) hidSendKey(w http.ResponseWriter, r *http.Request) error {
	k, err := queryKey(r, "key")
	if err != nil {
		return err
	}
	if _, ok := query(r)["state"]; ok {
		state, err := queryBool(r, "state", false)
		if err != nil {
			return err
		}
		finish, err := queryBool(r, "finish", false)
		if err != nil {
			return err
		}
		s.cfg.Devices.HID.Key(k, state, finish)
	} else {
		s.cfg.Devices.HID.Key(k, true, true)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

var listSep = regexp.MustCompile(`[,\t ]+`)

// hidSendShortcut presses keys= (a list split on commas and spaces) in
// order and releases them in reverse, 50 ms apart; it answers when done.
func (s *Server) hidSendShortcut(w http.ResponseWriter, r *http.Request) error {
	q := query(r)
	if _, ok := q["keys"]; !ok {
		return BadParam("keys", "a list of key names is required")
	}
	var keys []hid.Key
	for _, name := range listSep.Split(q.Get("keys"), -1) {
		if name == "" {
			continue
		}
		k, ok := hid.KeyByName(name)
		if !ok {
			return BadParam("keys", "not a list of key names (KeyboardEvent.code: ControlLeft,AltLeft,Delete)")
		}
		keys = append(keys, k)
	}
	if len(keys) > 0 {
		if err := s.hidLong(w, r, nil, func(ctx context.Context) error { return s.cfg.Devices.HID.Shortcut(ctx, keys) }); err != nil {
			return err
		}
		return nil
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) hidSendMouseButton(w http.ResponseWriter, r *http.Request) error {
	b, ok := hid.ButtonByName(strings.TrimSpace(query(r).Get("button")))
	if !ok {
		return BadParam("button", "not one of left, right, middle, up, down")
	}
	if _, ok := query(r)["state"]; ok {
		state, err := queryBool(r, "state", false)
		if err != nil {
			return err
		}
		s.cfg.Devices.HID.MouseButton(b, state)
	} else {
		s.cfg.Devices.HID.MouseButton(b, true)
		s.cfg.Devices.HID.MouseButton(b, false)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) hidSendMouseMove(w http.ResponseWriter, r *http.Request) error {
	x, err := queryInt(r, "to_x", hid.MoveMin, hid.MoveMax)
	if err != nil {
		return err
	}
	y, err := queryInt(r, "to_y", hid.MoveMin, hid.MoveMax)
	if err != nil {
		return err
	}
	s.cfg.Devices.HID.MouseMove(x, y)
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) hidSendMouseRelative(w http.ResponseWriter, r *http.Request) error {
	return s.hidSendMouseDelta(w, r, false)
}

func (s *Server) hidSendMouseWheel(w http.ResponseWriter, r *http.Request) error {
	return s.hidSendMouseDelta(w, r, true)
}

func (s *Server) hidSendMouseDelta(w http.ResponseWriter, r *http.Request, wheel bool) error {
	x, err := queryInt(r, "delta_x", hid.DeltaMin, hid.DeltaMax)
	if err != nil {
		return err
	}
	y, err := queryInt(r, "delta_y", hid.DeltaMin, hid.DeltaMax)
	if err != nil {
		return err
	}
	d := []hid.Delta{{X: int8(x), Y: int8(y)}}
	if wheel {
		s.cfg.Devices.HID.MouseWheel(d, false)
	} else {
		s.cfg.Devices.HID.MouseRelative(d, false)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// printText decodes print's body: UTF-8 unless Content-Type names
// another charset (ISO-8859-1 is also taken).
func printText(r *http.Request, body []byte) (string, error) {
	charset := "utf-8"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if _, params, err := mime.ParseMediaType(ct); err == nil && params["charset"] != "" {
			charset = strings.ToLower(params["charset"])
		}
	}
	switch charset {
	case "utf-8", "utf8", "us-ascii", "ascii":
		if !utf8.Valid(body) {
			return "", BadRequest("The text is not valid UTF-8", nil)
		}
		return string(body), nil
	case "iso-8859-1", "latin1", "latin-1":
		var b strings.Builder
		b.Grow(len(body) + len(body)/4)
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		return b.String(), nil
	}
	return "", BadRequest("Unsupported charset "+strconv.Quote(charset)+": send UTF-8", nil)
}

// hidPrint types the body's text (kvmd's print): limit= characters of it
// (default 1024, 0 for all), with keymap= (default en-us), and slow=1 or
// delay= seconds (0..5) before each key event. It answers when the text
// is typed, saying which characters the keymap's layout cannot type and
// how many were skipped. It goes on if the client leaves; another print, a shortcut,
// a reset or the end of the session stops it, releasing every key.
func (s *Server) hidPrint(w http.ResponseWriter, r *http.Request) error {
	body, err := requestBody(r)
	if err != nil {
		return BadRequest("Request body could not be read", err)
	}
	text, err := printText(r, body)
	if err != nil {
		return err
	}
	// The text is a copy: the body can go while it types.
	body = nil
	forgetBody(r)
	limit := 1024
	if _, ok := query(r)["limit"]; ok {
		if limit, err = queryIntN(r, "limit", 16, -1, math.MaxInt32); err != nil {
			return err
		}
		if limit < 0 {
			return BadParam("limit", "not an integer >= 0 (0: no limit)")
		}
	}
	if limit > 0 {
		text = firstRunes(text, limit)
	}
	keymap := strings.TrimSpace(query(r).Get("keymap"))
	km, err := s.cfg.Devices.HID.Keymaps().Get(keymap)
	if err != nil {
		return BadParam("keymap", "not one of GET /api/hid/keymaps's available")
	}
	slow, err := queryBool(r, "slow", false)
	if err != nil {
		return err
	}
	delay := 0.0
	if slow {
		delay = 0.02
	}
	if v, ok := query(r)["delay"]; ok {
		d, err := strconv.ParseFloat(strings.TrimSpace(v[0]), 64)
		if err != nil || math.IsNaN(d) || d < 0 || d > 5 {
			return BadParam("delay", "not a number of seconds from 0 to 5")
		}
		delay = d
	}
	dur := time.Duration(delay * float64(time.Second))
	return s.hidLong(w, r, printResult(km.Skipped(text)), func(ctx context.Context) error {
		return s.cfg.Devices.HID.Print(ctx, text, keymap, dur)
	})
}

// printResult is print's answer: kvmd's is empty; this one says what of
// the text the keymap's layout cannot type, which was skipped (clients
// that do not know the field ignore it).
func printResult(sk hid.Skipped) any {
	type skipped struct {
		Count int      `json:"count"`
		Chars []string `json:"chars"`
	}
	chars := make([]string, len(sk.Chars))
	for i, c := range sk.Chars {
		chars[i] = string(c)
	}
	return struct {
		Skipped skipped `json:"skipped"`
	}{skipped{sk.Count, chars}}
}

// firstRunes returns the first n characters of s (all of it when it has
// fewer), without a copy.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// hidLong runs a print or a shortcut, bound to the session (or API token)
// and to the server, not to the connection: it answers when do returns,
// with result (nil: an empty one), or not at all when the client left
// first (do goes on).
func (s *Server) hidLong(w http.ResponseWriter, r *http.Request, result any, do func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	session := IdentityFrom(r.Context()).done
	errc := make(chan error, 1)
	go func() {
		defer cancel()
		if session != nil {
			stop := context.AfterFunc(session, cancel)
			defer stop()
		}
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		errc <- do(ctx)
	}()
	var err error
	select {
	case err = <-errc:
	case <-r.Context().Done():
		if session == nil || session.Err() == nil {
			return nil // the client left: the typing goes on
		}
		err = <-errc
	}
	switch {
	case err == nil && result == nil:
		writeBody(w, http.StatusOK, okEmpty)
		return nil
	case err == nil:
		return WriteJSON(w, result)
	case errors.Is(err, hid.ErrNoKeymap):
		return BadParam("keymap", "not one of GET /api/hid/keymaps's available")
	case errors.Is(err, hid.ErrUnavailable):
		return NotNow("The keyboard is not connected to a host: no USB gadget keyboard, or the gadget is not bound (see /api/info's hw.usb)", err)
	case errors.Is(err, hid.ErrStalled):
		// The host's state (asleep, off), as the keyboard without a host.
		return NotNow("The host stopped reading the keyboard (it may be asleep); what was held is released", err)
	case errors.Is(err, hid.ErrInterrupted), errors.Is(err, context.Canceled):
		return &Error{Status: http.StatusConflict, Name: "HidInterruptedError",
			Msg: "Typing was stopped by another print or shortcut, a reset, the session ending or the host disconnecting; every key was released", Err: err}
	}
	return err
}
