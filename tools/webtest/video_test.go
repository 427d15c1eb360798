package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
	"kvmd/internal/testutil"
	"kvmd/tools/internal/screen"
)

// shownRect is the rectangle the console's picture is drawn in, in the
// page, whichever element shows it (img, video or canvas), less
// object-fit's bars; and the picture's own size.
const shownRect = `(() => {
	const way = document.getElementById('screen').dataset.video;
	const el = document.getElementById({webrtc: 'video', media: 'canvas'}[way] || 'stream');
	const nw = el.videoWidth || el.naturalWidth || el.width, nh = el.videoHeight || el.naturalHeight || el.height;
	const r = el.getBoundingClientRect();
	const s = Math.min(r.width / nw, r.height / nh);
	const w = nw * s, h = nh * s;
	return [r.left + (r.width - w) / 2, r.top + (r.height - h) / 2, w, h, nw, nh]; })()`

// waitWay waits until the console shows a picture the way want
// ("webrtc", "media", "mjpeg") and returns where, checked to be the demo's
// colour bars at 1920x1080 in a screenshot.
func waitWay(t *testing.T, ctx context.Context, want string, shot string) [4]float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var way, frames string
	for {
		act(t, ctx, "the way", chromedp.Evaluate(`document.getElementById('screen').dataset.video || ''`, &way),
			chromedp.Evaluate(`document.getElementById('screen').dataset.frames || ''`, &frames))
		if way == want && frames == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console shows %q (frames %q), want %q; status %q", way, frames, want, text(t, ctx, "#con-status"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var r [6]float64
	act(t, ctx, "the picture's rectangle", chromedp.Evaluate(shownRect, &r))
	if r[4] != 1920 || r[5] != 1080 {
		t.Errorf("%s: the picture is %vx%v, want the demo's 1920x1080", want, r[4], r[5])
	}
	rect := [4]float64{r[0], r[1], r[2], r[3]}
	// A few frames in, the picture is the bars (a decoder's first frame
	// may still be grey).
	var err error
	for range 20 {
		var png []byte
		act(t, ctx, "screenshot", chromedp.CaptureScreenshot(&png))
		var got [][3]int
		if got, err = screen.CheckBars(png, rect, 0.3); err == nil {
			err = closeTo(got, 16)
		}
		if err == nil {
			if shot != "" {
				if werr := os.WriteFile(filepath.Join(screenshotDir, shot+".png"), png, 0o644); werr != nil {
					t.Fatal(werr)
				}
			}
			return rect
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("%s: %v", want, err)
	return rect
}

// closeTo checks that the bars found are within tol of each channel of
// vivid's: closer than the general check, which a decoder converting the
// colours with the wrong matrix passes (BT.709's drew green as 161, not
// 191).
func closeTo(got [][3]int, tol int) error {
	for i, c := range got {
		for k := range 3 {
			if d := c[k] - screen.Bars75[i][k]; d > tol || d < -tol {
				return fmt.Errorf("bar %d is %v, want within %d of %v", i, c, tol, screen.Bars75[i])
			}
		}
	}
	return nil
}

// streamerH264 reads the daemon's "h264" key of /api/streamer.
func streamerH264(t *testing.T, d *clienttest.Daemon, user, passwd string) map[string]any {
	t.Helper()
	b := getBasic(t, d.URL+"/api/streamer", user, passwd)
	var st struct {
		Result struct {
			H264 map[string]any `json:"h264"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(b), &st); err != nil {
		t.Fatalf("/api/streamer: %v %s", err, b)
	}
	return st.Result.H264
}

func webrtcPeers(t *testing.T, d *clienttest.Daemon) float64 {
	t.Helper()
	h := streamerH264(t, d, "admin", "web pass")
	w, _ := h["webrtc"].(map[string]any)
	n, _ := w["peers"].(float64)
	return n
}

// TestWebUIConsoleVideo opens the console against the demo, with ffmpeg
// for H.264, in Chromium: by itself it plays WebRTC (the demo's colour
// bars at 1920x1080 in the <video>, the way, the bitrate and the latency
// in the status line), and its session ends when the page goes; asked
// for Direct H.264 it decodes /api/media/ws with WebCodecs into the
// canvas; without WebRTC on the daemon it falls to Direct H.264 by
// itself, and without H.264 to MJPEG.
func TestWebUIConsoleVideo(t *testing.T) {
	testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)
	act(t, ctx, "login page", chromedp.Navigate(d.URL+"/login?next=%2Fconsole"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "console", chromedp.WaitVisible("#screen", chromedp.ByQuery), ready)

	t.Run("webrtc", func(t *testing.T) {
		waitWay(t, ctx, "webrtc", "console-webrtc")
		waitText(t, ctx, "#con-status", "WebRTC ")
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(text(t, ctx, "#con-status"), " ms") {
			if time.Now().After(deadline) {
				t.Fatalf("no bitrate and latency in the status: %q", text(t, ctx, "#con-status"))
			}
			time.Sleep(200 * time.Millisecond)
		}
		if n := webrtcPeers(t, d); n != 1 {
			t.Errorf("%v WebRTC peers on the daemon, want 1", n)
		}
		// The page goes: its session ends (its DELETE, sent as it
		// unloads).
		act(t, ctx, "leaving", chromedp.Navigate(d.URL+"/"), ready)
		deadline = time.Now().Add(10 * time.Second)
		for webrtcPeers(t, d) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%v WebRTC peers 10 s after the page went", webrtcPeers(t, d))
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("media", func(t *testing.T) {
		act(t, ctx, "console", chromedp.Navigate(d.URL+"/console?video=media"), ready)
		waitWay(t, ctx, "media", "console-h264")
		waitText(t, ctx, "#con-status", "H.264 (WebCodecs) ")
	})
	t.Run("mjpeg", func(t *testing.T) {
		act(t, ctx, "console", chromedp.Navigate(d.URL+"/console?video=mjpeg"), ready)
		waitWay(t, ctx, "mjpeg", "")
		waitText(t, ctx, "#con-status", "MJPEG")
	})

	// A daemon without WebRTC: the console falls to Direct H.264.
	d2 := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--webrtc-max-peers", "0")
	act(t, ctx, "login page", chromedp.Navigate(d2.URL+"/login?next=%2Fconsole"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "console", chromedp.WaitVisible("#screen", chromedp.ByQuery), ready)
	waitWay(t, ctx, "media", "")

	// A daemon without H.264: MJPEG, at once.
	d3 := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--h264-encoder", "off")
	act(t, ctx, "login page", chromedp.Navigate(d3.URL+"/login?next=%2Fconsole"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "console", chromedp.WaitVisible("#screen", chromedp.ByQuery), ready)
	waitWay(t, ctx, "mjpeg", "")
}
