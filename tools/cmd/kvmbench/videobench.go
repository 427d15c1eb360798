package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"kvmd/h264"
	"kvmd/h264/h264test"
	"kvmd/internal/demo"
	"kvmd/internal/framestamp"
	"kvmd/whep/wheptest"
)

// The picture's rows (issue 37): the demo's source draws each picture of
// 1920x1080 at 30 a second with its number and the time it was drawn in
// it (KVMD_DEMO_STAMP=1, package framestamp); three clients take it
// through the daemon at once, side by side: MJPEG (/streamer/stream),
// PiKVM's Direct H.264 (/api/media/ws?video=h264) and a WebRTC peer
// (pion, WHEP), the two H.264 ones from the software encoder (ffmpeg's
// libx264). Each records when each picture's last byte reached it; the
// pictures are decoded afterwards (Go's JPEG decoder, ffmpeg's H.264) and
// their stamps read: the latency of a picture is its arrival less its
// stamp, the decoding apart (a browser's), the source's own drawing and
// JPEG encoding in it (as a capture's would be).
const (
	videoWarmup  = 2 * time.Second
	videoMeasure = 10 * time.Second
	videoPhase   = 5 * time.Second // each way alone, for the CPU
	videoPeers   = 10
	// targetVideoP50: the goal of a picture's latency through WebRTC,
	// median, at 1080p30 with the software encoder.
	targetVideoP50 = 50 * time.Millisecond
	// targetVideoBitrate: H.264 at most this fraction of MJPEG's bytes
	// for the same pictures.
	targetVideoBitrate = 0.2
)

// videoWays are the three ways, in the report's order.
var videoWays = []string{"webrtc", "media", "mjpeg"}

var videoWayNames = map[string]string{"webrtc": "WebRTC (WHEP)", "media": "Direct H.264 (/api/media/ws)", "mjpeg": "MJPEG (/streamer/stream)"}

// received is one picture as a client got it.
type received struct {
	data    []byte
	arrived time.Time
}

// videoWay is what one way's client got.
type videoWay struct {
	pics     []received
	first    int // the first of pics in the measure (the H.264 ways keep the warm-up's too)
	bytes    int64
	seconds  float64
	latency  []time.Duration // of each picture whose stamp read
	unread   int             // pictures whose stamp did not read
	numbers  []uint16        // their stamps' numbers, in order (for the pairing)
	luma     [][]byte        // their decoded luma planes, for the quality
	cpuFrame float64         // the daemon's CPU, ms a picture, this way alone, less its CPU without a client
	err      error
}

type videoResult struct {
	width, height int
	ways          map[string]*videoWay
	ssim          float64 // H.264 (Direct) against MJPEG, the same pictures paired by their numbers
	ssimPairs     int
	idleCPU       float64 // the daemon's CPU, ms a second, the source running and no client
	encoderCPU    float64 // ffmpeg's, ms a picture
	jpegEncode    time.Duration
	rssBefore     int64
	rssPeers      int64
	peers         int
	// The machine's load average (1 minute) before and after the three
	// ways' measure: the latencies move with it.
	loadBefore, loadAfter string
}

