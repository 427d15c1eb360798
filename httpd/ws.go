package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
	d := s.cfg.Devices
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept wrote the answer (400 for a request that is no
		// WebSocket handshake, 403 for a cross-site Origin).
		return nil
	}
	c.SetReadLimit(wsReadLimit)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

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
