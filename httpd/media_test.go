package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/h264"
	"kvmd/h264/ffmpeg"
	"kvmd/h264/h264test"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
	"kvmd/whep"
	"kvmd/whep/wheptest"
)

// mediaEnv is a server with the H.264 of a real ffmpeg, on generated
// pictures, and WebRTC with at most maxPeers peers.
type mediaEnv struct {
	*env
	ffmpeg string
	p      *h264.Pipeline
	m      *whep.Manager
}

func newMediaEnv(t *testing.T, maxPeers int) *mediaEnv {
	t.Helper()
	path := testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	p := h264.New(h264.Config{Opener: ffmpeg.NewOpener(path, nil), Source: h264test.NewSource(320, 240),
		Bitrate: 1000, ShutdownDelay: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	m, err := whep.New(whep.Config{Source: p, MaxPeers: maxPeers})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := testDevices(t)
	d.H264, d.WebRTC = p, m
	e := &mediaEnv{env: newEnv(t, envOpts{devices: d}), ffmpeg: path, p: p, m: m}
	t.Cleanup(func() {
		m.Close()
		cancel()
		<-done
	})
	return e
}

func (e *mediaEnv) dialMedia(t *testing.T, query string, hdr map[string]string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	c, resp, err := websocket.Dial(ctx, strings.Replace(e.base, "http", "ws", 1)+"/api/media/ws"+query, &websocket.DialOptions{HTTPHeader: h})
	if err == nil {
		c.SetReadLimit(16 << 20)
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

// TestMediaInfo: GET /api/media is kvmd-media's root: the formats.
func TestMediaInfo(t *testing.T) {
	e := newMediaEnv(t, 2)
	r := e.req("GET", "/api/media", xhdr("viewer", "viewer pass"), "")
	if r.status != 200 || !strings.Contains(string(r.body), `{"media":{"video":{"h264":{"profile_level_id":"42E01F"}}}}`) {
		t.Errorf("GET /api/media: %d %s", r.status, r.body)
	}
}

// TestMediaWS: a viewer speaks PiKVM's page's protocol over the daemon's
// /api/media/ws and gets pictures of the colour bars; a video format
// other than h264 is refused, as kvmd refuses it.
func TestMediaWS(t *testing.T) {
	e := newMediaEnv(t, 2)
	if _, resp, err := e.dialMedia(t, "?video=vp8", xhdr("viewer", "viewer pass")); err == nil || resp == nil || resp.StatusCode != 400 {
		t.Errorf("video=vp8: %v %v, want 400", resp, err)
	}
	if _, resp, err := e.dialMedia(t, "", nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("no credentials: %v, want 401", err)
	}
	c, _, err := e.dialMedia(t, "", xhdr("viewer", "viewer pass"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, msg, err := c.Read(ctx)
	var ev struct {
		EventType string `json:"event_type"`
	}
	if err != nil || json.Unmarshal(msg, &ev) != nil || ev.EventType != "media" {
		t.Fatalf("first message %q: %v", msg, err)
	}
	c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"start","event":{"type":"video","format":"h264"}}`))
	var stream []byte
	for i := range 10 {
		typ, msg, err := c.Read(ctx)
		if err != nil || typ != websocket.MessageBinary || len(msg) < 2 || msg[0] != 1 {
			t.Fatalf("picture %d: %v %v", i, typ, err)
		}
		if i == 0 && msg[1] != 1 {
			t.Error("the first picture is not a key frame")
		}
		stream = append(stream, msg[2:]...)
	}
	pics, err := h264test.Decode(e.ffmpeg, stream)
	if err != nil || len(pics) != 10 {
		t.Fatalf("decoded %d: %v", len(pics), err)
	}
	if _, err := colorbars.Check(pics[9], [4]float64{0, 0, 320, 240}, 0.3); err != nil {
		t.Error(err)
	}
}

func (e *mediaEnv) post(hdr map[string]string) wheptest.Signal {
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	return wheptest.Post(http.DefaultClient, e.base+"/api/media/whep", h)
}

func (e *mediaEnv) dialWHEP(t *testing.T, hdr map[string]string) (*wheptest.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := wheptest.Dial(ctx, e.post(hdr))
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestWHEP: a viewer's WHEP offer through the daemon: 201 with the
// answer and a Location, pictures of the colour bars; a PATCH (trickle)
// is 405; another user's DELETE is 404, the owner's 200, a second 404.
func TestWHEP(t *testing.T) {
	e := newMediaEnv(t, 4)
	viewer := xhdr("viewer", "viewer pass")
	c, err := e.dialWHEP(t, viewer)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Location, "/api/media/whep?id=") {
		t.Errorf("Location %q", c.Location)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stream []byte
	for range 10 {
		u, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, u.Data...)
	}
	pics, err := h264test.Decode(e.ffmpeg, stream)
	if err != nil || len(pics) != 10 {
		t.Fatalf("decoded %d: %v", len(pics), err)
	}
	if _, err := colorbars.Check(pics[9], [4]float64{0, 0, 320, 240}, 0.3); err != nil {
		t.Error(err)
	}
	if r := e.req("PATCH", c.Location, viewer, "a=candidate:1 1 udp 1 127.0.0.1 9 typ host"); r.status != 405 || r.header.Get("Allow") != "POST, DELETE" {
		t.Errorf("PATCH: %d Allow %q, want 405 POST, DELETE", r.status, r.header.Get("Allow"))
	}
	if r := e.req("DELETE", c.Location, xhdr("operator", "operator-pass"), ""); r.status != 404 {
		t.Errorf("another user's DELETE: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", c.Location, viewer, ""); r.status != 200 {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if e.m.Peers() != 0 {
		t.Errorf("%d peers after DELETE", e.m.Peers())
	}
	if r := e.req("DELETE", c.Location, viewer, ""); r.status != 404 || r.errName != "NotFoundError" {
		t.Errorf("second DELETE: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/media/whep", viewer, ""); r.status != 400 {
		t.Errorf("DELETE without id: %d %s", r.status, r.body)
	}
}

// TestWHEPBadOffers: each bad offer is a clear 4xx in kvmd's envelope,
// and none leaves a peer behind.
func TestWHEPBadOffers(t *testing.T) {
	e := newMediaEnv(t, 4)
	viewer := xhdr("viewer", "viewer pass")
	sdp := func() map[string]string {
		h := xhdr("viewer", "viewer pass")
		h["Content-Type"] = "application/sdp"
		return h
	}
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   string
		status int
		errN   string
	}{
		{"no credentials", map[string]string{"Content-Type": "application/sdp"}, "v=0\r\n", 401, "UnauthorizedError"},
		{"not SDP's type", viewer, "v=0\r\n", 415, "BadRequestError"},
		{"not SDP", sdp(), "hello", 400, "ValidatorError"},
		{"VP8 only", sdp(), vp8Offer, 400, "ValidatorError"},
		{"too large", sdp(), strings.Repeat("a=x\r\n", 20000), 413, "RequestTooLargeError"},
	} {
		r := e.req("POST", "/api/media/whep", tc.hdr, tc.body)
		if r.status != tc.status || r.errName != tc.errN {
			t.Errorf("%s: %d %s %s, want %d %s", tc.name, r.status, r.errName, r.errMsg, tc.status, tc.errN)
		}
	}
	if e.m.Peers() != 0 {
		t.Errorf("%d peers after bad offers", e.m.Peers())
	}
}

// vp8Offer is a browser's offer of VP8 only (Chromium's, its other
// codecs and candidates removed).
const vp8Offer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0\r\n" +
	"m=video 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=recvonly\r\na=rtcp-mux\r\n" +
	"a=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=setup:actpass\r\n" +
	"a=fingerprint:sha-256 00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\r\n" +
	"a=rtpmap:96 VP8/90000\r\n"

// TestWHEPShares: one user holds at most half of the peers; past that
// its offer is 429, and an admin still gets one of the places kept for
// admins; past MaxPeers, 503.
func TestWHEPShares(t *testing.T) {
	e := newMediaEnv(t, 2) // a user's share: 1; kept for admins: 1
	viewer := xhdr("viewer", "viewer pass")
	if _, err := e.dialWHEP(t, viewer); err != nil {
		t.Fatal(err)
	}
	_, err := e.dialWHEP(t, viewer)
	var se *wheptest.StatusError
	if !errors.As(err, &se) || se.Status != 429 {
		t.Errorf("the viewer's second peer: %v, want 429", err)
	}
	if _, err := e.dialWHEP(t, xhdr("admin", "admin-pass")); err != nil {
		t.Errorf("the admin's peer: %v", err)
	}
	_, err = e.dialWHEP(t, xhdr("colon", "pa:ss:word"))
	if !errors.As(err, &se) || se.Status != 503 {
		t.Errorf("a third peer of two: %v, want 503", err)
	}
}

// TestWHEPSessionEnds: a WebRTC peer made with a session's cookie ends
// when the session is logged out, and its place is free again.
func TestWHEPSessionEnds(t *testing.T) {
	e := newMediaEnv(t, 4)
	tok := e.login("viewer", "viewer pass")
	if _, err := e.dialWHEP(t, map[string]string{"Cookie": "auth_token=" + tok}); err != nil {
		t.Fatal(err)
	}
	if e.m.Peers() != 1 {
		t.Fatalf("%d peers", e.m.Peers())
	}
	if r := e.req("POST", "/api/auth/logout", map[string]string{"Cookie": "auth_token=" + tok}, ""); r.status != 200 {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	testutil.WaitFor(t, 5*time.Second, "the peer to end with its session", func() bool { return e.m.Peers() == 0 })
}