// runVideoBench runs kvmd serve --demo with the stamped source.
func runVideoBench(ctx context.Context, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*videoResult, error) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("the picture's rows need ffmpeg (make deps installs it): %w", err)
	}
	res := &videoResult{width: 1920, height: 1080, ways: map[string]*videoWay{}}
	res.jpegEncode = sourceEncodeTime()
	hdr := http.Header{"X-Kvmd-User": {benchUser}, "X-Kvmd-Passwd": {passwd}}
	// One user holds half the peers (the daemon's share of WebRTC peers):
	// room for videoPeers and the clients of the measure.
	peerArgs := []string{"--webrtc-max-peers", strconv.Itoa(2 * (videoPeers + 2))}

	// The CPU of each way alone, on the demo's own source, which sends
	// the same JPEG until its picture changes once a second (its drawing
	// would hide the daemon's work a picture): MJPEG first (no encoder
	// yet), then the source with no client (the streamer stays its
	// shutdown delay), then Direct H.264 (its encoder starts), then
	// WebRTC on the running one; then the memory with the peers.
	plain, addr, err := startDemo(ctx, procs, kvmd, users, dir, "kvmd-video-cpu", nil, peerArgs...)
	if err != nil {
		return nil, err
	}
	defer procs.stop(plain, 3*time.Second)
	pid := plain.cmd.Process.Pid
	base := "http://" + addr
	phase := func(way string) (float64, int, error) {
		pctx, cancel := context.WithTimeout(ctx, videoWarmup+videoPhase+30*time.Second)
		defer cancel()
		w := &videoWay{}
		var c0 time.Duration
		var n0 int
		start := func() { c0, _ = cpuTime(pid); n0 = len(w.pics) }
		if err := takeWay(pctx, way, base, hdr, videoWarmup, videoPhase, start, w); err != nil {
			return 0, 0, err
		}
		c1, err := cpuTime(pid)
		if err != nil {
			return 0, 0, err
		}
		n := len(w.pics) - n0
		return float64((c1 - c0).Microseconds()) / 1000, n, nil
	}
	cpuOf := map[string]float64{}
	framesOf := map[string]int{}
	for _, way := range []string{"mjpeg", "idle", "media", "webrtc"} {
		if way == "idle" {
			c0, _ := cpuTime(pid)
			time.Sleep(videoPhase)
			c1, err := cpuTime(pid)
			if err != nil {
				return nil, err
			}
			res.idleCPU = float64((c1 - c0).Microseconds()) / 1000 / videoPhase.Seconds()
			logf("video: the daemon with its source and no client: %.0f ms of CPU a second", res.idleCPU)
			continue
		}
		ms, n, err := phase(way)
		if err != nil {
			return nil, fmt.Errorf("%s alone: %w", way, err)
		}
		cpuOf[way], framesOf[way] = ms, n
		logf("video: %s alone: %d pictures in %v, the daemon's CPU %.0f ms", way, n, videoPhase, ms)
	}
	if err := peersRSS(ctx, res, pid, base, hdr, logf); err != nil {
		return nil, err
	}
	if plain.exited() {
		return nil, plain.exitError()
	}
	procs.stop(plain, 3*time.Second)

	// The stamped source, for the latency, the bitrate and the encoder's
	// CPU: the three at once.
	srv, addr, err := startDemo(ctx, procs, kvmd, users, dir, "kvmd-video", []string{"KVMD_DEMO_STAMP=1"}, peerArgs...)
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	pid, base = srv.cmd.Process.Pid, "http://"+addr

	// The encoder starts with the first H.264 client: warm it up first.
	var warm videoWay
	if err := takeWay(ctx, "media", base, hdr, videoWarmup, time.Second, func() {}, &warm); err != nil {
		return nil, fmt.Errorf("warming up: %w", err)
	}
	encPid := childPid(pid, "ffmpeg")
	var e0 time.Duration
	if encPid > 0 {
		e0, _ = cpuTime(encPid)
	}
	res.loadBefore = loadAverage()
	var wg sync.WaitGroup
	mctx, cancel := context.WithTimeout(ctx, videoWarmup+videoMeasure+time.Minute)
	defer cancel()
	for _, way := range videoWays {
		w := &videoWay{}
		res.ways[way] = w
		wg.Go(func() {
			w.err = takeWay(mctx, way, base, hdr, videoWarmup, videoMeasure, func() {}, w)
		})
	}
	wg.Wait()
	res.loadAfter = loadAverage()
	encFrames := len(res.ways["media"].pics)
	if encPid > 0 {
		if e1, err := cpuTime(encPid); err == nil && encFrames > 0 {
			res.encoderCPU = float64((e1 - e0).Microseconds()) / 1000 / float64(encFrames)
		}
	}
	for _, way := range videoWays {
		w := res.ways[way]
		if w.err != nil {
			return nil, fmt.Errorf("%s: %w", way, w.err)
		}
		if n := framesOf[way]; n > 0 {
			w.cpuFrame = (cpuOf[way] - res.idleCPU*videoPhase.Seconds()) / float64(n)
		}
		if err := readStamps(ffmpeg, way, w, res.width, res.height); err != nil {
			return nil, fmt.Errorf("%s: reading the stamps: %w", way, err)
		}
		p50 := time.Duration(quantileDur(w.latency, 0.5))
		var sum time.Duration
		for _, d := range w.latency {
			sum += d
		}
		mean := time.Duration(0)
		if len(w.latency) > 0 {
			mean = sum / time.Duration(len(w.latency))
		}
		logf("video: %s: %d pictures (%d without a stamp read), %.0f kbit/s, latency p50 %v p95 %v mean %v", way, len(w.pics), w.unread,
			float64(w.bytes)*8/w.seconds/1000, p50.Round(100*time.Microsecond), time.Duration(quantileDur(w.latency, 0.95)).Round(100*time.Microsecond),
			mean.Round(100*time.Microsecond))
	}
	// The same pictures through both H.264 ways, paired by their stamps'
	// numbers: how much later one arrives than the other.
	if d, n := arrivalGap(res.ways["webrtc"], res.ways["media"]); n > 0 {
		logf("video: the same %d pictures: WebRTC arrives %v after Direct H.264 (median)", n, d)
	}
	res.ssim, res.ssimPairs, err = pairedSSIM(ffmpeg, dir, res.ways["media"], res.ways["mjpeg"], res.width, res.height)
	if err != nil {
		logf("video: SSIM: %v", err)
	}

	if srv.exited() {
		return nil, srv.exitError()
	}
	return res, nil
}

