package imagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// videoState is hw.video as the tests read it.
type videoState struct {
	Device     *string `json:"device"`
	Driver     *string `json:"driver"`
	Card       *string `json:"card"`
	Media      *string `json:"media"`
	Signal     *bool   `json:"signal"`
	Resolution *struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"resolution"`
	FPS    *float64 `json:"fps"`
	Status string   `json:"status"`
}

func (v videoState) String() string {
	s := v.Status
	if v.Resolution != nil {
		s += fmt.Sprintf(" %dx%d", v.Resolution.Width, v.Resolution.Height)
	}
	if v.FPS != nil {
		s += fmt.Sprintf("@%g", *v.FPS)
	}
	return s
}

func (s *system) hwVideo(t *testing.T) *videoState {
	t.Helper()
	var info struct {
		HW struct {
			Video *videoState `json:"video"`
		} `json:"hw"`
	}
	s.getJSON(t, "/api/info?fields=hw", &info)
	return info.HW.Video
}

// captureOf is the "capture" of a streamer state or event: the daemon's
// own reading of the capture device, which kvmd's state does not have.
type captureState struct {
	Device     string `json:"device"`
	Status     string `json:"status"`
	Signal     *bool  `json:"signal"`
	Resolution *struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"resolution"`
}

// The kernel's answers to VIDIOC_QUERY_DV_TIMINGS as v4l2-ctl prints them,
// and the status each is in hw.video.
var (
	dvErrors = map[string]string{
		"Link has been severed":         "no_signal",    // ENOLINK
		"No locks available":            "no_lock",      // ENOLCK
		"Numerical result out of range": "out_of_range", // ERANGE
	}
)

// queryDV asks vivid for its DV timings with v4l2-ctl, as root: the
// status hw.video should show, and the resolution when there is one.
func (s *system) queryDV(t *testing.T) (string, int, int) {
	t.Helper()
	out, _ := s.m.shell.run(t, "v4l2-ctl -d /dev/video0 --query-dv-timings")
	for msg, st := range dvErrors {
		if strings.Contains(out, msg) {
			return st, 0, 0
		}
	}
	w := regexp.MustCompile(`Active width: (\d+)`).FindStringSubmatch(out)
	h := regexp.MustCompile(`Active height: (\d+)`).FindStringSubmatch(out)
	if w == nil || h == nil {
		t.Fatalf("v4l2-ctl --query-dv-timings:\n%s", out)
	}
	wi, _ := strconv.Atoi(w[1])
	hi, _ := strconv.Atoi(h[1])
	return "ok", wi, hi
}

// signalStep is one state vivid is driven to, with the controls that do
// it (Documentation/admin-guide/media/vivid.rst: dv_timings_signal_mode
// 0 current timings, 1 no signal, 2 no lock, 3 out of range, 4 the
// timings the dv_timings menu selects; dv_timings 0 is 640x480p59.94).
type signalStep struct {
	status, controls string
	width, height    int // of an "ok" step
}

// Mode 4 makes the selected timings the current ones: mode 0 after it
// stays at 640x480, so the picture goes back to 1280x720p60 (menu item
// 9) the same way.
var signalSteps = []signalStep{
	{"no_signal", "dv_timings_signal_mode=1", 0, 0},
	{"ok", "dv_timings_signal_mode=0", 1280, 720},
	{"no_lock", "dv_timings_signal_mode=2", 0, 0},
	{"ok", "dv_timings_signal_mode=0", 1280, 720},
	{"out_of_range", "dv_timings_signal_mode=3", 0, 0},
	{"ok", "dv_timings_signal_mode=0", 1280, 720},
	{"ok", "dv_timings=0,dv_timings_signal_mode=4", 640, 480},
	{"ok", "dv_timings=9,dv_timings_signal_mode=4", 1280, 720},
}

// eventBound is how late a streamer event may come after the change: the
// streamer's state poll (1 s) reads the capture through /api/info's
// cache (1 s), and the emulated machine is slow; measured under TCG: a
// median of 1.1 s, at most 2.8 s.
const eventBound = 5 * time.Second

