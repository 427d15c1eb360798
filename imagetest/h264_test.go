package imagetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/h264"
	"kvmd/h264/h264test"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
)

// h264Figures are the H.264 path's measurements for BENCHMARKS.md.
type h264Figures struct {
	firstMS   float64 // a Direct H.264 request, encoder stopped, to its first unit
	fps       float64 // units a second a Direct H.264 client got
	bytes     int     // per unit
	webrtcMS  float64 // a WHEP offer to the first unit at the guest's peer
	webrtcFPS float64
	resizeMS  float64 // vivid to 1280x720, to the first unit of that size
}

// ffmpegPids lists the guest's ffmpeg processes.
func (s *system) ffmpegPids(t *testing.T) []string {
	t.Helper()
	out, _ := s.m.shell.run(t, "pgrep -x ffmpeg")
	return strings.Fields(out)
}

// directH264 reads n units of /api/media/ws?video=h264 (PiKVM's Direct
// H.264, its scripts' mode) through the forwarded port, and returns them
// with the time to the first.
func (s *system) directH264(t *testing.T, ctx context.Context, c *websocket.Conn, n int) ([][]byte, time.Duration) {
	t.Helper()
	start := time.Now()
	var first time.Duration
	var units [][]byte
	for len(units) < n {
		_, msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("Direct H.264: unit %d: %v", len(units), err)
		}
		if len(units) == 0 {
			first = time.Since(start)
		}
		units = append(units, msg)
	}
	return units, first
}

// checkPictures decodes an H.264 stream with the host's ffmpeg and checks
// its last picture: vivid's colour bars at w x h.
func checkPictures(t *testing.T, ffmpeg, what string, stream []byte, w, h int) int {
	t.Helper()
	pics, err := h264test.Decode(ffmpeg, stream)
	if err != nil || len(pics) == 0 {
		t.Fatalf("%s: decoded %d pictures: %v", what, len(pics), err)
	}
	last := pics[len(pics)-1]
	if b := last.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s: pictures of %dx%d, want vivid's %dx%d", what, b.Dx(), b.Dy(), w, h)
		return len(pics)
	}
	// Below vivid's text, which it writes over the bars' top.
	if _, err := colorbars.Check(last, [4]float64{0, 0, float64(w), float64(h)}, 0.6); err != nil {
		t.Errorf("%s: %v", what, err)
	}
	return len(pics)
}