// arrivalGap is the median of a's latency less b's, over the pictures
// both read (by their stamps' numbers), and their count.
func arrivalGap(a, b *videoWay) (time.Duration, int) {
	byNum := map[uint16]time.Duration{}
	for i, n := range b.numbers {
		byNum[n] = b.latency[i]
	}
	var gaps []time.Duration
	for i, n := range a.numbers {
		if l, ok := byNum[n]; ok {
			gaps = append(gaps, a.latency[i]-l)
		}
	}
	if len(gaps) == 0 {
		return 0, 0
	}
	return time.Duration(quantileDur(gaps, 0.5)), len(gaps)
}

// peersRSS reads the daemon's VmRSS before and with videoPeers WebRTC
// peers.
func peersRSS(ctx context.Context, res *videoResult, pid int, base string, hdr http.Header, logf func(string, ...any)) error {
	res.rssBefore, _ = readVmRSS(pid)
	var peers []*wheptest.Client
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	for range videoPeers {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		c, err := wheptest.Dial(pctx, wheptest.Post(http.DefaultClient, base+"/api/media/whep", hdr))
		cancel()
		if err != nil {
			return fmt.Errorf("peer %d: %w", len(peers)+1, err)
		}
		peers = append(peers, c)
	}
	res.peers = len(peers)
	time.Sleep(videoPhase)
	res.rssPeers, _ = readVmRSS(pid)
	logf("video: the daemon's VmRSS %.1f MiB with %d WebRTC peers (%.1f MiB before)", float64(res.rssPeers)/(1<<20), res.peers, float64(res.rssBefore)/(1<<20))
	return nil
}

