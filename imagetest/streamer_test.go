package imagetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
)

// Where the streamer's socket is on the booted system: kvmd.service's
// RuntimeDirectory=kvmd/ustreamer.
const (
	ustreamerSock = "/run/kvmd/ustreamer/ustreamer.sock"
	daemonSock    = "/run/kvmd/kvmd.sock"
)

// streamRate is what kvmd-streamcheck rate prints.
type streamRate struct {
	FirstMS       float64 `json:"first_ms"`
	Frames        int     `json:"frames"`
	Seconds       float64 `json:"seconds"`
	FPS           float64 `json:"fps"`
	BytesPerFrame int64   `json:"bytes_per_frame"`
	CPUTicks      int64   `json:"cpu_ticks"`
}

// streamerFigures are the streamer's measurements for BENCHMARKS.md.
type streamerFigures struct {
	direct, daemon []float64 // frames a second, paired rounds
	ratios         []float64 // daemon/direct of each round
	cpuPerFrame    []float64 // the daemon's CPU, ms a frame streamed
	cpuRelay       []float64 // the daemon's CPU while a client reads through it, ms a second
	cpuBeside      []float64 // the same while a client reads ustreamer directly
	idlePct        float64   // the daemon's CPU idle, no streamer, % of a core
	firstFrame     float64   // ms from a stream request, streamer stopped, to the first frame
	restart        time.Duration
	stopAfter      time.Duration
	width, height  int
}

// installGuestTool builds the arm64 program in ./dir for the guest and
// installs it in /usr/local/bin.
func (s *system) installGuestTool(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(s.share, dir), "./"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", dir, err, out)
	}
	s.installShared(t, filepath.Join(s.share, dir), "/usr/local/bin/"+dir)
}

// ustreamers lists the pids of the running ustreamers: the daemon names
// them kvmd/streamer (--process-name-prefix).
func (s *system) ustreamers(t *testing.T) []string {
	t.Helper()
	out, _ := s.m.shell.run(t, "pgrep -f '^kvmd/streamer: ustreamer'")
	return strings.Fields(out)
}

// streamerState is the part of GET /api/streamer the test reads.
type streamerState struct {
	Params  map[string]any `json:"params"`
	Applied map[string]any `json:"applied"`
	Capture *struct {
		Status     string `json:"status"`
		Resolution *struct {
			Width  int `json:"width"`
			Height int `json:"height"`
		} `json:"resolution"`
	} `json:"capture"`
	Streamer *struct {
		Source struct {
			Online     bool `json:"online"`
			Resolution struct {
				Width  int `json:"width"`
				Height int `json:"height"`
			} `json:"resolution"`
		} `json:"source"`
		Stream struct {
			Clients int `json:"clients"`
		} `json:"stream"`
	} `json:"streamer"`
	Error *string `json:"error"`
}

func (s *system) streamerState(t *testing.T) streamerState {
	t.Helper()
	var st streamerState
	s.getJSON(t, "/api/streamer", &st)
	return st
}

// cpuTicks is utime+stime of pid in the guest, in clock ticks (1/100 s).
func (s *system) cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	st := s.m.shell.must(t, fmt.Sprintf("cat /proc/%d/stat", pid))
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+2:])
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, st)
	}
	return u + k
}

// waitState polls /api/streamer until ok says yes.
func (s *system) waitState(t *testing.T, what string, d time.Duration, ok func(streamerState) bool) streamerState {
	t.Helper()
	var st streamerState
	if !waitFor(context.Background(), d, 250*time.Millisecond, func() bool {
		st = s.streamerState(t)
		return ok(st)
	}) {
		b, _ := json.Marshal(st)
		t.Fatalf("%s: not within %v; /api/streamer %s", what, d, b)
	}
	return st
}

// rate runs kvmd-streamcheck rate in the guest.
func (s *system) rate(t *testing.T, sock, path string, secs float64, pid int) streamRate {
	t.Helper()
	cmd := fmt.Sprintf("kvmd-streamcheck rate %s %s %g", sock, path, secs)
	if pid > 0 {
		cmd += " " + strconv.Itoa(pid)
	}
	out := s.m.shell.must(t, cmd)
	var r streamRate
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %q", cmd, out)
	}
	return r
}

