// Command webcheck drives a headless Chromium against a running kvmd, for
// the booted-system test (imagetest), which cannot import a browser
// driver: the product module keeps chromedp out of its go.mod.
//
//	webcheck console -url URL -user U -passwd P [-video WAY] [-out PNG] [-bars] [-overlay TEXT] [-type TEXT] [-click FX,FY]
//	webcheck pikvm -url URL -user U -passwd P [-video WAY] [-out PNG]
//	webcheck bars -in PNG
//
// -video is how the page takes the picture: mjpeg (the default), or media
// (Direct H.264 over /api/media/ws, decoded with WebCodecs); the console
// takes webrtc too (the guest's UDP is out of the host's reach under
// qemu's user network: the booted test's WebRTC peer runs in the guest).
//
// console logs in through the login page and opens the console; with
// -bars it waits for the picture and checks it shows the 75 % colour bars
// (vivid's test pattern), with -overlay it waits for that text over the
// picture, with -type it clicks the picture and types the text, with
// -click it clicks the picture (once to capture the keyboard and mouse)
// and then clicks the left button at FX,FY, fractions of the picture's
// width and height. pikvm
// opens PiKVM's own KVM page (/kvm/, served by a proxy in front of kvmd)
// after logging in through the API, and checks its stream shows the bars.
// bars checks that a picture (a frame decoded on the far side of an
// encoder) shows the bars across its middle, without a browser.
// Each prints one JSON object of what it saw and exits 1 when a check
// fails. Certificate errors are ignored: the device's certificate is its
// own.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"kvmd/tools/internal/screen"
)