// sourceEncodeTime is what the demo's source spends encoding one of its
// 1920x1080 pictures (Go's JPEG encoder at quality 80), median of five:
// a part of every way's latency, as a capture's encoder's is.
func sourceEncodeTime() time.Duration {
	img := demo.Picture(time.Now(), 1920, 1080)
	var ds []time.Duration
	for range 5 {
		start := time.Now()
		jpeg.Encode(io.Discard, img, &jpeg.Options{Quality: 80})
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// takeWay takes the pictures of one way for warmup+measure, calling
// start when the measure begins; w gets what came after.
func takeWay(ctx context.Context, way, base string, hdr http.Header, warmup, measure time.Duration, start func(), w *videoWay) error {
	var next func() ([]byte, time.Time, error)
	var closeFn func()
	switch way {
	case "mjpeg":
		resp, err := openStream(ctx, base, hdr)
		if err != nil {
			return err
		}
		r := h264.NewMJPEGReader(resp.Body)
		closeFn = func() { r.Close() }
		next = func() ([]byte, time.Time, error) {
			f, err := r.Next()
			return f.Data, time.Now(), err
		}
	case "media":
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/api/media/ws?video=h264", &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			return err
		}
		c.SetReadLimit(16 << 20)
		closeFn = func() { c.CloseNow() }
		next = func() ([]byte, time.Time, error) {
			_, msg, err := c.Read(ctx)
			return msg, time.Now(), err
		}
	case "webrtc":
		c, err := wheptest.Dial(ctx, wheptest.Post(http.DefaultClient, base+"/api/media/whep", hdr))
		if err != nil {
			return err
		}
		closeFn = func() {
			req, _ := http.NewRequest("DELETE", base+c.Location, nil)
			req.Header = hdr.Clone()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			c.Close()
		}
		next = func() ([]byte, time.Time, error) {
			u, err := c.Next(ctx)
			return u.Data, u.Arrived, err
		}
	default:
		return fmt.Errorf("no way %q", way)
	}
	defer closeFn()
	began := time.Now()
	measuring := false
	var t0 time.Time
	for {
		data, at, err := next()
		if err != nil {
			return err
		}
		now := time.Now()
		if !measuring && now.Sub(began) >= warmup {
			// The H.264 ways keep every unit from here: a decoder needs
			// the ones before too, and the first is a key unit anyway.
			measuring, t0 = true, now
			w.first = len(w.pics)
			start()
		}
		if way != "mjpeg" || measuring {
			w.pics = append(w.pics, received{data: data, arrived: at})
		}
		if measuring {
			w.bytes += int64(len(data))
			if now.Sub(t0) >= measure {
				w.seconds = now.Sub(t0).Seconds()
				return nil
			}
		}
	}
}

// openStream opens the MJPEG stream. A streamer that did not answer in
// time (503: the machine busy with the encoder and the other ways'
// clients) is asked again, three times at most.
func openStream(ctx context.Context, base string, hdr http.Header) (*http.Response, error) {
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/streamer/stream", nil)
		if err != nil {
			return nil, err
		}
		req.Header = hdr.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == 200 {
			return resp, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || try == 3 {
			return nil, fmt.Errorf("/streamer/stream: HTTP %d: %s", resp.StatusCode, body)
		}
		time.Sleep(time.Second)
	}
}

// readStamps decodes the way's pictures and reads their stamps: MJPEG's
// with Go's decoder, H.264's with ffmpeg (one picture out for each unit
// in, in order). The H.264 ways' pictures of the warmup are decoded (a
// decoder starts at a key unit) but not counted.
func readStamps(ffmpeg, way string, w *videoWay, width, height int) error {
	var lumas [][]byte
	if way == "mjpeg" {
		for _, p := range w.pics {
			img, err := jpeg.Decode(bytes.NewReader(p.data))
			if err != nil {
				return err
			}
			y, ok := img.(*image.YCbCr)
			if !ok {
				return errors.New("a JPEG that is not YCbCr")
			}
			lumas = append(lumas, tight(y.Y, y.YStride, width, height))
		}
	} else {
		var stream []byte
		for _, p := range w.pics {
			stream = append(stream, p.data...)
		}
		pics, pw, ph, err := h264test.DecodeRaw(ffmpeg, stream, "gray", 1)
		if err != nil {
			return err
		}
		if pw != width || ph != height {
			return fmt.Errorf("pictures of %dx%d, want %dx%d", pw, ph, width, height)
		}
		lumas = pics
		if len(lumas) != len(w.pics) {
			return fmt.Errorf("%d pictures decoded of %d units", len(lumas), len(w.pics))
		}
	}
	// The counted ones: the measure's (the H.264 ways kept the warmup's).
	for i := w.first; i < len(lumas); i++ {
		n, ms, ok := framestamp.Read(lumas[i], width, width, height)
		if !ok {
			w.unread++
			continue
		}
		w.latency = append(w.latency, framestamp.Since(ms, w.pics[i].arrived))
		w.numbers = append(w.numbers, n)
		w.luma = append(w.luma, lumas[i])
	}
	return nil
}

func tight(y []byte, stride, w, h int) []byte {
	out := make([]byte, 0, w*h)
	for row := range h {
		out = append(out, y[row*stride:row*stride+w]...)
	}
	return out
}

// pairedSSIM is ffmpeg's SSIM of the H.264 way's pictures against the
// MJPEG way's, paired by their stamps' numbers (the same source picture):
// the luma's, averaged.
func pairedSSIM(ffmpeg, dir string, h, m *videoWay, w, hgt int) (float64, int, error) {
	byNum := map[uint16][]byte{}
	for i, n := range m.numbers {
		byNum[n] = m.luma[i]
	}
	var a, b bytes.Buffer
	pairs := 0
	for i, n := range h.numbers {
		if mj, ok := byNum[n]; ok {
			a.Write(h.luma[i])
			b.Write(mj)
			pairs++
		}
	}
	if pairs == 0 {
		return 0, 0, errors.New("no picture in both")
	}
	fa, fb := filepath.Join(dir, "ssim-h264.gray"), filepath.Join(dir, "ssim-mjpeg.gray")
	if err := os.WriteFile(fa, a.Bytes(), 0o600); err != nil {
		return 0, 0, err
	}
	if err := os.WriteFile(fb, b.Bytes(), 0o600); err != nil {
		return 0, 0, err
	}
	defer os.Remove(fa)
	defer os.Remove(fb)
	size := fmt.Sprintf("%dx%d", w, hgt)
	out, err := exec.Command(ffmpeg, "-hide_banner", "-nostats", "-f", "rawvideo", "-pix_fmt", "gray", "-s", size, "-i", fa,
		"-f", "rawvideo", "-pix_fmt", "gray", "-s", size, "-i", fb, "-lavfi", "ssim", "-f", "null", "-").CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("ffmpeg ssim: %w: %s", err, out)
	}
	m2 := regexp.MustCompile(`All:([0-9.]+)`).FindSubmatch(out)
	if m2 == nil {
		return 0, 0, fmt.Errorf("no SSIM in ffmpeg's output: %s", out)
	}
	v, err := strconv.ParseFloat(string(m2[1]), 64)
	return v, pairs, err
}