// testVideo: hw.video and /api/streamer's capture are vivid as v4l2-ctl
// and media-ctl see it; then vivid's signal is switched at run time to no
// signal, no lock, out of range and another resolution, and each state is
// seen by an /api/ws client as a streamer event, and in hw.video, as
// v4l2-ctl sees it, within the daemon's refresh.
func (s *system) testVideo(t *testing.T, fig *figures) {
	sh := s.m.shell
	start := time.Now()
	info := sh.must(t, "v4l2-ctl -d /dev/video0 --info")
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^\s*` + name + `\s*: (.*)$`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("v4l2-ctl --info has no %s:\n%s", name, info)
		}
		return strings.TrimSpace(m[1])
	}
	driver := field("Driver name")
	name := strings.TrimSpace(sh.must(t, "cat /sys/class/video4linux/video0/name"))
	media := sh.must(t, "media-ctl -d /dev/media0 -p")
	if !strings.Contains(media, "entity 1: "+name) && !strings.Contains(media, ": "+name+" (") {
		t.Errorf("media-ctl -p does not show the entity %s:\n%s", name, media)
	}
	st, w, h := s.queryDV(t)
	v := s.hwVideo(t)
	if v == nil || v.Device == nil || *v.Device != "/dev/video0" || v.Driver == nil || *v.Driver != driver ||
		v.Card == nil || *v.Card != name || v.Media == nil || *v.Media != "/dev/media0" {
		t.Fatalf("hw.video %+v; v4l2-ctl: /dev/video0, driver %s, name %s, /dev/media0", v, driver, name)
	}
	if v.Status != st || v.Resolution == nil || v.Resolution.Width != w || v.Resolution.Height != h || v.FPS == nil {
		t.Errorf("hw.video %v; v4l2-ctl: %s %dx%d", v, st, w, h)
	}
	var streamer struct {
		Capture *captureState `json:"capture"`
	}
	s.getJSON(t, "/api/streamer", &streamer)
	if c := streamer.Capture; c == nil || c.Device != "/dev/video0" || c.Status != st || c.Resolution == nil || c.Resolution.Width != w {
		t.Errorf("/api/streamer capture %+v; v4l2-ctl: %s %dx%d", c, st, w, h)
	}
	t.Logf("vivid: driver %s, card %s, %s %dx%d; hw.video %v", driver, name, st, w, h, v)

	ws := s.dialWS(t)
	// The first events are the states at connection.
	time.Sleep(time.Second)
	ws.drain()
	for _, step := range signalSteps {
		sh.must(t, "v4l2-ctl -d /dev/video0 -c "+step.controls)
		changed := time.Now()
		want, ww, wh := s.queryDV(t)
		name := step.status
		if want == "ok" {
			name = fmt.Sprintf("ok %dx%d", ww, wh)
		}
		t.Logf("device state: vivid %s (v4l2-ctl -c %s)", name, step.controls)
		if want != step.status || ww != step.width || wh != step.height {
			t.Errorf("v4l2-ctl -c %s: VIDIOC_QUERY_DV_TIMINGS says %s %dx%d, want %s %dx%d", step.controls, want, ww, wh, step.status, step.width, step.height)
		}
		e, ok := ws.next("streamer", 15*time.Second, func(ev json.RawMessage) bool {
			var d struct {
				Capture *captureState `json:"capture"`
			}
			return json.Unmarshal(ev, &d) == nil && d.Capture != nil && d.Capture.Status == want &&
				(want != "ok" || (d.Capture.Resolution != nil && d.Capture.Resolution.Width == ww && d.Capture.Resolution.Height == wh))
		})
		if !ok {
			t.Errorf("%s: no streamer event with capture status %s within 15 s", name, want)
			continue
		}
		lat := e.at.Sub(changed)
		if lat > eventBound {
			t.Errorf("%s: the streamer event came %v after the change, more than %v", name, lat, eventBound)
		}
		t.Logf("%s: the streamer event came %v after v4l2-ctl returned", name, lat.Round(time.Millisecond))
		var v *videoState
		if !waitFor(context.Background(), eventBound, 100*time.Millisecond, func() bool {
			v = s.hwVideo(t)
			return v != nil && v.Status == want && (want != "ok" || (v.Resolution != nil && v.Resolution.Width == ww && v.Resolution.Height == wh))
		}) {
			t.Errorf("%s: hw.video %v, want %s %dx%d", name, v, want, ww, wh)
		}
	}
	// Ten changes for the benchmark: no signal and back, five times.
	for i := range 10 {
		mode, want := "1", "no_signal"
		if i%2 == 1 {
			mode, want = "4", "ok"
		}
		sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings_signal_mode="+mode)
		changed := time.Now()
		e, ok := ws.next("streamer", 15*time.Second, func(ev json.RawMessage) bool {
			var d struct {
				Capture *captureState `json:"capture"`
			}
			return json.Unmarshal(ev, &d) == nil && d.Capture != nil && d.Capture.Status == want
		})
		if !ok {
			t.Errorf("benchmark change %d (%s): no streamer event within 15 s", i, want)
			continue
		}
		fig.signalToEvent = append(fig.signalToEvent, e.at.Sub(changed))
	}
	// As it was: the current timings, 1280x720p60.
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings_signal_mode=0")
	lats := slices.Clone(fig.signalToEvent)
	slices.Sort(lats)
	if len(lats) > 0 {
		t.Logf("signal change to /api/ws event: median %v of %d, max %v", lats[len(lats)/2].Round(time.Millisecond), len(lats), lats[len(lats)-1].Round(time.Millisecond))
	}
	t.Logf("video checks: %v", time.Since(start).Round(100*time.Millisecond))
}
