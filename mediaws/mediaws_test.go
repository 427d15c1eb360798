package mediaws_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/h264"
	"kvmd/h264/ffmpeg"
	"kvmd/h264/h264test"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
	"kvmd/mediaws"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		binary bool
		msg    string
		want   mediaws.Kind
	}{
		{true, "\x00", mediaws.Ping},
		{true, "\x00\x01", mediaws.Ping},
		{true, "\x01", mediaws.Key},
		{true, "\x02", mediaws.Unknown},
		{true, "", mediaws.Unknown},
		{false, `{"event_type":"start","event":{"type":"video","format":"h264"}}`, mediaws.Start},
		{false, `{"event_type":"start","event":{"type":"video","format":"jpeg"}}`, mediaws.Unknown},
		{false, `{"event_type":"start","event":{"type":"audio","format":"h264"}}`, mediaws.Unknown},
		{false, `{"event_type":"ping","event":{}}`, mediaws.Unknown},
		{false, `[1,2]`, mediaws.Unknown},
		{false, `not json`, mediaws.Unknown},
	} {
		if got := mediaws.Parse(tc.binary, []byte(tc.msg)); got != tc.want {
			t.Errorf("Parse(%v, %q) = %v, want %v", tc.binary, tc.msg, got, tc.want)
		}
	}
}

// FuzzParse: no message makes Parse panic.
func FuzzParse(f *testing.F) {
	f.Add(true, []byte{1})
	f.Add(false, []byte(`{"event_type":"start","event":{"type":"video","format":"h264"}}`))
	f.Fuzz(func(t *testing.T, binary bool, msg []byte) { mediaws.Parse(binary, msg) })
}

// server serves Serve over real WebSockets, with the pipeline of real
// ffmpeg on generated pictures.
func server(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	path := testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	p := h264.New(h264.Config{Opener: ffmpeg.NewOpener(path, testutil.Logger(t)), Source: h264test.NewSource(320, 240),
		Bitrate: 1000, ShutdownDelay: 100 * time.Millisecond, Log: testutil.Logger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		mediaws.Serve(r.Context(), mediaws.WebSocket(c, 5*time.Second), p, r.URL.Query().Get("video") == "h264", testutil.Logger(t))
	}))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv, path
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(url, "http", "ws", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(16 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func read(t *testing.T, c *websocket.Conn) (websocket.MessageType, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return typ, msg
}

// TestPageMode speaks as PiKVM's page does: the media event first, then
// after "start" pictures of byte 1, the key byte and H.264, the first a
// key frame; pings answered with 255; the pictures decode into the
// colour bars.
func TestPageMode(t *testing.T) {
	srv, path := server(t)
	c := dial(t, srv.URL)
	typ, msg := read(t, c)
	var ev struct {
		EventType string         `json:"event_type"`
		Event     map[string]any `json:"event"`
	}
	if typ != websocket.MessageText || json.Unmarshal(msg, &ev) != nil || ev.EventType != "media" {
		t.Fatalf("first message %q", msg)
	}
	if got, _ := json.Marshal(ev.Event); string(got) != `{"video":{"h264":{"profile_level_id":"42E01F"}}}` {
		t.Errorf("media event %s", got)
	}
	ctx := context.Background()
	c.Write(ctx, websocket.MessageBinary, []byte{0})
	if typ, msg := read(t, c); typ != websocket.MessageBinary || string(msg) != "\xff" {
		t.Errorf("pong %v %q", typ, msg)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"start","event":{"type":"video","format":"h264"}}`))
	var stream []byte
	for i := range 20 {
		typ, msg := read(t, c)
		if typ != websocket.MessageBinary || len(msg) < 3 || msg[0] != 1 || msg[1] > 1 {
			t.Fatalf("picture %d: %v %x", i, typ, msg[:min(len(msg), 4)])
		}
		if i == 0 && msg[1] != 1 {
			t.Error("the first picture is not a key frame")
		}
		if key := h264.HasType(msg[2:], h264.NALIDR); key != (msg[1] == 1) {
			t.Errorf("picture %d: key byte %d, IDR %v", i, msg[1], key)
		}
		stream = append(stream, msg[2:]...)
	}
	pics, err := h264test.Decode(path, stream)
	if err != nil || len(pics) != 20 {
		t.Fatalf("decoded %d pictures: %v", len(pics), err)
	}
	if _, err := colorbars.Check(pics[19], [4]float64{0, 0, 320, 240}, 0.3); err != nil {
		t.Error(err)
	}
}

// TestPureMode: ?video=h264 sends raw H.264 at once, the first a key
// frame, no event; a key request brings a key frame; a ping has no
// answer.
func TestPureMode(t *testing.T) {
	srv, _ := server(t)
	c := dial(t, srv.URL+"?video=h264")
	typ, msg := read(t, c)
	if typ != websocket.MessageBinary || !h264.HasType(msg, h264.NALIDR) || !h264.HasType(msg, h264.NALSPS) {
		t.Fatalf("first message %v of %d bytes: not a key frame with its SPS", typ, len(msg))
	}
	time.Sleep(600 * time.Millisecond)
	ctx := context.Background()
	c.Write(ctx, websocket.MessageBinary, []byte{0})
	c.Write(ctx, websocket.MessageBinary, []byte{1})
	key := false
	for range 60 {
		_, msg := read(t, c)
		if len(msg) == 1 {
			t.Fatalf("a one-byte message %x in the pure mode", msg)
		}
		if h264.HasType(msg, h264.NALIDR) {
			key = true
			break
		}
	}
	if !key {
		t.Error("no key frame after the key request")
	}
}
