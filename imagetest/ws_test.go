package imagetest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsEvent is one event of /api/ws, and when it came.
type wsEvent struct {
	Type  string          `json:"event_type"`
	Event json.RawMessage `json:"event"`
	at    time.Time
}

// wsClient is an /api/ws client reading events as they come.
type wsClient struct {
	c      *websocket.Conn
	events chan wsEvent
	cancel context.CancelFunc
}

// dialWS connects to /api/ws as admin through the forwarded port, with
// stream=0: a client of kvmd's default (stream=1) keeps the streamer
// running, whose encoder takes all the emulated CPU there is.
func (s *system) dialWS(t *testing.T) *wsClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := s.dialWebSocket(t, ctx, "/api/ws?stream=0")
	c.SetReadLimit(1 << 20)
	w := &wsClient{c: c, events: make(chan wsEvent, 1000), cancel: cancel}
	go func() {
		defer close(w.events)
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			e := wsEvent{at: time.Now()}
			if json.Unmarshal(b, &e) == nil {
				w.events <- e
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *wsClient) close() {
	w.c.Close(websocket.StatusNormalClosure, "")
	w.cancel()
}

// drain takes what came so far.
func (w *wsClient) drain() []wsEvent {
	var out []wsEvent
	for {
		select {
		case e, ok := <-w.events:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

// next waits up to d for an event of type typ for which match holds.
func (w *wsClient) next(typ string, d time.Duration, match func(json.RawMessage) bool) (wsEvent, bool) {
	deadline := time.After(d)
	for {
		select {
		case e, ok := <-w.events:
			if !ok {
				return wsEvent{}, false
			}
			if e.Type == typ && match(e.Event) {
				return e, true
			}
		case <-deadline:
			return wsEvent{}, false
		}
	}
}

// dialWebSocket opens a WebSocket of path as admin through the forwarded
// port, the device's certificate checked; ctx bounds its life.
func (s *system) dialWebSocket(t *testing.T, ctx context.Context, path string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{}
	for k, v := range s.creds(t) {
		hdr.Set(k, v)
	}
	hc := *s.c.hc
	hc.Timeout = 0
	c, resp, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(s.c.base, "https")+path, &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("%s: %v %v", path, resp, err)
	}
	return c
}