// holdStream is a WebSocket client that asked for the stream (kvmd's
// stream=1), which keeps the streamer running, as the web page does.
func (s *system) holdStream(t *testing.T) func() {
	t.Helper()
	hc := *s.c.hc
	hc.Timeout = 0
	hdr := http.Header{}
	for k, v := range s.creds(t) {
		hdr.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(s.c.base, "https")+"/api/ws", &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("WebSocket: %v", err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	go func() {
		for { // read the events, so the daemon never drops the client as slow
			if _, _, err := c.Read(rctx); err != nil {
				return
			}
		}
	}()
	return func() {
		rcancel()
		c.Close(websocket.StatusNormalClosure, "")
	}
}

// snapshot GETs path with hdr, decodes the JPEG whole (its header alone,
// all jpeg.DecodeConfig reads, is no picture) and returns its size. With
// bars it also holds the picture to vivid's colour bars, as the console
// check holds the browser's (at 0.6 of its height, below vivid's text).
func (s *system) snapshot(t *testing.T, path string, hdr map[string]string, bars bool) (int, int) {
	t.Helper()
	st, body, err := s.c.do("GET", path, hdr, nil)
	if err != nil || st != 200 {
		t.Fatalf("GET %s: %d %v %.300s", path, st, err, body)
	}
	img, err := jpeg.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: not a JPEG (%v): %.100q", path, err, body)
	}
	if bars {
		if got, err := colorbars.CheckWhole(img, 0.6); err != nil {
			t.Errorf("GET %s: the snapshot does not show vivid's colour bars: %v (colours %v)", path, err, got)
		}
	}
	return img.Bounds().Dx(), img.Bounds().Dy()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	sort.Float64s(c)
	return c[len(c)/2]
}

// testStreamer: ustreamer from Debian on vivid, run by the daemon. A
// stream request starts it; the snapshot is a JPEG of vivid's resolution
// showing its colour bars, pixel by pixel; the stream comes through the
// daemon at the rate a client gets from ustreamer directly, beside a
// client that stopped reading; set_params changes what applied says and
// what the stream delivers; a kill -9 is
// followed by a new ustreamer; vivid without a signal shows in
// /api/streamer and on the console; the console in Chromium shows vivid's
// colour bars; Home Assistant's pikvm and kvm-pilot get their snapshots;
// PiKVM's own page behind a proxy shows the stream; the last client gone,
// ustreamer stops.
func (s *system) testStreamer(t *testing.T, fig *figures) {
	sh := s.m.shell
	start := time.Now()
	f := &fig.streamer
	s.installGuestTool(t, "kvmd-streamcheck")
	// A client of a subtest before may have left less than the shutdown
	// delay (10 s) ago.
	if p := s.ustreamers(t); len(p) != 0 && !waitFor(context.Background(), 20*time.Second, 250*time.Millisecond, func() bool {
		return len(s.ustreamers(t)) == 0
	}) {
		t.Fatalf("ustreamer runs without a client: %v", p)
	}
	kvmdPID := s.mainPID(t)
	// vivid at 640x480p59.94 (dv_timings_signal_mode 4: the timings of
	// the dv_timings menu, whose first is that): under emulation
	// ustreamer's CPU encoder makes a few frames a second of its default
	// 1280x720, too few to tell rates apart.
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=0 -c dv_timings_signal_mode=4")
	idle0 := s.cpuTicks(t, kvmdPID)
	time.Sleep(4 * time.Second)
	idle := s.cpuTicks(t, kvmdPID) - idle0
	f.idlePct = float64(idle) / 4
	t.Logf("the daemon idle, no streamer: %d ticks in 4 s", idle)

	// A stream request with the streamer stopped: it starts, and the
	// first frame comes through the daemon (root over the unix socket).
	first := s.rate(t, daemonSock, "/streamer/stream", 1, 0)
	f.firstFrame = first.FirstMS
	t.Logf("stream request with the streamer stopped to the first frame through the daemon: %.0f ms", first.FirstMS)
	release := s.holdStream(t)
	defer func() { release() }()
	pids := s.ustreamers(t)
	if len(pids) != 1 {
		t.Fatalf("ustreamers running: %v, want one", pids)
	}
	if log := sh.must(t, "journalctl -b -o cat -u kvmd.service | grep -c 'ustreamer: ' || true"); log == "0" {
		t.Error("ustreamer's output is not in the daemon's journal")
	}
	cmdline := sh.must(t, "tr '\\0' ' ' </proc/"+pids[0]+"/cmdline")
	for _, want := range []string{"--device=/dev/video0", "--dv-timings", "--format=YUYV", "--encoder=CPU", "--unix=" + ustreamerSock} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("ustreamer's command line %q lacks %s", cmdline, want)
		}
	}

	// The snapshot: a JPEG of vivid's resolution, as the daemon reads it.
	var info struct {
		HW struct {
			Video struct {
				Driver     *string `json:"driver"`
				Resolution *struct {
					Width  int `json:"width"`
					Height int `json:"height"`
				} `json:"resolution"`
				Status string `json:"status"`
			} `json:"video"`
		} `json:"hw"`
	}
	s.getJSON(t, "/api/info?fields=hw", &info)
	v := info.HW.Video
	if v.Driver == nil || *v.Driver != "vivid" || v.Status != "ok" || v.Resolution == nil {
		t.Fatalf("hw.video %+v: want vivid with a signal", v)
	}
	f.width, f.height = v.Resolution.Width, v.Resolution.Height
	if w, h := s.snapshot(t, "/api/streamer/snapshot", s.creds(t), true); w != f.width || h != f.height {
		t.Errorf("the snapshot is %dx%d, vivid's signal %dx%d", w, h, f.width, f.height)
	}
	st := s.waitState(t, "the streamer's state", 30*time.Second, func(st streamerState) bool { return st.Streamer != nil })
	if r := st.Streamer.Source.Resolution; !st.Streamer.Source.Online || r.Width != f.width || r.Height != f.height || st.Capture == nil || st.Capture.Status != "ok" {
		t.Errorf("/api/streamer: %+v", st)
	}

	// The rate through the daemon against ustreamer's own socket: two
	// clients at once, one on each, so that both share the machine as it
	// is (under emulation ustreamer's encoder takes all the CPU there is,
	// so a rate measured alone depends on what else ran then).
	const roundSecs = 5
	for range 3 {
		out := sh.must(t, fmt.Sprintf("kvmd-streamcheck pair %s /stream %s /streamer/stream %d", ustreamerSock, daemonSock, roundSecs))
		var pr [2]streamRate
		if err := json.Unmarshal([]byte(out), &pr); err != nil {
			t.Fatalf("kvmd-streamcheck pair: %q", out)
		}
		f.direct = append(f.direct, pr[0].FPS)
		f.daemon = append(f.daemon, pr[1].FPS)
		f.ratios = append(f.ratios, pr[1].FPS/pr[0].FPS)
		t.Logf("round: at once, ustreamer's socket %.2f fps (%d frames), through the daemon %.2f fps (%d frames)",
			pr[0].FPS, pr[0].Frames, pr[1].FPS, pr[1].Frames)
	}
	// The daemon's CPU a frame relayed: its CPU time while a client reads
	// through it, less its CPU time for as long while the client reads
	// ustreamer directly (the WebSocket client's events, the state poll,
	// the hardware readings go on either way).
	for i := range 2 {
		d := s.rate(t, ustreamerSock, "/stream", roundSecs, kvmdPID)
		if i == 0 {
			sh.must(t, "top -b -d 3 -n 2 -w 200 > /run/kvmd-top.log 2>&1 &")
		}
		p := s.rate(t, daemonSock, "/streamer/stream", roundSecs, kvmdPID)
		if i == 0 {
			top, _ := sh.run(t, "sleep 2; awk 'NR>1 && /^top -/{p=1} p' /run/kvmd-top.log | head -16")
			t.Logf("top during a round through the daemon:\n%s", top)
		}
		if p.Frames > 0 {
			// Ticks are 1/100 s; the direct round's scaled to the relay's length.
			relay := float64(p.CPUTicks) - float64(d.CPUTicks)*p.Seconds/d.Seconds
			f.cpuPerFrame = append(f.cpuPerFrame, relay*10/float64(p.Frames))
			f.cpuRelay = append(f.cpuRelay, float64(p.CPUTicks)*10/p.Seconds)
			f.cpuBeside = append(f.cpuBeside, float64(d.CPUTicks)*10/d.Seconds)
		}
		t.Logf("alone: ustreamer's socket %.2f fps (daemon CPU %d ticks), through the daemon %.2f fps (daemon CPU %d ticks for %d frames)",
			d.FPS, d.CPUTicks, p.FPS, p.CPUTicks, p.Frames)
	}
	ratio := median(f.ratios)
	t.Logf("stream: %.1f fps from ustreamer's socket, %.1f through the daemon at the same time (median ratio %.3f), daemon CPU %.2f ms a frame relayed",
		median(f.direct), median(f.daemon), ratio, median(f.cpuPerFrame))
	if ratio < 0.95 {
		t.Errorf("through the daemon %.3fx the direct rate (rounds %v), want at least 0.95", ratio, f.ratios)
	}
	q80 := s.rate(t, daemonSock, "/streamer/stream", 2, 0)

	// A client of the daemon that stopped reading slows neither another
	// client of the daemon nor ustreamer's own.
	sh.must(t, "setsid nohup kvmd-streamcheck stall "+daemonSock+" /streamer/stream 20 >/run/kvmd-stall.log 2>&1 & sleep 3")
	out := sh.must(t, fmt.Sprintf("kvmd-streamcheck pair %s /stream %s /streamer/stream %d", ustreamerSock, daemonSock, roundSecs))
	var beside [2]streamRate
	if err := json.Unmarshal([]byte(out), &beside); err != nil {
		t.Fatalf("kvmd-streamcheck pair: %q", out)
	}
	t.Logf("beside a client that stopped reading: ustreamer's socket %.2f fps, through the daemon %.2f fps", beside[0].FPS, beside[1].FPS)
	if beside[1].FPS < 0.9*beside[0].FPS || beside[0].FPS < 0.5*median(f.direct) {
		t.Errorf("beside a stalled client: through the daemon %.2f fps, ustreamer's socket %.2f (before: %.2f)", beside[1].FPS, beside[0].FPS, median(f.direct))
	}

	// set_params: applied follows, and so does the stream.
	if st, body, err := s.c.do("POST", "/api/streamer/set_params?desired_fps=5&quality=30", s.creds(t), nil); err != nil || st != 200 {
		t.Fatalf("set_params: %d %v %s", st, err, body)
	}
	s.waitState(t, "applied desired_fps 5, quality 30", 60*time.Second, func(st streamerState) bool {
		return st.Applied["desired_fps"] == 5.0 && st.Applied["quality"] == 30.0 && st.Streamer != nil
	})
	slow := s.rate(t, daemonSock, "/streamer/stream", roundSecs, 0)
	t.Logf("at desired_fps 5, quality 30: %.1f fps, %d B a frame (quality 80: %.1f fps, %d B)", slow.FPS, slow.BytesPerFrame, q80.FPS, q80.BytesPerFrame)
	if slow.FPS > 5.5 {
		t.Errorf("at desired_fps 5 the stream delivers %.1f fps", slow.FPS)
	}
	if slow.BytesPerFrame >= q80.BytesPerFrame*9/10 {
		t.Errorf("at quality 30 a frame is %d B, at 80 %d B: no smaller", slow.BytesPerFrame, q80.BytesPerFrame)
	}
	if st, body, err := s.c.do("POST", "/api/streamer/set_params?desired_fps=30&quality=80", s.creds(t), nil); err != nil || st != 200 {
		t.Fatalf("set_params back: %d %v %s", st, err, body)
	}
	s.waitState(t, "applied back", 60*time.Second, func(st streamerState) bool {
		return st.Applied["desired_fps"] == 30.0 && st.Applied["quality"] == 80.0 && st.Streamer != nil
	})

	// kill -9: the daemon starts a new one.
	old := s.ustreamers(t)
	if len(old) != 1 {
		t.Fatalf("ustreamers before the kill: %v", old)
	}
	killed := time.Now()
	sh.must(t, "kill -9 "+old[0])
	var now []string
	if !waitFor(context.Background(), 60*time.Second, 100*time.Millisecond, func() bool {
		now = s.ustreamers(t)
		return len(now) == 1 && now[0] != old[0]
	}) {
		t.Fatalf("after kill -9 of %s: ustreamers %v", old[0], now)
	}
	s.snapshot(t, "/api/streamer/snapshot", s.creds(t), true)
	f.restart = time.Since(killed)
	t.Logf("kill -9 to a new ustreamer's snapshot: %v", f.restart.Round(100*time.Millisecond))
	if log := sh.must(t, "journalctl -b -o cat -u kvmd.service | grep 'streamer exited' | tail -1"); !strings.Contains(log, "pid="+old[0]) {
		t.Errorf("the death is not in the journal: %q", log)
	}

	// No signal: vivid's signal mode 1. ustreamer 4.9 would go on saying
	// online; the daemon's reading says not, in /api/streamer and on the
	// console.
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings_signal_mode=1")
	s.waitState(t, "no signal in /api/streamer", 30*time.Second, func(st streamerState) bool {
		return st.Capture != nil && st.Capture.Status == "no_signal" && st.Streamer != nil && !st.Streamer.Source.Online
	})
	if st, _, _ := s.c.do("GET", "/api/streamer/snapshot", s.creds(t), nil); st != 503 {
		t.Errorf("a snapshot without a signal: %d, want 503", st)
	}
	s.snapshot(t, "/api/streamer/snapshot?allow_offline=1", s.creds(t), false)
	wc := s.webcheck(t, "console", "-url", s.c.base, "-passwd", s.passwd, "-overlay", "No signal",
		"-out", s.shotPath("console-no-signal.png"))
	t.Logf("the console without a signal: %v", wc)
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings_signal_mode=4")
	s.waitState(t, "the signal back", 60*time.Second, func(st streamerState) bool {
		return st.Capture != nil && st.Capture.Status == "ok" && st.Streamer != nil && st.Streamer.Source.Online
	})

	// The console: vivid's colour bars, checked pixel by pixel; then the
	// keyboard and mouse captured over the picture reach the guest's
	// input layer through the gadget: the text typed into the page, and
	// a click at a quarter of the picture's width and three quarters of
	// its height at that absolute position.
	s.buildGuestTool(t)
	kbd, mouse := s.inputNodes(t)
	w := s.startWatch(t, "console", kbd, mouse)
	defer sh.run(t, "kill "+w.pid)
	const text = "kvmd console 27"
	t.Logf("the console's input from %s", sh.must(t, "date +%s.%N"))
	wc = s.webcheck(t, "console", "-url", s.c.base, "-passwd", s.passwd, "-bars", "-out", s.shotPath("console-vivid.png"),
		"-click", "0.25,0.75", "-type", text)
	t.Logf("the console with vivid: %v", wc)
	if m, ok := wc["moved"]; ok {
		t.Errorf("capturing the keyboard moved the console's picture from %v to %v", wc["rect"], m)
	}
	n := 0
	evs := w.events(t, 20*time.Second, quiet(&n))
	var kevs []inputEvent // the keyboard's: the click's button is the mouse's
	for _, e := range evs {
		if e.dev == 0 {
			kevs = append(kevs, e)
		}
	}
	if got := typed(kevs, usLayout); got != text {
		t.Errorf("typed into the console %q, the guest's keyboard got %q\n%s", text, got, describeEvents(keyEvents(evs)))
	}
	if err := consoleClick(evs, 0.25, 0.75); err != nil {
		t.Errorf("the console's click at the guest's mouse: %v\n%s", err, describeEvents(evs))
	}
	if t.Failed() {
		_, hs, _ := s.c.do("GET", "/api/hid", s.creds(t), nil)
		_, ms, _ := s.c.do("GET", "/api/export/prometheus/metrics", s.creds(t), nil)
		var hm []string
		for _, l := range strings.Split(string(ms), "\n") {
			if strings.HasPrefix(l, "kvmd_hid") {
				hm = append(hm, l)
			}
		}
		t.Logf("/api/hid: %s\n%s\nthe daemon's HID lines:\n%s\nthe watcher's last lines:\n%s", hs, strings.Join(hm, "\n"),
			sh.must(t, "date +%s.%N; journalctl -b -o short-unix -u kvmd.service | grep -v component=http | grep -i hid | tail -20; dmesg | grep -i -e usb -e hid | tail -30"),
			sh.must(t, "tail -5 "+w.log))
	}

	// Third-party clients, their requests as their sources make them.
	s.thirdPartySnapshots(t)
	s.pikvmPage(t)

	// The last client leaves: ustreamer stops after the shutdown delay
	// (10 s), not before.
	sh.must(t, "pkill -x kvmd-streamcheck || true") // the stalled client, if it still waits
	left := time.Now()
	release()
	release = func() {}
	if !waitFor(context.Background(), 60*time.Second, 250*time.Millisecond, func() bool { return len(s.ustreamers(t)) == 0 }) {
		t.Fatalf("ustreamer still runs %v after the last client left", time.Since(left))
	}
	f.stopAfter = time.Since(left)
	t.Logf("the last client gone to ustreamer stopped: %v", f.stopAfter.Round(100*time.Millisecond))
	if f.stopAfter < 10*time.Second {
		t.Errorf("ustreamer stopped %v after the last client: before the 10 s shutdown delay", f.stopAfter)
	}
	t.Logf("streamer checks: %v", time.Since(start).Round(time.Second))
}