// loadAverage is the machine's load average over the last minute
// (/proc/loadavg's first field), or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// childPid finds a child process of parent named name (/proc's comm).
func childPid(parent int, name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if s[i+1:j] == name && len(f) > 1 && f[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	return 0
}

func quantileDur(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(int(q*float64(len(s))), len(s)-1)])
}

func (w *videoWay) kbps() float64 {
	if w.seconds == 0 {
		return 0
	}
	return float64(w.bytes) * 8 / w.seconds / 1000
}

func (w *videoWay) fps() float64 {
	if w.seconds == 0 {
		return 0
	}
	return float64(len(w.latency)+w.unread) / w.seconds
}

func videoMethod(res *videoResult) string {
	enc, load := "", ""
	if res != nil {
		enc = fmt.Sprintf(" (%.0f ms each, measured here)", float64(res.jpegEncode.Microseconds())/1000)
		load = fmt.Sprintf(" (the load average was %s before the three ways' measure and %s after it)", res.loadBefore, res.loadAfter)
	}
	return fmt.Sprintf("`kvmd serve --demo` with `KVMD_DEMO_STAMP=1`: its source (the stand-in for ustreamer) draws each picture anew, "+
		"1920x1080 at 30 a second, with its number and the time it was drawn written into it as a row of blocks (internal/framestamp), "+
		"then encodes it as a JPEG at quality 80 with Go's encoder%s, in the daemon's process. "+
		"Three clients of kvmbench take the picture at once, side by side, over loopback: "+
		"**MJPEG** (`GET /streamer/stream`, the relay of that JPEG), **Direct H.264** (`/api/media/ws?video=h264`) and **WebRTC** "+
		"(a pion peer, WHEP at `/api/media/whep`), the two H.264 ones from the one software encoder (ffmpeg 5.1's libx264, "+
		"`-preset ultrafast -tune zerolatency`, the daemon's default 5000 kbit/s cap and GOP 60). "+
		"Each records when each picture's last byte reached it; after %v of warm-up, %v are counted. "+
		"The pictures are then decoded (Go's JPEG decoder, ffmpeg's H.264 decoder) and their stamps read: a picture's latency is its arrival "+
		"less its stamp (one clock: the same machine), the client's decoding apart (a browser's), the source's drawing and JPEG encoding in it, "+
		"as a capture's would be. The bitrate is the bytes each client took a second, for the same pictures; the H.264 pictures' quality is "+
		"ffmpeg's SSIM of their luma against the MJPEG ones', paired by their numbers. "+
		"The daemon's CPU a picture (`/proc/PID/stat`) is each way alone for %v, on a daemon with the demo's own source "+
		"(the same JPEG sent until its picture changes once a second: the stamped source's drawing would hide the daemon's work), "+
		"MJPEG first, then Direct H.264, then WebRTC, less the daemon's CPU with its source running and no client, "+
		"over the pictures that way delivered; ffmpeg's own is apart (measured on the stamped pictures). "+
		"Then %d WebRTC peers at once on that daemon, and its VmRSS after %v. "+
		"This machine is shared with other work%s: the latencies move with it; the CPU times less.\n\n",
		enc, videoWarmup, videoMeasure, videoPhase, videoPeers, videoPhase, load)
}

