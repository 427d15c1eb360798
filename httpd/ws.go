package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"kvmd/events"
)

const (
	// wsWriteTimeout bounds one write to a client; a client that takes
	// longer is dropped.
	wsWriteTimeout = 5 * time.Second
	// wsReadLimit bounds a client's message: kvmd's are a few bytes.
	wsReadLimit = 64 << 10
)

// ws is GET /api/ws: kvmd's event stream. It sends the "loop" event, then
// the state of each subsystem, then each change as it is published; it
// answers "ping" with "pong" and the binary ping (a message starting with
// byte 0) with the byte 255. It ends when the client leaves, falls behind
// (events.Hub drops it), the request's context ends (the session ended)
// or the server shuts down.
func (s *Server) ws(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryBool(r, "stream", true); err != nil {
		return err
	}
	if err := checkHandshake(r); err != nil {
		return err
	}
	d := s.cfg.Devices
	// The origin was checked above, with a JSON answer; Accept's own
	// check would answer in plain text.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		// Accept wrote its answer: only for what checkHandshake lets
		// through, such as a connection that cannot be hijacked.
		return nil
	}
	c.SetReadLimit(wsReadLimit)
	ctx := r.Context() // ends with the session, or when the server shuts down (BaseContext)

	sub := d.Events.Subscribe()
	defer d.Events.Unsubscribe(sub)

	send := func(b []byte, typ websocket.MessageType) error {
		wctx, wcancel := context.WithTimeout(context.Background(), wsWriteTimeout)
		defer wcancel()
		return c.Write(wctx, typ, b)
	}
	closeWith := func(code websocket.StatusCode, why string) error {
		c.Close(code, why)
		return nil
	}

	initial := [][]byte{mustEncode("loop", loopEvent(d.Version))}
	for _, typ := range wsEventTypes {
		var st any
		if typ == "atx" {
			st = s.atxCurrent()
		} else {
			st = d.State(typ)
		}
		initial = append(initial, mustEncode(typ, st))
	}
	for _, b := range initial {
		if err := send(b, websocket.MessageText); err != nil {
			return closeWith(websocket.StatusGoingAway, "write failed")
		}
	}

	// The reader answers pings; it ends with the connection. Its context
	// is not ctx: coder/websocket drops the connection without a close
	// frame when a Read's context ends, and the client is owed one.
	rctx, rcancel := context.WithCancel(context.Background())
	defer rcancel()
	readErr := make(chan error, 1)
	go func() {
		for {
			typ, msg, err := c.Read(rctx)
			if err != nil {
				readErr <- err
				return
			}
			switch typ {
			case websocket.MessageBinary:
				if len(msg) >= 1 && msg[0] == 0 {
					if err := send([]byte{255}, websocket.MessageBinary); err != nil {
						readErr <- err
						return
					}
				}
			case websocket.MessageText:
				if wsEventType(msg) == "ping" {
					if err := send([]byte(`{"event_type":"pong","event":{}}`), websocket.MessageText); err != nil {
						readErr <- err
						return
					}
				}
			}
		}
	}()

	for {
		select {
		case b := <-sub.C:
			if err := send(b, websocket.MessageText); err != nil {
				return closeWith(websocket.StatusPolicyViolation, "client too slow")
			}
		case <-sub.Dropped:
			return closeWith(websocket.StatusPolicyViolation, "client too slow")
		case err := <-readErr:
			if websocket.CloseStatus(err) != -1 || errors.Is(err, context.Canceled) {
				return closeWith(websocket.StatusNormalClosure, "")
			}
			return closeWith(websocket.StatusGoingAway, "")
		case <-ctx.Done():
			select {
			case <-s.done:
				return closeWith(websocket.StatusGoingAway, "server shutting down")
			default:
				return closeWith(websocket.StatusPolicyViolation, "session ended")
			}
		}
	}
}

// checkHandshake refuses, in the JSON envelope, what websocket.Accept
// would refuse in plain text: a request that is no WebSocket handshake
// (400) and a handshake from a page of another site (403: a browser
// sends the cookie with it, so it must not be let through, the WebSocket
// form of cross-site request forgery).
func checkHandshake(r *http.Request) error {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		return BadRequest("This is a WebSocket endpoint: the request must be a WebSocket handshake (Connection: Upgrade, Upgrade: websocket)", nil)
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" || r.Header.Get("Sec-WebSocket-Key") == "" {
		return BadRequest("Unsupported WebSocket handshake: Sec-WebSocket-Version 13 and a Sec-WebSocket-Key are needed", nil)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Msg: "WebSocket handshake from another site refused"}
		}
	}
	return nil
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h[http.CanonicalHeaderKey(name)] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// wsEventType returns the event_type of a client's text message, "" when
// it is not kvmd's envelope.
func wsEventType(msg []byte) string {
	var m struct {
		Type string `json:"event_type"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return ""
	}
	return m.Type
}

func mustEncode(eventType string, event any) []byte {
	b, err := events.Encode(eventType, event)
	if err != nil {
		b, _ = events.Encode(eventType, nil)
	}
	return b
}

// loopEvent is kvmd's first event: its version as two numbers.
func loopEvent(version string) any {
	var v struct {
		Version struct {
			Major int `json:"major"`
			Minor int `json:"minor"`
		} `json:"version"`
	}
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) >= 2 {
		v.Version.Major, _ = strconv.Atoi(parts[0])
		v.Version.Minor, _ = strconv.Atoi(parts[1])
	}
	return v
}