// shotPath is where a screenshot of the booted test goes: the log
// directory when one is set, else the test's temporary directory.
func (s *system) shotPath(name string) string {
	if d := os.Getenv("KVMD_IMAGETEST_LOGDIR"); d != "" {
		return filepath.Join(d, name)
	}
	return filepath.Join(s.t.TempDir(), name)
}

// webcheck runs tools/cmd/webcheck (Chromium, from the tools module) and
// returns what it printed.
func (s *system) webcheck(t *testing.T, args ...string) map[string]any {
	t.Helper()
	bin := s.webcheckBin(t)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res map[string]any
	json.Unmarshal(out, &res)
	if err != nil {
		t.Fatalf("webcheck %s: %v\n%s\n%s", strings.Join(args[:1], " "), err, out, tail(stderr.String(), 2000))
	}
	return res
}

func (s *system) webcheckBin(t *testing.T) string {
	t.Helper()
	if s.webcheckPath != "" {
		return s.webcheckPath
	}
	bin := filepath.Join(s.t.TempDir(), "webcheck")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/webcheck")
	cmd.Dir = "../tools"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building webcheck: %v\n%s", err, out)
	}
	s.webcheckPath = bin
	return bin
}

// thirdPartySnapshots makes the snapshot requests of two clients of
// PiKVM's API as their sources make them, and each gets a JPEG.
func (s *system) thirdPartySnapshots(t *testing.T) {
	// Home Assistant's pikvm integration (github.com/pschmitt/
	// homeassistant-pikvm, custom_components/pikvm/api.py at 9cd02d8,
	// async_get_snapshot): the X-KVMD-User and X-KVMD-Passwd headers, a
	// WebSocket with stream=1 held open, a second's wait, then GET
	// /api/streamer/snapshot?allow_offline=1.
	hc := *s.c.hc
	hc.Timeout = 0
	hdr := http.Header{}
	for k, v := range s.creds(t) {
		hdr.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(s.c.base, "https")+"/api/ws?stream=1", &websocket.DialOptions{HTTPClient: &hc, HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("Home Assistant's WebSocket: %v", err)
	}
	time.Sleep(time.Second)
	w, h := s.snapshot(t, "/api/streamer/snapshot?allow_offline=1", s.creds(t), true)
	c.Close(websocket.StatusNormalClosure, "")
	t.Logf("Home Assistant pikvm's snapshot: a %dx%d JPEG", w, h)

	// kvm-pilot (github.com/DustinTrap/kvm-pilot, src/kvm_pilot/client.py
	// at 59e6982, snapshot; http.py _headers and _request_once): urllib's
	// GET /api/streamer/snapshot, no parameters, the X-KVMD headers; the
	// answer must start with a JPEG's SOI.
	hdrs := s.creds(t)
	hdrs["User-Agent"] = "Python-urllib/3.12"
	hdrs["Accept-Encoding"] = "identity"
	st, body, err := s.c.do("GET", "/api/streamer/snapshot", hdrs, nil)
	if err != nil || st != 200 || !bytes.HasPrefix(body, []byte{0xff, 0xd8, 0xff}) {
		t.Fatalf("kvm-pilot's snapshot: %d %v %.50q", st, err, body)
	}
	t.Logf("kvm-pilot's snapshot: %d bytes of JPEG", len(body))
}

// pikvmPage serves PiKVM's own web pages (from a local mirror of
// github.com/pikvm/kvmd: KVMD_PIKVM_REPO, a git directory, by default
// /work/.mirror/pikvm+kvmd/repo) from nginx on this host, in front of the
// daemon over TCP as the README's proxy section has it, and checks in
// Chromium that its KVM page shows vivid's stream, in MJPEG and in its
// Direct H.264 mode. PiKVM's files are taken at test time, never kept
// in this repository.
func (s *system) pikvmPage(t *testing.T) {
	repo, err := testutil.FindPiKVMRepo()
	if err != nil {
		if testutil.PiKVMRequired() {
			t.Errorf("PiKVM's page: %v; failing because %s=1", err, testutil.PiKVMRequireEnv)
		} else {
			t.Logf("PiKVM's page not checked: %v", err)
		}
		return
	}
	nginx := "/usr/sbin/nginx"
	if _, err := os.Stat(nginx); err != nil {
		t.Fatalf("nginx is needed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	web := filepath.Join(dir, "web")
	if err := os.Mkdir(web, 0o755); err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(run(t, "git", "-C", repo, "rev-parse", "--short", "HEAD"))
	arch := exec.Command("sh", "-c", "git -C \"$0\" archive HEAD web | tar -x -C \"$1\" --strip-components=1", repo, web)
	if out, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("PiKVM's web files: %v\n%s", err, out)
	}
	// TLS, as a device's nginx has it: the daemon marks its cookie Secure
	// when it is reached over TLS, which a browser keeps only from an
	// https page.
	certFile, keyFile := testutil.WriteCertPEM(t, dir, testutil.SelfSigned(t))
	port := freePort(t)
	// The workers as root: the files are in the test's own directories.
	conf := fmt.Sprintf(`daemon off;
user root root;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
	include /etc/nginx/mime.types;
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
	map $http_upgrade $connection_upgrade { default upgrade; "" close; }
	server {
		listen 127.0.0.1:%[2]d ssl;
		ssl_certificate %[5]s;
		ssl_certificate_key %[6]s;
		# PiKVM's pages, as its nginx serves them (configs/nginx/kvmd.ctx-server.conf).
		location /kvm/ { alias %[3]s/kvm/; }
		location /share/ { alias %[3]s/share/; }
		location = /share/js/kvm/janus.js { return 404; }
		# Everything else to the daemon, over TCP: the README's proxy section.
		location / {
			proxy_pass https://127.0.0.1:%[4]d;
			proxy_ssl_verify off;
			proxy_set_header Host $http_host;
			proxy_set_header X-Real-IP $remote_addr;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header Forwarded "";
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_http_version 1.1;
			proxy_buffering off;
			proxy_read_timeout 1h;
		}
	}
}
`, dir, port, web, s.m.port, certFile, keyFile)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ng := exec.Command(nginx, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	var ngOut bytes.Buffer
	ng.Stdout, ng.Stderr = &ngOut, &ngOut
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ng.Process.Signal(os.Interrupt)
		ng.Wait()
	}()
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if !waitFor(context.Background(), 10*time.Second, 100*time.Millisecond, func() bool {
		resp, err := insecure.Get(base + "/kvm/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}) {
		errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		t.Fatalf("nginx did not serve PiKVM's page: %s\n%s", ngOut.String(), errLog)
	}
	res := s.webcheck(t, "pikvm", "-url", base, "-passwd", s.passwd, "-out", s.shotPath("pikvm-kvm-page.png"))
	t.Logf("PiKVM's KVM page (kvmd %s) behind nginx shows the stream: %v", rev, res)
	// Its Direct H.264 mode: /api/media/ws through the proxy, from the
	// guest's software encoder, decoded by Chromium's WebCodecs.
	res = s.webcheck(t, "pikvm", "-url", base, "-passwd", s.passwd, "-video", "media", "-out", s.shotPath("pikvm-h264.png"))
	t.Logf("PiKVM's KVM page in its Direct H.264 mode: %v", res)
}

// consoleClick checks the mouse's events (device 1 of the watcher) for a
// left click at fx,fy of the picture: the last absolute position before
// the press within 1 % of the axis (0..32767, the gadget's range: kvmd's
// -32768..32767 halved), then the press and the release.
func consoleClick(evs []inputEvent, fx, fy float64) error {
	x, y, step := -1, -1, 0
	for _, e := range evs {
		switch {
		case e.dev != 1:
		case e.typ == evAbs && e.code == absX && step == 0:
			x = e.value
		case e.typ == evAbs && e.code == absY && step == 0:
			y = e.value
		case e.typ == evKey && e.code == btnLeft && e.value == 1 && step == 0:
			step = 1
		case e.typ == evKey && e.code == btnLeft && e.value == 0 && step == 1:
			step = 2
		}
	}
	if step != 2 {
		return errors.New("no press and release of the left button")
	}
	wx, wy := int(fx*32767), int(fy*32767)
	if abs(x-wx) > 328 || abs(y-wy) > 328 {
		return fmt.Errorf("pressed at %d,%d, want about %d,%d", x, y, wx, wy)
	}
	return nil
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
