package httpd

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/streamer"
	"kvmd/streamer/streamertest"
	"kvmd/subsystem"
)

// streamerEnv is a server whose devices have a real Streamer running fake
// ustreamers (streamertest) that serve src at w x h.
type streamerEnv struct {
	*env
	st *streamer.Streamer
	l  *streamertest.Launcher
}

func newStreamerEnv(t *testing.T, kind string, w, h int, src streamertest.Source, tweak func(*Devices)) *streamerEnv {
	t.Helper()
	return newStreamerEnvWith(t, kind, w, h, src, tweak, envOpts{})
}

// newStreamerEnvWith is newStreamerEnv with the env's options o (its
// devices are the streamer's).
func newStreamerEnvWith(t *testing.T, kind string, w, h int, src streamertest.Source, tweak func(*Devices), o envOpts) *streamerEnv {
	t.Helper()
	d, _ := testDevices(t)
	l := &streamertest.Launcher{Width: w, Height: h, Source: src}
	if o.launcher != nil {
		o.launcher(l)
	}
	dir, err := os.MkdirTemp("", "kvst")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	st := streamer.New(streamer.Config{
		Launcher: l, Dir: dir, StatePoll: 50 * time.Millisecond, ResetDelay: time.Millisecond,
		ShutdownDelay: 200 * time.Millisecond,
		Video:         streamertest.Video{Device: streamer.Capture{Device: "/dev/video0", Kind: kind}},
	})
	// The streamer and its subsystems, as the daemon registers and runs
	// them: "streamer" in place of the fake, "clients" last.
	subs := []subsystem.Subsystem{subsystem.Of[map[string]any](streamer.Subsystem{S: st}), subsystem.Of[streamer.Clients](streamer.ClientsSubsystem{S: st})}
	for i, sub := range d.Subsystems {
		switch sub.Name() {
		case "streamer":
			d.Subsystems[i] = subs[0]
		case "clients":
			d.Subsystems[i] = subs[1]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { st.Run(ctx) })
	for _, sub := range subs {
		wg.Go(func() { subsystem.Watch(ctx, sub, d.Events) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	d.Streamer = st
	if tweak != nil {
		tweak(d)
	}
	o.devices = d
	return &streamerEnv{env: newEnv(t, o), st: st, l: l}
}

// gradient is a picture whose left is black and right white.
func gradient(_ time.Time, w, h int) image.Image {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.SetGray(x, y, color.Gray{uint8(x * 255 / w)})
		}
	}
	return img
}

// noise is a picture JPEG cannot shrink much: big frames, to fill
// buffers fast.
func noise(_ time.Time, w, h int) image.Image {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(rand.Uint32())
	}
	return img
}

// get sends an authenticated GET and returns the whole answer.
func (e *env) getJPEG(t *testing.T, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

var admin = map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}

func TestStreamerAPI(t *testing.T) {
	e := newStreamerEnv(t, hw.CaptureVivid, 1280, 720, gradient, nil)
	r := e.req("GET", "/api/streamer", admin, "")
	var st struct {
		Result struct {
			Features map[string]bool `json:"features"`
			Limits   map[string]any  `json:"limits"`
			Params   map[string]any  `json:"params"`
			Applied  map[string]any  `json:"applied"`
			Streamer *struct{}       `json:"streamer"`
			Snapshot struct {
				Saved *struct{} `json:"saved"`
			} `json:"snapshot"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &st); err != nil || r.status != 200 {
		t.Fatalf("GET /api/streamer: %d %s", r.status, r.body)
	}
	if !st.Result.Features["quality"] || st.Result.Params["quality"] != 80.0 || st.Result.Streamer != nil || st.Result.Limits["desired_fps"] == nil {
		t.Errorf("state %s", r.body)
	}

	// A snapshot starts the streamer; its headers come with it.
	resp, body := e.getJPEG(t, "/api/streamer/snapshot", admin)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("snapshot: %d %s %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if cfg, err := jpeg.DecodeConfig(bytes.NewReader(body)); err != nil || cfg.Width != 1280 || cfg.Height != 720 {
		t.Errorf("snapshot %+v %v", cfg, err)
	}
	if resp.Header.Get("X-UStreamer-Online") != "true" || resp.Header.Get("X-UStreamer-Width") != "1280" || resp.Header.Get("X-Timestamp") == "" {
		t.Errorf("snapshot headers %v", resp.Header)
	}
	resp, body = e.getJPEG(t, "/api/streamer/snapshot?preview=1&preview_max_width=320&preview_quality=50", admin)
	if cfg, err := jpeg.DecodeConfig(bytes.NewReader(body)); resp.StatusCode != 200 || err != nil || cfg.Width != 320 || cfg.Height != 180 {
		t.Errorf("preview: %d %+v %v", resp.StatusCode, cfg, err)
	}

	for _, tc := range []struct {
		method, path string
		status       int
		name         string
	}{
		{"GET", "/api/streamer/snapshot?allow_offline=maybe", 400, "ValidatorError"},
		{"GET", "/api/streamer/snapshot?preview=1&preview_quality=0", 400, "ValidatorError"},
		{"GET", "/api/streamer/snapshot?preview=1&preview_max_width=-5", 400, "ValidatorError"},
		{"GET", "/api/streamer/snapshot?load=1", 503, "UnavailableError"},
		{"GET", "/api/streamer/snapshot?ocr=1", 503, "UnavailableError"},
		{"POST", "/api/streamer/set_params?quality=101", 400, "ValidatorError"},
		{"POST", "/api/streamer/set_params?desired_fps=abc", 400, "ValidatorError"},
		{"POST", "/api/streamer/set_params?resolution=800x600", 400, "StreamerResolutionNotSupported"},
		{"POST", "/api/streamer/set_params?h264_bitrate=5000", 400, "StreamerH264NotSupported"},
		{"POST", "/api/streamer/set_params?quality=60&desired_fps=20", 200, ""},
		{"POST", "/api/streamer/reset", 200, ""},
		{"DELETE", "/api/streamer/snapshot", 200, ""},
		{"GET", "/api/streamer/ocr", 503, "UnavailableError"},
	} {
		r := e.req(tc.method, tc.path, admin, "")
		if r.status != tc.status || r.errName != tc.name {
			t.Errorf("%s %s: %d %s %q, want %d %s", tc.method, tc.path, r.status, r.errName, r.errMsg, tc.status, tc.name)
		}
	}
	// A viewer may look, not change.
	viewer := map[string]string{"X-KVMD-User": "viewer", "X-KVMD-Passwd": "viewer pass"}
	if r := e.req("POST", "/api/streamer/set_params?quality=50", viewer, ""); r.status != 403 {
		t.Errorf("set_params as a viewer: %d", r.status)
	}
	// A snapshot right after the reset (PiKVM's page takes one) waits for
	// the new streamer, started with the new params, never takes it from
	// the one being stopped (it answered 503 about once in 30 runs).
	if resp, b := e.getJPEG(t, "/api/streamer/snapshot", viewer); resp.StatusCode != 200 {
		t.Errorf("snapshot as a viewer: %d %s", resp.StatusCode, b)
	}
	procs := e.l.Procs()
	if args := strings.Join(procs[len(procs)-1].Args, " "); !strings.Contains(args, "--quality=60") || !strings.Contains(args, "--desired-fps=20") {
		t.Errorf("the streamer after the reset: %s", args)
	}
	// The state has the params (applied, as kvmd's, is the params
	// where no streamer says otherwise).
	eventually(t, "applied quality 60", func() bool {
		r := e.req("GET", "/api/streamer", admin, "")
		return strings.Contains(string(r.body), `"applied":{"desired_fps":20,"quality":60}`)
	})
	// save, then load gives the same picture.
	_, saved := e.getJPEG(t, "/api/streamer/snapshot?save=1", admin)
	_, loaded := e.getJPEG(t, "/api/streamer/snapshot?load=1", admin)
	if !bytes.Equal(saved, loaded) || len(saved) == 0 {
		t.Error("load did not give the saved snapshot")
	}
	if r := e.req("GET", "/api/streamer", admin, ""); !strings.Contains(string(r.body), `"saved":{"height":720,"online":true,"width":1280}`) {
		t.Errorf("no saved snapshot in the state: %s", r.body)
	}
}

// frameReader reads ustreamer's multipart stream.
type frameReader struct {
	mr *multipart.Reader
}

func newFrameReader(t *testing.T, resp *http.Response) *frameReader {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/x-mixed-replace" || params["boundary"] != "boundarydonotcross" {
		t.Fatalf("stream type %q: %v", resp.Header.Get("Content-Type"), err)
	}
	return &frameReader{mr: multipart.NewReader(resp.Body, params["boundary"])}
}

func (f *frameReader) next() ([]byte, textproto, error) {
	p, err := f.mr.NextPart()
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(p)
	return b, textproto(p.Header), err
}

type textproto map[string][]string

func (e *env) openStream(t *testing.T, ctx context.Context, query string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+"/streamer/stream"+query, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestStreamProxy: /streamer/stream relays ustreamer's stream behind the
// API's authentication, with the cookie PiKVM's page needs; the JPEGs
// come whole; the streamer stops after the last client.
func TestStreamProxy(t *testing.T) {
	e := newStreamerEnv(t, hw.CaptureVivid, 640, 360, gradient, nil)
	for _, hdr := range []map[string]string{nil, {"X-KVMD-User": "admin", "X-KVMD-Passwd": "wrong"}} {
		resp, _ := e.getJPEG(t, "/streamer/stream", hdr)
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("stream with %v: %d", hdr, resp.StatusCode)
		}
	}
	if resp, _ := e.getJPEG(t, "/api/streamer/stream", admin); resp.StatusCode != 404 {
		t.Errorf("/api/streamer/stream: %d, want 404: the stream is not in the API", resp.StatusCode)
	}
	creds := map[string]map[string]string{
		"headers": admin,
		"basic":   {"Authorization": basic("viewer", "viewer pass")},
		"cookie":  cookie(e.login("viewer", "viewer pass")),
		"token":   bearer(e.mkToken(t, admin, `{"name":"stream"}`)),
	}
	for how, hdr := range creds {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := e.openStream(t, ctx, "?key=abc&extra_headers=1", hdr)
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if c := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(c, "stream_client=abc/") {
				t.Errorf("Set-Cookie %q", c)
			}
			fr := newFrameReader(t, resp)
			for range 3 {
				b, h, err := fr.next()
				if err != nil {
					t.Fatal(err)
				}
				if cfg, err := jpeg.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width != 640 {
					t.Fatalf("frame %+v %v", cfg, err)
				}
				if h["X-Ustreamer-Online"][0] != "true" {
					t.Errorf("extra_headers not passed on: %v", h)
				}
			}
		})
	}
	eventually(t, "the streamer stopped after the last client", func() bool { return e.st.Running() == 0 })

	// The raw snapshot: ustreamer's own answer.
	resp, body := e.getJPEG(t, "/streamer/snapshot", map[string]string{"Authorization": basic("viewer", "viewer pass")})
	if cfg, err := jpeg.DecodeConfig(bytes.NewReader(body)); resp.StatusCode != 200 || err != nil || cfg.Width != 640 {
		t.Errorf("/streamer/snapshot: %d %+v %v", resp.StatusCode, cfg, err)
	}
	if resp, _ := e.getJPEG(t, "/streamer/snapshot", nil); resp.StatusCode != 401 {
		t.Errorf("/streamer/snapshot without credentials: %d", resp.StatusCode)
	}
	// The session that opened a stream ends: so does the stream.
	tok := e.login("admin", "admin-pass")
	resp = e.openStream(t, context.Background(), "", cookie(tok))
	fr := newFrameReader(t, resp)
	if _, _, err := fr.next(); err != nil {
		t.Fatal(err)
	}
	e.req("POST", "/api/auth/logout", cookie(tok), "")
	done := make(chan error, 1)
	go func() {
		for {
			if _, _, err := fr.next(); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the stream went on after its session ended")
	}
}

// TestStreamStalledClient: a client that stops reading does not slow
// another, and is cut after the write timeout, its connection to the
// streamer closed.
func TestStreamStalledClient(t *testing.T) {
	e := newStreamerEnv(t, hw.CaptureVivid, 640, 480, noise, func(d *Devices) { d.StreamWriteTimeout = 500 * time.Millisecond })
	rate := func(d time.Duration) int {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fr := newFrameReader(t, e.openStream(t, ctx, "", admin))
		fr.next() // the first frame after the start
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); n++ {
			if _, _, err := fr.next(); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	alone := rate(2 * time.Second)

	// A client that reads the headers and then nothing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled := e.openStream(t, ctx, "", admin)
	if stalled.StatusCode != 200 {
		t.Fatal(stalled.StatusCode)
	}
	time.Sleep(300 * time.Millisecond) // its buffers fill
	with := rate(2 * time.Second)
	t.Logf("frames in 2 s: alone %d, beside a stalled client %d", alone, with)
	if alone < 10 || with < alone*6/10 {
		t.Errorf("frames in 2 s: alone %d, beside a stalled client %d", alone, with)
	}
	// Cut after the timeout: the streamer sees its connection go.
	eventually(t, "the stalled client's upstream closed", func() bool {
		procs := e.l.Procs()
		return procs[len(procs)-1].Clients() == 0
	})
}

// TestWSStreamClients: a WebSocket client with stream=1 (kvmd's default)
// holds the streamer and is counted in "clients"; stream=0 does neither.
func TestWSStreamClients(t *testing.T) {
	e := newStreamerEnv(t, hw.CaptureVivid, 320, 240, gradient, nil)
	quiet := dialWS(t, e.env, "?stream=0", adminHeader)
	for range wsGreetingLen {
		readEvent(t, quiet)
	}
	time.Sleep(100 * time.Millisecond)
	if e.st.Running() != 0 || e.st.Viewers() != 0 {
		t.Fatalf("stream=0 started the streamer (%d) or counted (%d)", e.st.Running(), e.st.Viewers())
	}
	c := dialWS(t, e.env, "", adminHeader)
	var got []string
	for range wsGreetingLen {
		ev := readEvent(t, c)
		got = append(got, ev.Type)
		if ev.Type == "clients" && string(ev.Event) != `{"count":1}` {
			t.Errorf("clients %s", ev.Event)
		}
		if ev.Type == "streamer" && !strings.Contains(string(ev.Event), `"features":{"quality":true`) {
			t.Errorf("the first streamer event is not whole: %s", ev.Event)
		}
	}
	if want := "loop gpio hid atx msd streamer clients"; strings.Join(got, " ") != want {
		t.Errorf("greeting %q", strings.Join(got, " "))
	}
	// The stream=0 client hears of the new one, and of the streamer's start.
	readUntil(t, quiet, "clients", func(ev json.RawMessage) bool { return string(ev) == `{"count":1}` })
	readUntil(t, quiet, "streamer", func(ev json.RawMessage) bool {
		return strings.Contains(string(ev), `"streamer":{"encoder"`) && !strings.Contains(string(ev), `"features"`)
	})
	c.Close(1000, "")
	readUntil(t, quiet, "clients", func(ev json.RawMessage) bool { return string(ev) == `{"count":0}` })
	eventually(t, "stopped after the viewer left", func() bool { return e.st.Running() == 0 })
	readUntil(t, quiet, "streamer", func(ev json.RawMessage) bool { return strings.Contains(string(ev), `"streamer":null`) })
}
