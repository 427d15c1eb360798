package webtest

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
	"kvmd/tools/internal/screen"
)

// wsFrames records the text frames the page sends on its WebSockets.
type wsFrames struct {
	mu     sync.Mutex
	frames []string
}

func (w *wsFrames) listen(ctx context.Context) {
	chromedp.ListenTarget(ctx, func(ev any) {
		if f, ok := ev.(*network.EventWebSocketFrameSent); ok && f.Response.Opcode == 1 {
			w.mu.Lock()
			w.frames = append(w.frames, f.Response.PayloadData)
			w.mu.Unlock()
		}
	})
}

// since returns the frames sent from index i on, and the next index.
func (w *wsFrames) since(i int) ([]string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.frames[i:]...), len(w.frames)
}

// waitFor waits until the frames sent from index i hold every one of want,
// in order, and returns them.
func (w *wsFrames) waitFor(t *testing.T, i int, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := w.since(i)
		j := 0
		for _, f := range got {
			if j < len(want) && f == want[j] {
				j++
			}
		}
		if j == len(want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page sent %q; want in it, in order, %q", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// evalInt evaluates a JavaScript expression to a number.
func evalFloat(t *testing.T, ctx context.Context, expr string) float64 {
	t.Helper()
	var v float64
	act(t, ctx, "evaluating "+expr, chromedp.Evaluate(expr, &v))
	return v
}

// TestWebUIConsole opens the console against the demo, whose streamer
// serves a generated picture of colour bars: the picture is drawn, scaled
// to fit (checked pixel by pixel in a screenshot), and what is typed and
// clicked over it goes out as kvmd's /api/ws input messages, the mouse
// mapped from the picture's rectangle; the stuck-key button releases the
// modifiers; a shortcut is pressed and released; the quality is set.
func TestWebUIConsole(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users)
	ctx := startBrowser(t)
	frames := &wsFrames{}
	frames.listen(ctx)
	act(t, ctx, "network events", network.Enable())
	// The MJPEG way (TestWebUIConsoleVideo has the others): its <img>
	// is what the picture's rectangle is measured on here.
	act(t, ctx, "login page", chromedp.Navigate(d.URL+"/login?next=%2Fconsole%3Fvideo%3Dmjpeg"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "console", chromedp.WaitVisible("#screen", chromedp.ByQuery), ready)
	if got := location(t, ctx); got != "/console?video=mjpeg" {
		t.Errorf("after login: %q, want /console?video=mjpeg", got)
	}

	// The picture arrives and nothing covers it.
	deadline := time.Now().Add(20 * time.Second)
	for evalFloat(t, ctx, `document.getElementById('stream').naturalWidth`) != 1920 ||
		evalFloat(t, ctx, `document.getElementById('overlay').hidden ? 1 : 0`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no picture: naturalWidth %v, overlay %q", evalFloat(t, ctx, `document.getElementById('stream').naturalWidth`),
				text(t, ctx, "#overlay"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitText(t, ctx, "#con-status", "1920×1080")
	// Where the picture is: the image box less object-fit's bars.
	pictureRect := func() (rect [4]float64) {
		act(t, ctx, "the picture's rectangle", chromedp.Evaluate(`(() => {
		const img = document.getElementById('stream'); const r = img.getBoundingClientRect();
		const s = Math.min(r.width / img.naturalWidth, r.height / img.naturalHeight);
		const w = img.naturalWidth * s, h = img.naturalHeight * s;
		return [r.left + (r.width - w) / 2, r.top + (r.height - h) / 2, w, h]; })()`, &rect))
		return rect
	}
	rect := pictureRect()
	if rect[2] < 400 || rect[3] < 200 || math.Abs(rect[2]/rect[3]-16.0/9) > 0.02 {
		t.Errorf("the picture is drawn at %v: not scaled to fit at 16:9", rect)
	}
	var shot []byte
	act(t, ctx, "screenshot", chromedp.CaptureScreenshot(&shot))
	if _, err := screen.CheckBars(shot, rect, 0.3); err != nil {
		t.Errorf("the console's picture: %v", err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, "console.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// The first click captures the keyboard and mouse; it is not sent.
	cx, cy := rect[0]+rect[2]/2, rect[1]+rect[3]/2
	_, start := frames.since(0)
	act(t, ctx, "capture", chromedp.MouseClickXY(cx, cy))
	act(t, ctx, "captured", chromedp.WaitVisible(`#screen[data-captured="1"]`, chromedp.ByQuery))
	waitText(t, ctx, "#con-status", "captured")
	// The picture stays where the user aimed: a longer status line
	// ("keyboard and mouse captured", more viewers) does not wrap the bar
	// above it. The status is made longer than any line here, and the
	// rectangle read before the page renders it again.
	if moved := pictureRect(); moved != rect {
		t.Errorf("capturing moved the picture from %v to %v", rect, moved)
	}
	act(t, ctx, "a long status", chromedp.Evaluate(`document.getElementById('con-status').textContent += ' ·'+' a longer status'.repeat(20)`, nil))
	if moved := pictureRect(); moved != rect {
		t.Errorf("a longer status moved the picture from %v to %v", rect, moved)
	}
	if got, _ := frames.since(start); len(got) != 0 && strings.Contains(strings.Join(got, ""), "mouse_button") {
		t.Errorf("the capturing click was sent: %q", got)
	}

	// Keys by KeyboardEvent.code.
	_, start = frames.since(0)
	act(t, ctx, "typing", chromedp.KeyEvent("aB"))
	frames.waitFor(t, start,
		`{"event_type":"key","event":{"key":"KeyA","state":true}}`,
		`{"event_type":"key","event":{"key":"KeyA","state":false}}`,
		`{"event_type":"key","event":{"key":"KeyB","state":true}}`,
		`{"event_type":"key","event":{"key":"KeyB","state":false}}`)

	// The mouse: the picture's corners and centre map to kvmd's range.
	for _, tc := range []struct {
		x, y   float64
		wx, wy int
	}{
		{rect[0], rect[1], -32768, -32768},
		{rect[0] + rect[2] - 1, rect[1] + rect[3] - 1, 32767, 32767},
		{cx, cy, 0, 0},
	} {
		_, start = frames.since(0)
		act(t, ctx, "mouse move", chromedp.MouseEvent(input.MouseMoved, tc.x, tc.y))
		got := frames.waitFor(t, start)
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(strings.Join(got, ""), "mouse_move") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			got, _ = frames.since(start)
		}
		var m struct {
			Type  string `json:"event_type"`
			Event struct {
				To struct{ X, Y int } `json:"to"`
			} `json:"event"`
		}
		found := false
		for _, f := range got {
			if json.Unmarshal([]byte(f), &m) == nil && m.Type == "mouse_move" {
				found = true
			}
		}
		// One CSS pixel of the picture is 65536/width of kvmd's units:
		// the mapping is exact to a pixel or two (the event's and the
		// rectangle's rounding).
		tol := int(2 * 65536 / rect[2])
		if !found || abs(m.Event.To.X-tc.wx) > tol || abs(m.Event.To.Y-tc.wy) > tol {
			t.Errorf("mouse at (%.0f, %.0f): sent %q, want to about (%d, %d)", tc.x, tc.y, got, tc.wx, tc.wy)
		}
	}
	_, start = frames.since(0)
	act(t, ctx, "click", chromedp.MouseClickXY(cx, cy, chromedp.Button("right")))
	frames.waitFor(t, start,
		`{"event_type":"mouse_button","event":{"button":"right","state":true}}`,
		`{"event_type":"mouse_button","event":{"button":"right","state":false}}`)
	_, start = frames.since(0)
	act(t, ctx, "wheel", chromedp.MouseEvent(input.MouseWheel, cx, cy, func(p *input.DispatchMouseEventParams) *input.DispatchMouseEventParams {
		return p.WithDeltaY(120)
	}))
	frames.waitFor(t, start, `{"event_type":"mouse_wheel","event":{"delta":{"x":0,"y":-5}}}`)

	// A key held when the page loses focus is released on the host.
	_, start = frames.since(0)
	act(t, ctx, "shift down", chromedp.Evaluate(`document.getElementById('screen').dispatchEvent(new KeyboardEvent('keydown', {code: 'ShiftLeft', key: 'Shift', bubbles: true}))`, nil))
	act(t, ctx, "blur", chromedp.Evaluate(`document.getElementById('screen').blur()`, nil))
	frames.waitFor(t, start,
		`{"event_type":"key","event":{"key":"ShiftLeft","state":true}}`,
		`{"event_type":"key","event":{"key":"ShiftLeft","state":false}}`)

	// Release keys: every modifier and button up.
	_, start = frames.since(0)
	act(t, ctx, "release keys", chromedp.Click("#con-release", chromedp.ByQuery))
	frames.waitFor(t, start,
		`{"event_type":"key","event":{"key":"ControlLeft","state":false}}`,
		`{"event_type":"key","event":{"key":"AltRight","state":false}}`,
		`{"event_type":"key","event":{"key":"MetaRight","state":false}}`,
		`{"event_type":"mouse_button","event":{"button":"left","state":false}}`)

	// A shortcut the browser would keep: pressed in order, released in reverse.
	_, start = frames.since(0)
	act(t, ctx, "Ctrl+Alt+Del", chromedp.SetValue("#con-shortcut", "ControlLeft,AltLeft,Delete", chromedp.ByQuery),
		chromedp.Click("#con-send", chromedp.ByQuery))
	frames.waitFor(t, start,
		`{"event_type":"key","event":{"key":"ControlLeft","state":true}}`,
		`{"event_type":"key","event":{"key":"AltLeft","state":true}}`,
		`{"event_type":"key","event":{"key":"Delete","state":true}}`,
		`{"event_type":"key","event":{"key":"Delete","state":false}}`,
		`{"event_type":"key","event":{"key":"AltLeft","state":false}}`,
		`{"event_type":"key","event":{"key":"ControlLeft","state":false}}`)

	// The quality: set_params, and the restarted streamer's applied
	// quality comes back into the control; the picture comes back.
	act(t, ctx, "quality 30", chromedp.SetValue("#con-quality", "30", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('con-quality').dispatchEvent(new Event('change'))`, nil))
	deadline = time.Now().Add(20 * time.Second)
	for {
		resp := getBasic(t, d.URL+"/api/streamer", "admin", "web pass")
		var st struct {
			Result struct {
				Applied struct{ Quality int } `json:"applied"`
			} `json:"result"`
		}
		json.Unmarshal([]byte(resp), &st)
		if st.Result.Applied.Quality == 30 &&
			evalFloat(t, ctx, `+document.getElementById('con-quality').value`) == 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("applied quality not 30: %s", resp)
		}
		time.Sleep(200 * time.Millisecond)
	}
	act(t, ctx, "the picture after the restart", chromedp.WaitNotVisible("#overlay", chromedp.ByQuery))

	// The ATX controls: the demo host is on.
	act(t, ctx, "atx", chromedp.WaitVisible(`#con-led-power[data-on="1"]`, chromedp.ByQuery))
	fitsWidth(t, ctx, "console")
}

// getBasic GETs url with Basic credentials and returns the body.
func getBasic(t *testing.T, url, user, passwd string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth(user, passwd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
