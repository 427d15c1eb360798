package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"kvmd/events"
	"kvmd/hid"
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
	stream, err := queryBool(r, "stream", true)
	if err != nil {
		return err
	}
	if err := s.checkHandshake(r); err != nil {
		return err
	}
	release, err := s.holdStream(w, r, &s.wsKind)
	if err != nil {
		return err
	}
	defer release()
	d := s.cfg.Devices
	// The origin was checked above, with a JSON answer; Accept's own
	// check would answer in plain text.
	c, err := websocket.Accept(w, asHTTP11(r), &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		// Accept wrote its answer: only for what checkHandshake lets
		// through, such as a connection that cannot be hijacked.
		return nil
	}
	c.SetReadLimit(wsReadLimit)
	ctx := r.Context() // ends with the session, or when the server shuts down (BaseContext)

	sub := d.Events.Subscribe()
	defer d.Events.Unsubscribe(sub)
	// A client that wants the stream (kvmd's stream=1, the default) keeps
	// the streamer running while it is connected, as in kvmd, where the
	// web page's WebSocket starts it.
	if stream && d.Streamer != nil {
		defer d.Streamer.AddViewer()()
	}

	send := func(b []byte, typ websocket.MessageType) error {
		wctx, wcancel := context.WithTimeout(context.Background(), wsWriteTimeout)
		defer wcancel()
		return c.Write(wctx, typ, b)
	}
	closeWith := func(code websocket.StatusCode, why string) error {
		c.Close(code, why)
		return nil
	}

	// kvmd's greeting (server.py, __ws_handler): "loop", then each
	// subsystem's state, in the order of its list.
	initial := [][]byte{mustEncode("loop", loopEvent(d.Version))}
	for _, sub := range d.Subsystems {
		for _, ev := range sub.Greeting(ctx) {
			initial = append(initial, mustEncode(sub.Name(), ev))
		}
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
	id := IdentityFrom(ctx)
	in := wsInput{hid: d.HID, revoked: func() bool {
		// The identity's own context first: it ends at the change itself
		// (the request's follows it a moment later).
		return id.done != nil && id.done.Err() != nil || ctx.Err() != nil
	}}
	// Keys and buttons a client held when it left are released (kvmd
	// clears its HID when a WebSocket client goes).
	defer in.leave()
	go func() {
		for {
			typ, msg, err := c.Read(rctx)
			if err != nil {
				readErr <- err
				return
			}
			// The message's kind, and its row of the route table: a kind
			// without one is ignored, as kvmd ignores an event type it
			// has no handler for; one the client's role is below is
			// dropped.
			var kind string
			var event json.RawMessage
			switch typ {
			case websocket.MessageBinary:
				if len(msg) >= 1 && msg[0] == 0 {
					kind = "ping"
				} else {
					kind, _ = hid.BinaryEventType(msg)
				}
			case websocket.MessageText:
				var ok bool
				if kind, event, ok = parseWSEvent(msg); !ok {
					in.drop(hid.DropMalformed)
					continue
				}
			}
			rt := s.routes.wsKinds[kind]
			switch {
			case rt == nil:
			case id.Role < rt.role:
				in.drop(hid.DropForbidden)
			case kind == "ping":
				pong := []byte(`{"event_type":"pong","event":{}}`)
				if typ == websocket.MessageBinary {
					pong = []byte{255}
				}
				if err := send(pong, typ); err != nil {
					readErr <- err
					return
				}
			case typ == websocket.MessageBinary:
				in.binary(msg)
			default:
				in.text(kind, event)
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
// form of cross-site request forgery; see sameOrigin).
func (s *Server) checkHandshake(r *http.Request) error {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		return BadRequest("This is a WebSocket endpoint: the request must be a WebSocket handshake (Connection: Upgrade, Upgrade: websocket)", nil)
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" || r.Header.Get("Sec-WebSocket-Key") == "" {
		return BadRequest("Unsupported WebSocket handshake: Sec-WebSocket-Version 13 and a Sec-WebSocket-Key are needed", nil)
	}
	// No Origin (or an empty one) is no browser's: a script, whose
	// credentials are its own.
	if o := r.Header.Values("Origin"); len(o) > 1 || (len(o) == 1 && o[0] != "" && !s.sameOrigin(r, o[0])) {
		return &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Msg: "WebSocket handshake from another site refused"}
	}
	return nil
}

// asHTTP11 returns r as websocket.Accept takes it: a handshake of HTTP/1.1
// or later (RFC 6455 section 4.1). PiKVM's nginx sends its clients'
// handshakes on as HTTP/1.0 (its configs/nginx set no
// proxy_http_version), and kvmd, on aiohttp, accepts them: so does this
// daemon. The reply's status line is then HTTP/1.0's, which nginx takes.
func asHTTP11(r *http.Request) *http.Request {
	if r.ProtoAtLeast(1, 1) {
		return r
	}
	r2 := *r
	r2.Proto, r2.ProtoMajor, r2.ProtoMinor = "HTTP/1.1", 1, 1
	return &r2
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

// parseWSEvent reads kvmd's envelope of a client's text message
// (kvmd/htserver.py parse_ws_event): an object with a string event_type
// and an object event; ok is false otherwise.
func parseWSEvent(msg []byte) (eventType string, event json.RawMessage, ok bool) {
	var m struct {
		Type  *string         `json:"event_type"`
		Event json.RawMessage `json:"event"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Type == nil {
		return "", nil, false
	}
	ev := bytes.TrimSpace(m.Event)
	if len(ev) == 0 || ev[0] != '{' {
		return "", nil, false
	}
	return *m.Type, ev, true
}

// wsInput is one WebSocket client's keyboard and mouse input, of the
// kinds its role may send (the route table's WS rows): it reaches the
// HID; a malformed message is dropped (the socket stays open, as kvmd's
// does); drops are counted.
// Once the identity that opened the socket is revoked (its session or
// token ended, its user removed or given another role: revoked), nothing
// more reaches the HID, from that moment and not only once the socket has
// closed.
type wsInput struct {
	hid     HID
	revoked func() bool
	mu      sync.Mutex // the reader applies, the handler leaves
	sent    bool
	left    bool
}

func (in *wsInput) drop(r hid.DropReason) {
	if in.hid != nil {
		in.hid.Dropped(r)
	}
}

func (in *wsInput) apply(ev hid.Event, err error) {
	switch {
	case in.hid == nil:
	case in.revoked != nil && in.revoked():
		in.drop(hid.DropForbidden)
	case err != nil:
		in.drop(hid.DropMalformed)
	default:
		in.mu.Lock()
		defer in.mu.Unlock()
		if !in.left && (in.revoked == nil || !in.revoked()) {
			in.hid.Apply(ev)
			in.sent = true
		}
	}
}

func (in *wsInput) text(eventType string, event json.RawMessage) {
	in.apply(hid.ParseJSON(eventType, event))
}

func (in *wsInput) binary(msg []byte) { in.apply(hid.ParseBinary(msg)) }

// leave releases what the client may hold; input read after it is
// dropped.
func (in *wsInput) leave() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.left = true
	if in.sent {
		in.hid.ReleaseAll()
	}
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