// testH264: the picture in H.264 from the software encoder (Debian's
// ffmpeg in the guest) on vivid: Direct H.264 read through the forwarded
// port and a WebRTC peer in the guest (pion, WHEP over the daemon's unix
// socket) both decode on the host, by its ffmpeg, into vivid's colour
// bars at vivid's 640x480; one encoder for both; vivid switched to
// 1280x720 brings a key frame of that size; the console's Direct H.264
// shows the bars in the host's Chromium.
func (s *system) testH264(t *testing.T, fig *figures) {
	ffmpeg := testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	sh := s.m.shell
	f := &fig.h264
	var st struct {
		Features map[string]bool `json:"features"`
		H264     *struct {
			Encoder string `json:"encoder"`
		} `json:"h264"`
	}
	s.getJSON(t, "/api/streamer", &st)
	if !st.Features["h264"] || st.H264 == nil || st.H264.Encoder != "libx264 (ffmpeg)" {
		t.Fatalf("/api/streamer: features %v, h264 %+v: want the software encoder", st.Features, st.H264)
	}
	// PiKVM's page's Direct H.264 (the streamer subtest's) may have left
	// less than the shutdown delay (10 s) ago: its encoder ends then.
	if !waitFor(context.Background(), 30*time.Second, 250*time.Millisecond, func() bool { return len(s.ffmpegPids(t)) == 0 }) {
		t.Errorf("ffmpeg runs without a client: %v", s.ffmpegPids(t))
	}
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=0 -c dv_timings_signal_mode=4")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := s.dialWebSocket(t, ctx, "/api/media/ws?video=h264")
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	start := time.Now()
	units, first := s.directH264(t, ctx, c, 10)
	f.firstMS = float64(first.Microseconds()) / 1000
	f.fps = 9 / (time.Since(start) - first).Seconds()
	var stream []byte
	for _, u := range units {
		stream = append(stream, u...)
		f.bytes += len(u)
	}
	f.bytes /= len(units)
	if !h264.HasType(units[0], h264.NALIDR) || !h264.HasType(units[0], h264.NALSPS) {
		t.Error("Direct H.264: the first unit is not a key frame with its SPS")
	}
	n := checkPictures(t, ffmpeg, "Direct H.264", stream, 640, 480)
	t.Logf("Direct H.264: first unit after %.0f ms, %.1f units a second, %d bytes a unit, %d pictures decoded", f.firstMS, f.fps, f.bytes, n)

	// A WebRTC peer in the guest, while the Direct H.264 client stays:
	// one encoder serves both. The client keeps reading meanwhile, into
	// msgs (its oldest dropped when full): a Read whose context ends
	// closes a coder/websocket connection, so one reader reads to the end.
	msgs := make(chan []byte, 64)
	go func() {
		defer close(msgs)
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			select {
			case msgs <- msg:
			default:
				<-msgs
				msgs <- msg
			}
		}
	}()
	s.installGuestTool(t, "kvmd-whepcheck")
	out, status, err := sh.runTimeout("kvmd-whepcheck "+daemonSock+" 10 /run/kvmd-whep.h264", 4*time.Minute)
	if err != nil || status != 0 {
		t.Fatalf("kvmd-whepcheck: %d %v\n%s", status, err, out)
	}
	var w struct {
		FirstMS     float64 `json:"first_ms"`
		Units, Keys int
		FPS         float64 `json:"fps"`
		PlayoutZero bool    `json:"playout_zero"`
		Deleted     int     `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &w); err != nil {
		t.Fatalf("kvmd-whepcheck: %q", out)
	}
	f.webrtcMS, f.webrtcFPS = w.FirstMS, w.FPS
	if w.Units != 10 || w.Keys < 1 || !w.PlayoutZero || w.Deleted != 200 {
		t.Errorf("the WebRTC peer: %+v", w)
	}
	if p := s.ffmpegPids(t); len(p) != 1 {
		t.Errorf("ffmpegs with two clients: %v, want one", p)
	}
	b64 := sh.must(t, "base64 -w0 /run/kvmd-whep.h264 && rm /run/kvmd-whep.h264")
	rtc, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		t.Fatal(err)
	}
	n = checkPictures(t, ffmpeg, "WebRTC", rtc, 640, 480)
	t.Logf("WebRTC (the guest's pion peer): first unit %.0f ms after the offer, %.1f units a second, %d pictures decoded", w.FirstMS, w.FPS, n)

	// A new resolution on the HDMI input: a key frame of its size, from a
	// new encoder.
	resized := time.Now()
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=9 -c dv_timings_signal_mode=4")
	for {
		var msg []byte
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("waiting for 1280x720: the Direct H.264 client's connection ended")
			}
			msg = m
		case <-ctx.Done():
			t.Fatalf("waiting for 1280x720: %v", ctx.Err())
		}
		sps, ok := firstSPS(msg)
		if ok && sps.Width == 1280 && sps.Height == 720 {
			if !h264.HasType(msg, h264.NALIDR) {
				t.Error("the first unit of 1280x720 is not a key frame")
			}
			f.resizeMS = float64(time.Since(resized).Microseconds()) / 1000
			checkPictures(t, ffmpeg, "Direct H.264 at 1280x720", msg, 1280, 720)
			break
		}
	}
	t.Logf("vivid to 1280x720, to its first unit: %.0f ms", f.resizeMS)
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=0 -c dv_timings_signal_mode=4")
	c.Close(websocket.StatusNormalClosure, "")

	// The console's Direct H.264 in the host's Chromium (PiKVM's page's,
	// behind its nginx, is the streamer subtest's).
	wc := s.webcheck(t, "console", "-url", s.c.base, "-passwd", s.passwd, "-video", "media", "-bars", "-out", s.shotPath("console-h264.png"))
	t.Logf("the console in Direct H.264: %v", wc)
}

// firstSPS is the first SPS of an Annex B unit, read.
func firstSPS(unit []byte) (h264.SPS, bool) {
	for _, n := range h264.SplitNALs(unit) {
		if h264.NALType(n) == h264.NALSPS {
			s, err := h264.ParseSPS(n)
			return s, err == nil
		}
	}
	return h264.SPS{}, false
}