type result struct {
	OK       bool        `json:"ok"`
	Error    string      `json:"error,omitempty"`
	Location string      `json:"location,omitempty"`
	Natural  [2]float64  `json:"natural,omitempty"` // the picture's own size
	Rect     [4]float64  `json:"rect,omitempty"`    // where it is drawn
	Bars     [][3]int    `json:"bars,omitempty"`
	Overlay  string      `json:"overlay,omitempty"`
	Status   string      `json:"status,omitempty"`
	Typed    string      `json:"typed,omitempty"`
	Clicked  [2]float64  `json:"clicked,omitempty"` // where the left button was clicked, in the page
	Moved    *[4]float64 `json:"moved,omitempty"`   // the picture's rectangle after the capturing click, when it moved
	Sent     []string    `json:"sent,omitempty"`    // the page's WebSocket input messages (-click, -type)
	Took     string      `json:"took"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: webcheck console|pikvm -url URL -user U -passwd P ...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	url := fs.String("url", "", "the daemon's (or the proxy's) base URL")
	user := fs.String("user", "admin", "user")
	passwd := fs.String("passwd", "", "password")
	out := fs.String("out", "", "write a screenshot PNG here")
	bars := fs.Bool("bars", false, "wait for the picture and check it shows the 75 % colour bars")
	overlay := fs.String("overlay", "", "wait for this text over the picture")
	typ := fs.String("type", "", "click the picture and type this text")
	click := fs.String("click", "", "click the picture, then click at FX,FY (fractions of the picture's size)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	in := fs.String("in", "", "bars: the PNG to check")
	video := fs.String("video", "mjpeg", "how the page takes the picture: mjpeg, media or webrtc")
	fs.Parse(os.Args[2:])

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	var res result
	var err error
	switch os.Args[1] {
	case "console":
		var at []float64
		if *click != "" {
			var fx, fy float64
			if _, err := fmt.Sscanf(*click, "%g,%g", &fx, &fy); err != nil {
				fmt.Fprintln(os.Stderr, "-click: want FX,FY")
				os.Exit(2)
			}
			at = []float64{fx, fy}
		}
		err = console(ctx, &res, *url, *user, *passwd, *video, *out, *bars, *overlay, *typ, at)
	case "pikvm":
		err = pikvm(ctx, &res, *url, *user, *passwd, *video, *out)
	case "bars":
		err = pictureBars(&res, *in)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	res.OK, res.Took = err == nil, time.Since(start).Round(time.Millisecond).String()
	if err != nil {
		res.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	if err != nil {
		os.Exit(1)
	}
}

// pictureBars checks the PNG at path: the bars across the whole picture,
// at half its height.
func pictureBars(res *result, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return err
	}
	res.Natural = [2]float64{float64(cfg.Width), float64(cfg.Height)}
	res.Rect = [4]float64{0, 0, float64(cfg.Width), float64(cfg.Height)}
	res.Bars, err = screen.CheckBars(b, res.Rect, .5)
	return err
}

// browser starts a headless Chromium with a throwaway profile.
func browser(ctx context.Context) (context.Context, func(), error) {
	dir, err := os.MkdirTemp("", "webcheck-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900),
		chromedp.Flag("ignore-certificate-errors", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true))
	if p, err := findChromium(); err == nil {
		opts = append(opts, chromedp.ExecPath(p))
	}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	stop := func() {
		cancelB()
		cancelA()
		time.Sleep(200 * time.Millisecond) // helper processes may still write the profile
		os.RemoveAll(dir)
	}
	if err := chromedp.Run(bctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting chromium: %w", err)
	}
	return bctx, stop, nil
}

func findChromium() (string, error) {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium")
}

// poll evaluates expr until it is true or ctx ends.
func poll(ctx context.Context, what, expr string) error {
	for {
		var ok bool
		err := chromedp.Run(ctx, chromedp.Evaluate(expr, &ok))
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within the time allowed (%v)", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// natural is the picture's own size in an <img>, a <video> or a <canvas>.
const natural = `((id) => { const e = document.getElementById(id);
	return [e.naturalWidth || e.videoWidth || e.width || 0, e.naturalHeight || e.videoHeight || e.height || 0]; })`

// pictureRect is where an <img>, <video> or <canvas> draws its picture
// with object-fit: contain (the console), or its box (PiKVM's page, which
// sizes the box to the picture).
const pictureRect = `((id) => {
	const [nw, nh] = ` + natural + `(id);
	const r = document.getElementById(id).getBoundingClientRect();
	const s = Math.min(r.width / nw, r.height / nh);
	const w = nw * s, h = nh * s;
	return [r.left + (r.width - w) / 2, r.top + (r.height - h) / 2, w, h]; })`

// consoleElements are the console's elements of each way (video.js).
var consoleElements = map[string]string{"mjpeg": "stream", "media": "canvas", "webrtc": "video"}

func shoot(ctx context.Context, res *result, id, out string) ([]byte, error) {
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(natural+`('`+id+`')`, &res.Natural),
		chromedp.Evaluate(pictureRect+`('`+id+`')`, &res.Rect)); err != nil {
		return nil, err
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		return nil, err
	}
	if out != "" {
		if err := os.WriteFile(out, png, 0o644); err != nil {
			return nil, err
		}
	}
	return png, nil
}

func console(ctx context.Context, res *result, url, user, passwd, video, out string, bars bool, overlay, typ string, click []float64) error {
	el, ok := consoleElements[video]
	if !ok {
		return fmt.Errorf("-video %q: want mjpeg, media or webrtc", video)
	}
	bctx, stop, err := browser(ctx)
	if err != nil {
		return err
	}
	defer stop()
	var mu sync.Mutex
	var sent []string
	chromedp.ListenTarget(bctx, func(ev any) {
		if f, ok := ev.(*network.EventWebSocketFrameSent); ok && f.Response.Opcode == 1 &&
			(strings.Contains(f.Response.PayloadData, `"key"`) || strings.Contains(f.Response.PayloadData, `"mouse_`)) {
			mu.Lock()
			sent = append(sent, f.Response.PayloadData)
			mu.Unlock()
		}
	})
	defer func() {
		mu.Lock()
		res.Sent = append([]string(nil), sent...)
		mu.Unlock()
	}()
	if err := chromedp.Run(bctx,
		network.Enable(),
		chromedp.Navigate(url+"/login?next=%2Fconsole%3Fvideo%3D"+video),
		chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery),
		chromedp.SendKeys("#user", user, chromedp.ByQuery),
		chromedp.SendKeys("#passwd", passwd, chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#screen", chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-ready="1"]`, chromedp.ByQuery),
		chromedp.Evaluate(`location.pathname`, &res.Location)); err != nil {
		return fmt.Errorf("logging in to the console: %w", err)
	}
	defer func() {
		chromedp.Run(bctx, chromedp.Evaluate(`document.getElementById('overlay').textContent`, &res.Overlay),
			chromedp.Evaluate(`document.getElementById('con-status').textContent`, &res.Status))
	}()
	if overlay != "" {
		if err := poll(bctx, "the overlay "+overlay, `!document.getElementById('overlay').hidden && document.getElementById('overlay').textContent.includes(`+jsQuote(overlay)+`)`); err != nil {
			return err
		}
		if out != "" {
			if _, err := shoot(bctx, res, el, out); err != nil {
				return err
			}
		}
	}
	if bars {
		if err := poll(bctx, "the picture", `document.getElementById('screen').dataset.video === `+jsQuote(video)+
			` && document.getElementById('screen').dataset.frames === '1' && document.getElementById('overlay').hidden`); err != nil {
			return err
		}
		time.Sleep(time.Second) // a frame or two more: the first may be partial
		png, err := shoot(bctx, res, el, out)
		if err != nil {
			return err
		}
		// Below vivid's text, which it writes over the bars' top.
		if res.Bars, err = screen.CheckBars(png, res.Rect, 0.6); err != nil {
			return err
		}
	}
	if typ != "" || click != nil {
		if err := chromedp.Run(bctx, chromedp.Evaluate(pictureRect+`('`+el+`')`, &res.Rect)); err != nil {
			return err
		}
		cx, cy := res.Rect[0]+res.Rect[2]/2, res.Rect[1]+res.Rect[3]/2
		if res.Rect[2] == 0 {
			cx, cy = 600, 500
		}
		// This click captures the keyboard and mouse; the console does
		// not send it.
		if err := chromedp.Run(bctx, chromedp.MouseClickXY(cx, cy),
			chromedp.WaitVisible(`#screen[data-captured="1"]`, chromedp.ByQuery)); err != nil {
			return fmt.Errorf("capturing the keyboard: %w", err)
		}
	}
	if click != nil {
		// Where the picture is now, as a user aims at what they see: the
		// capture may have changed the page.
		var r [4]float64
		if err := chromedp.Run(bctx, chromedp.Evaluate(pictureRect+`('`+el+`')`, &r)); err != nil {
			return err
		}
		if r != res.Rect {
			res.Moved = &r
		}
		res.Clicked = [2]float64{r[0] + click[0]*r[2], r[1] + click[1]*r[3]}
		if err := chromedp.Run(bctx, chromedp.MouseClickXY(res.Clicked[0], res.Clicked[1])); err != nil {
			return fmt.Errorf("clicking: %w", err)
		}
		time.Sleep(500 * time.Millisecond) // the button's release goes out
	}
	if typ != "" {
		if err := chromedp.Run(bctx, chromedp.KeyEvent(typ)); err != nil {
			return fmt.Errorf("typing: %w", err)
		}
		res.Typed = typ
		time.Sleep(500 * time.Millisecond) // the last key's release goes out
	}
	return nil
}

