package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/h264"
	"kvmd/h264/h264test"
	"kvmd/internal/testutil"
	"kvmd/whep/wheptest"
)

// postAs sends POST path as admin and returns the status and body.
func postAs(t *testing.T, addr, path, passwd string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+addr+path, nil)
	req.SetBasicAuth("admin", passwd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// h264State is what the tests read of /api/streamer.
type h264State struct {
	Result struct {
		Features map[string]bool `json:"features"`
		Params   map[string]any  `json:"params"`
		Applied  map[string]any  `json:"applied"`
		Streamer *struct {
			H264 *struct {
				Bitrate, GOP int
				Online       bool
			} `json:"h264"`
		} `json:"streamer"`
		H264 *struct {
			Encoder string `json:"encoder"`
			Running bool   `json:"running"`
			Clients int    `json:"clients"`
			Error   any    `json:"error"`
		} `json:"h264"`
	} `json:"result"`
}

func streamerState(t *testing.T, addr, passwd string) h264State {
	t.Helper()
	_, body := getAs(t, addr, "/api/streamer", passwd)
	var st h264State
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("/api/streamer: %v: %s", err, body)
	}
	return st
}

// ffmpegPids are the ffmpeg processes whose command line is an encoder's
// of this daemon's (reading Matroska on its input).
func ffmpegPids(t *testing.T) []string {
	t.Helper()
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "ffmpeg") && strings.Contains(string(b), "matroska\x00-i\x00pipe:0") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestServeH264 runs kvmd serve with Debian's ustreamer and ffmpeg on a
// Raspberry Pi 4's tree (no capture device here: ustreamer serves its
// "NO SIGNAL" picture): a Direct H.264 client gets H.264 of that picture,
// 640x480, decoded by ffmpeg; a WHEP peer too; the state has kvmd's
// h264 params and ustreamer 6's "h264" while the encoder runs; set_params
// changes the bitrate (the encoder is replaced) and refuses what kvmd
// refuses; ffmpeg ends after the last client, and there is never more
// than one.
func TestServeH264(t *testing.T) {
	ustreamer := testutil.NeedTool(t, "ustreamer", "ustreamer")
	ffmpegPath := testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	root, sockDir := rpi4Root(t), sockDir(t)
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", ustreamer, "--streamer-dir", sockDir, "--streamer-shutdown-delay", "1s", "--h264-ffmpeg", ffmpegPath)
	d.stderr.wait(t, `H.264 encoder: software`)
	d.stderr.wait(t, `kvmd listening`)

	st := streamerState(t, addr, "pw")
	if !st.Result.Features["h264"] || st.Result.Params["h264_bitrate"] != 5000.0 || st.Result.Params["h264_gop"] != 60.0 ||
		st.Result.H264 == nil || st.Result.H264.Encoder != "libx264 (ffmpeg)" || st.Result.H264.Running {
		t.Errorf("state before a client: %+v", st.Result)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hdr := http.Header{"Authorization": {"Basic " + basicAuth("admin", "pw")["Authorization"][len("Basic "):]}}
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/api/media/ws?video=h264", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	var stream []byte
	for i := range 3 {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
		if i == 0 && !h264.HasType(msg, h264.NALIDR) {
			t.Error("the first unit is not a key frame")
		}
		stream = append(stream, msg...)
	}
	pics, err := h264test.Decode(ffmpegPath, stream)
	if err != nil || len(pics) != 3 || pics[0].Bounds().Dx() != 640 || pics[0].Bounds().Dy() != 480 {
		t.Fatalf("decoded %d pictures (%v): %v, want 3 of ustreamer's 640x480", len(pics), err, pics)
	}
	st = streamerState(t, addr, "pw")
	if st.Result.Streamer == nil || st.Result.Streamer.H264 == nil || st.Result.Streamer.H264.Bitrate != 5000 || st.Result.Streamer.H264.Online ||
		st.Result.Applied["h264_bitrate"] != 5000.0 || !st.Result.H264.Running || st.Result.H264.Clients != 1 {
		t.Errorf("state with a client: %+v streamer %+v", st.Result, st.Result.Streamer)
	}

	// A WHEP peer at the same time.
	cl, err := wheptest.Dial(ctx, wheptest.Post(http.DefaultClient, "http://"+addr+"/api/media/whep", hdr))
	if err != nil {
		t.Fatal(err)
	}
	if u, err := cl.Next(ctx); err != nil || !u.Key {
		t.Errorf("the peer's first unit: key %v, %v", u.Key, err)
	}
	if n := len(ffmpegPids(t)); n != 1 {
		t.Errorf("%d encoders for two clients", n)
	}
	cl.Close()

	// set_params: the bitrate changes the encoder, not ustreamer; kvmd's
	// bounds are refused.
	if status, body := postAs(t, addr, "/api/streamer/set_params?h264_bitrate=1000&h264_gop=0", "pw"); status != 200 {
		t.Fatalf("set_params: %d %s", status, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for st = streamerState(t, addr, "pw"); st.Result.Applied["h264_bitrate"] != 1000.0; st = streamerState(t, addr, "pw") {
		if time.Now().After(deadline) {
			t.Fatalf("applied %v after set_params", st.Result.Applied)
		}
		c.Read(ctx) // the client keeps taking units
	}
	if st.Result.Applied["h264_gop"] != 0.0 {
		t.Errorf("applied %v", st.Result.Applied)
	}
	for _, q := range []string{"h264_bitrate=24", "h264_bitrate=20001", "h264_gop=61", "h264_gop=x"} {
		if status, body := postAs(t, addr, "/api/streamer/set_params?"+q, "pw"); status != 400 || !strings.Contains(body, "ValidatorError") {
			t.Errorf("set_params %s: %d %s, want 400 ValidatorError", q, status, body)
		}
	}
	d.stderr.wait(t, `H.264 encoder replaced.*bitrate_kbps=1000`)

	// The last client goes: the encoder ends after the shutdown delay.
	c.Close(websocket.StatusNormalClosure, "")
	deadline = time.Now().Add(15 * time.Second)
	for len(ffmpegPids(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("ffmpeg still runs 15 s after the last client: %v", ffmpegPids(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := d.stop(t); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestServeH264Off: --h264-encoder off is kvmd's MJPEG-only streamer:
// no features.h264, set_params refuses the H.264 params as kvmd does,
// and the media endpoints do not exist. With --h264-encoder software and
// no ffmpeg, the state and the media endpoints say what is missing; with
// --h264-encoder hardware and no board's encoder, the log does.
func TestServeH264Off(t *testing.T) {
	root := rpi4Root(t)
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", "/nonexistent/ustreamer", "--h264-encoder", "off")
	d.stderr.wait(t, `kvmd listening`)
	if st := streamerState(t, addr, "pw"); st.Result.Features["h264"] || st.Result.H264 != nil || st.Result.Params["h264_bitrate"] != nil {
		t.Errorf("state with H.264 off: %+v", st.Result)
	}
	if status, body := postAs(t, addr, "/api/streamer/set_params?h264_bitrate=1000", "pw"); status != 400 || !strings.Contains(body, "StreamerH264NotSupported") {
		t.Errorf("set_params h264_bitrate: %d %s", status, body)
	}
	for _, p := range []string{"/api/media", "/api/media/ws"} {
		if resp, body := getAs(t, addr, p, "pw"); resp.StatusCode != 404 {
			t.Errorf("%s with H.264 off: %d %s", p, resp.StatusCode, body)
		}
	}
	d.stop(t)

	addr = testutil.FreeAddr(t)
	d = startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", "/nonexistent/ustreamer", "--h264-encoder", "software", "--h264-ffmpeg", "/nonexistent/ffmpeg")
	d.stderr.wait(t, `kvmd listening`)
	hdr := http.Header{"Authorization": {basicAuth("admin", "pw")["Authorization"]}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The first client starts the encoder, which finds no ffmpeg; from
	// then on the state says so and a client is refused with why.
	c, _, err := websocket.Dial(ctx, "ws://"+addr+"/api/media/ws?video=h264", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	deadline := time.Now().Add(10 * time.Second)
	st := streamerState(t, addr, "pw")
	for st.Result.H264 == nil || st.Result.H264.Error == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no error in the state: %+v", st.Result.H264)
		}
		time.Sleep(100 * time.Millisecond)
		st = streamerState(t, addr, "pw")
	}
	if e, _ := st.Result.H264.Error.(string); !strings.Contains(e, "ffmpeg is not installed") {
		t.Errorf("state's h264 error %q", e)
	}
	_, resp, err := websocket.Dial(ctx, "ws://"+addr+"/api/media/ws?video=h264", &websocket.DialOptions{HTTPHeader: hdr})
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Errorf("a client without ffmpeg: %v, want 503", err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// --h264-encoder hardware on a Pi 4 whose encoder node cannot be
	// opened (the fixture's sysfs lists /dev/video11; this machine has
	// none): the log and the state say there is none.
	addr = testutil.FreeAddr(t)
	d = startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", "/nonexistent/ustreamer", "--h264-encoder", "hardware")
	d.stderr.wait(t, `kvmd listening`)
	d.stderr.wait(t, `--h264-encoder hardware, but there is none to use.*no V4L2 memory-to-memory H.264 encoder on this machine`)
	if st := streamerState(t, addr, "pw"); st.Result.H264 == nil || !st.Result.Features["h264"] {
		t.Errorf("state with --h264-encoder hardware: %+v", st.Result)
	}
	d.stop(t)
}