func writeVideo(w io.Writer, res *videoResult) {
	if res == nil {
		return
	}
	fmt.Fprintf(w, "| way | pictures a second | latency p50 | p95 | bitrate | the daemon's CPU a picture |\n|---|---:|---:|---:|---:|---:|\n")
	for _, way := range videoWays {
		v := res.ways[way]
		fmt.Fprintf(w, "| %s | %.1f | %.1f ms | %.1f ms | %.0f kbit/s | %.2f ms |\n", videoWayNames[way], v.fps(),
			quantileDur(v.latency, 0.5)/1e6, quantileDur(v.latency, 0.95)/1e6, v.kbps(), v.cpuFrame)
	}
	rtc, med, mj := res.ways["webrtc"], res.ways["media"], res.ways["mjpeg"]
	p50 := time.Duration(quantileDur(rtc.latency, 0.5))
	ratio := 0.0
	if mj.kbps() > 0 {
		ratio = med.kbps() / mj.kbps()
	}
	fmt.Fprintf(w, "\n| measure | value | target | result |\n|---|---:|---|---|\n")
	fmt.Fprintf(w, "| WebRTC latency, median, 1080p30, software x264 | %.1f ms | ≤ %d ms | %s |\n", float64(p50.Microseconds())/1000,
		targetVideoP50.Milliseconds(), verdict(true, p50 <= targetVideoP50))
	fmt.Fprintf(w, "| H.264 bitrate / MJPEG's, the same pictures | %.3f (SSIM %.4f of H.264 against MJPEG, %d pairs) | ≤ %.1f | %s |\n",
		ratio, res.ssim, res.ssimPairs, targetVideoBitrate, verdict(true, ratio > 0 && ratio <= targetVideoBitrate))
	fmt.Fprintf(w, "| the encoder's CPU a picture (ffmpeg, apart from the daemon's) | %.2f ms | — | — |\n", res.encoderCPU)
	fmt.Fprintf(w, "| the daemon's CPU with its source running and no client (the source's own drawing and JPEG encoding) | %.0f ms a second | — | — |\n", res.idleCPU)
	fmt.Fprintf(w, "| the daemon's VmRSS with %d WebRTC peers (before them, with the three clients gone) | %.1f MiB (%.1f MiB) | — | — |\n",
		res.peers, float64(res.rssPeers)/(1<<20), float64(res.rssBefore)/(1<<20))
}