func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pikvmWays are PiKVM's page's modes (its stream.mode in localStorage):
// the element that shows the picture and its window's title.
var pikvmWays = map[string][2]string{"mjpeg": {"stream-image", "HTTP MJPEG - "}, "media": {"stream-canvas", "Direct H.264 - "}}

// pikvm opens PiKVM's KVM page: it logs in through the API as PiKVM's
// login page does (POST /api/auth/login, the cookie on the proxy's host),
// sets the page's mode, then waits for its MJPEG <img id="stream-image">
// or its Direct H.264 <canvas id="stream-canvas"> to show the picture.
func pikvm(ctx context.Context, res *result, url, user, passwd, video, out string) error {
	way, ok := pikvmWays[video]
	if !ok {
		return fmt.Errorf("-video %q: want mjpeg or media", video)
	}
	bctx, stop, err := browser(ctx)
	if err != nil {
		return err
	}
	defer stop()
	login := `fetch('/api/auth/login', {method: 'POST', credentials: 'same-origin',
		headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: 'user=' + encodeURIComponent(` + jsQuote(user) + `) + '&passwd=' + encodeURIComponent(` + jsQuote(passwd) + `)}).then(r => r.status)`
	var status float64
	if err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/share/css/main.css"), // a page of the proxy without the API's CSP
		chromedp.Evaluate(`localStorage.setItem('stream.mode', `+jsQuote(video)+`)`, nil),
		chromedp.Evaluate(login, &status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		return fmt.Errorf("logging in: %w", err)
	}
	if status != 200 {
		return fmt.Errorf("logging in: HTTP %v", status)
	}
	if err := chromedp.Run(bctx, chromedp.Navigate(url+"/kvm/")); err != nil {
		return err
	}
	// The page shows the stream undimmed once it found its own client in
	// the streamer state (by the stream_client cookie): its window's title
	// then names the mode and the resolution.
	// A canvas is 300x150 until the page draws a picture into it.
	if err := poll(bctx, "PiKVM's stream", `(() => { const [w, h] = `+natural+`(`+jsQuote(way[0])+`);
		const i = document.getElementById('stream-image');
		const title = (document.querySelector('#stream-window-header .window-grab') || {}).textContent || '';
		return w > 100 && !(w === 300 && h === 150) && !(`+jsQuote(video)+` === 'mjpeg' && i.src.includes('blank-stream')) &&
			title.startsWith(`+jsQuote(way[1])+`) && !title.includes('No video'); })()`); err != nil {
		var src string
		chromedp.Run(bctx, chromedp.Evaluate(`(document.getElementById('stream-image')||{}).src||''`, &src))
		return fmt.Errorf("%w (the image's src %q)", err, src)
	}
	time.Sleep(time.Second)
	png, err := shoot(bctx, res, way[0], out)
	if err != nil {
		return err
	}
	chromedp.Run(bctx, chromedp.Evaluate(`location.pathname`, &res.Location))
	if res.Bars, err = screen.CheckBars(png, res.Rect, 0.6); err != nil {
		return err
	}
	return nil
}
