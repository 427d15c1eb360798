// Package streamertest is a stand-in for ustreamer where no capture
// device can exist: the demo (make run) and the tests that need pictures
// coming fast. It speaks ustreamer's HTTP on the unix socket its command
// line names, as ustreamer 4.9 does (src/ustreamer/http/server.c in
// github.com/pikvm/ustreamer at v4.9): /state, /snapshot with its
// X-UStreamer-* headers, and /stream, multipart/x-mixed-replace with the
// boundary "boundarydonotcross", the stream_client cookie PiKVM's web page
// looks for, and the query options key, extra_headers, advance_headers
// and zero_data. A client that reads slowly gets the newest frame when it
// is ready for one, as ustreamer's clients do (it writes a client's next
// frame only once its output buffer has drained).
//
// The pictures come from a Source. Tests that can run the real ustreamer
// do (streamer's tests run it without a device, where it serves its "NO
// SIGNAL" placeholder); this package is for what it cannot show.
package streamertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/streamer"
)

// Source draws the picture at t, w x h pixels.
type Source func(t time.Time, w, h int) image.Image

// Launcher starts fake streamers. The zero value serves a grey picture of
// 640x480 at the command line's frame rate.
type Launcher struct {
	// Program is what Probe reports (default: version 4.9, no features).
	Program streamer.Program
	// ProbeErr, when set, is Probe's error (streamer.ErrNotInstalled...).
	ProbeErr error
	// Source draws the pictures; Width and Height are their size (the
	// capture's, 640x480 by default). A new picture is drawn when Source
	// gives a different one each Redraw (default: a second).
	Source        Source
	Width, Height int
	Redraw        time.Duration
	// Online is what the frames say (X-UStreamer-Online); nil: true.
	Online func() bool
	// StopDelay is how long a streamer takes to end after Stop, as a
	// real one finishing its work after SIGTERM (Kill ends it at once).
	StopDelay time.Duration

	mu       sync.Mutex
	procs    []*Process
	launches atomic.Int64
}

// Probe reports Program.
func (l *Launcher) Probe(context.Context) (streamer.Program, error) {
	if l.ProbeErr != nil {
		return streamer.Program{}, l.ProbeErr
	}
	p := l.Program
	if p.Version == "" {
		p = streamer.Program{Version: "4.9", Major: 4, Minor: 9}
	}
	if p.Features == nil {
		p.Features = map[string]bool{}
	}
	return p, nil
}

// Launches counts the streamers started.
func (l *Launcher) Launches() int { return int(l.launches.Load()) }

// Procs returns the streamers started, oldest first.
func (l *Launcher) Procs() []*Process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Process(nil), l.procs...)
}

// Running counts the streamers that have not ended.
func (l *Launcher) Running() int {
	n := 0
	for _, p := range l.Procs() {
		select {
		case <-p.done:
		default:
			n++
		}
	}
	return n
}

var nextPid atomic.Int64

// Launch starts a fake streamer that serves on the --unix socket of args
// at their --desired-fps and --quality.
func (l *Launcher) Launch(args []string, line func(string)) (streamer.Process, error) {
	opt := map[string]string{}
	for _, a := range args {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			opt[k] = v
		}
	}
	sock := opt["unix"]
	if sock == "" {
		return nil, errors.New("streamertest: no --unix in the command line")
	}
	os.Remove(sock) // --unix-rm
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	fps, _ := strconv.Atoi(opt["desired-fps"])
	if fps <= 0 {
		fps = 30
	}
	quality, _ := strconv.Atoi(opt["quality"])
	if quality <= 0 {
		quality = 80
	}
	w, h := l.Width, l.Height
	if w == 0 || h == 0 {
		w, h = 640, 480
	}
	if r := opt["resolution"]; r != "" {
		if rw, rh, ok := strings.Cut(r, "x"); ok {
			w, _ = strconv.Atoi(rw)
			h, _ = strconv.Atoi(rh)
		}
	}
	src := l.Source
	if src == nil {
		src = func(time.Time, int, int) image.Image { return image.NewGray(image.Rect(0, 0, w, h)) }
	}
	redraw := l.Redraw
	if redraw <= 0 {
		redraw = time.Second
	}
	p := &Process{
		pid: int(100000 + nextPid.Add(1)), ln: ln, done: make(chan struct{}),
		fps: fps, quality: quality, width: w, height: h, src: src, redraw: redraw, online: l.Online,
		clients: map[uint64]*client{}, line: line, Args: args, stopDelay: l.StopDelay,
	}
	p.frame.Store(p.render(time.Now()))
	p.srv = &http.Server{Handler: p.mux(), ReadHeaderTimeout: 5 * time.Second}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	l.launches.Add(1)
	line(fmt.Sprintf("-- INFO  [%.3f      main] -- Listening HTTP on UNIX socket '%s'", uptime(), sock))
	go p.produce()
	go p.srv.Serve(ln)
	return p, nil
}

func uptime() float64 { return float64(time.Now().UnixMilli()%1000000) / 1000 }

// Process is one fake streamer.
type Process struct {
	// Args is its command line.
	Args []string

	pid              int
	stopDelay        time.Duration
	ln               net.Listener
	srv              *http.Server
	done             chan struct{}
	once             sync.Once
	asked            atomic.Bool // Stop or Kill was called
	killed           atomic.Bool
	fps, quality     int
	width, height    int
	src              Source
	redraw           time.Duration
	online           func() bool
	line             func(string)
	frame            atomic.Pointer[frame]
	queued, captured atomic.Int64
	mu               sync.Mutex
	clients          map[uint64]*client
	newFrame         sync.Cond
	frameSeq         uint64
	condInit         sync.Once
}

type frame struct {
	seq    uint64
	data   []byte
	online bool
	at     time.Time
}

type client struct {
	id                                                uint64
	key                                               string
	extraHeaders, advanceHeaders, dualFinal, zeroData bool
	fps                                               atomic.Int64
}

func (p *Process) Pid() int { return p.pid }

// Stop ends it as SIGTERM ends ustreamer: the socket closes, the clients
// are cut, after the launcher's StopDelay.
func (p *Process) Stop() {
	p.asked.Store(true)
	if p.stopDelay > 0 {
		time.AfterFunc(p.stopDelay, func() { p.end(false) })
		return
	}
	p.end(false)
}

// Kill ends it at once.
func (p *Process) Kill() {
	p.asked.Store(true)
	p.end(true)
}

// Asked reports whether it was asked to end (Stop or Kill), ended or not:
// with a StopDelay it serves on for a while after.
func (p *Process) Asked() bool { return p.asked.Load() }

func (p *Process) end(killed bool) {
	p.once.Do(func() {
		p.killed.Store(killed)
		p.srv.Close()
		close(p.done)
		p.wakeAll()
		if !killed {
			p.line(fmt.Sprintf("-- INFO  [%.3f      main] -- Bye-bye", uptime()))
		}
	})
}

// Wait waits for its end: an error after Kill, as for a killed process.
func (p *Process) Wait() error {
	<-p.done
	if p.killed.Load() {
		return errors.New("signal: killed")
	}
	return nil
}

// Clients counts its stream clients.
func (p *Process) Clients() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}

func (p *Process) cond() *sync.Cond {
	p.condInit.Do(func() { p.newFrame.L = &p.mu })
	return &p.newFrame
}

// wakeAll wakes the stream writers, under the lock, so that none misses
// it between its check and its wait.
func (p *Process) wakeAll() {
	p.mu.Lock()
	p.cond().Broadcast()
	p.mu.Unlock()
}

func (p *Process) isOnline() bool { return p.online == nil || p.online() }

// render draws and encodes the picture at t.
func (p *Process) render(t time.Time) *frame {
	var b bytes.Buffer
	img := p.src(t, p.width, p.height)
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: p.quality}); err != nil {
		panic(err) // an in-memory encoder of a valid image does not fail
	}
	return &frame{data: b.Bytes(), online: p.isOnline(), at: t}
}

// produce makes the frames at the frame rate, drawing a new picture
// every redraw, until the streamer ends.
func (p *Process) produce() {
	tick := time.NewTicker(time.Second / time.Duration(p.fps))
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-p.done:
			return
		case now := <-tick.C:
			f := p.frame.Load()
			if now.Sub(last) >= p.redraw || f.online != p.isOnline() {
				f = p.render(now)
				last = now
			}
			p.mu.Lock()
			p.frameSeq++
			nf := *f
			nf.seq = p.frameSeq
			p.frame.Store(&nf)
			p.cond().Broadcast()
			p.mu.Unlock()
			p.captured.Add(1)
		}
	}
}

func (p *Process) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("/state", p.state)
	m.HandleFunc("/snapshot", p.snapshot)
	m.HandleFunc("/stream", p.stream)
	return m
}

func (p *Process) state(w http.ResponseWriter, r *http.Request) {
	f := p.frame.Load()
	var stat []string
	p.mu.Lock()
	for _, c := range p.clients {
		stat = append(stat, fmt.Sprintf(`"%x": {"fps": %d, "extra_headers": %t, "advance_headers": %t, "dual_final_frames": %t, "zero_data": %t}`,
			c.id, c.fps.Load(), c.extraHeaders, c.advanceHeaders, c.dualFinal, c.zeroData))
	}
	n := len(p.clients)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok": true, "result": { "encoder": {"type": "CPU", "quality": %d}, "source": {"resolution": {"width": %d, "height": %d}, "online": %t, "desired_fps": %d, "captured_fps": %d}, "stream": {"queued_fps": %d, "clients": %d, "clients_stat": {%s}}}}`,
		p.quality, p.width, p.height, f.online, p.fps, p.fps, p.fps, n, strings.Join(stat, ", "))
}

func ts(t time.Time) string { return fmt.Sprintf("%.06f", float64(t.UnixNano())/1e9) }

func (p *Process) snapshot(w http.ResponseWriter, r *http.Request) {
	f := p.frame.Load()
	h := w.Header()
	h.Set("Cache-Control", "no-store, no-cache, must-revalidate, proxy-revalidate, pre-check=0, post-check=0, max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Expires", "Mon, 3 Jan 2000 12:34:56 GMT")
	h.Set("X-Timestamp", ts(time.Now()))
	h["X-UStreamer-Online"] = []string{strconv.FormatBool(f.online)}
	h["X-UStreamer-Width"] = []string{strconv.Itoa(p.width)}
	h["X-UStreamer-Height"] = []string{strconv.Itoa(p.height)}
	h.Set("Content-Type", "image/jpeg")
	w.Write(f.data)
}

func queryTrue(q map[string][]string, k string) bool {
	v := strings.ToLower(strings.Join(q[k], ""))
	return v == "1" || v == "true" || v == "yes"
}

// stream serves the MJPEG stream. Each client waits for a frame newer
// than its last, so a slow one skips what came while it wrote.
func (p *Process) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := &client{
		id: rand.Uint64(), key: q.Get("key"),
		extraHeaders: queryTrue(q, "extra_headers"), advanceHeaders: queryTrue(q, "advance_headers"),
		dualFinal: queryTrue(q, "dual_final_frames"), zeroData: queryTrue(q, "zero_data"),
	}
	key := c.key
	if key == "" {
		key = "0"
	}
	p.mu.Lock()
	p.clients[c.id] = c
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.clients, c.id)
		p.mu.Unlock()
	}()
	// The answer and context end when the client goes or the streamer
	// ends.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
		cancel()
		p.wakeAll()
	}()
	h := w.Header()
	h.Set("Cache-Control", "no-store, no-cache, must-revalidate, proxy-revalidate, pre-check=0, post-check=0, max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Expires", "Mon, 3 Jan 2000 12:34:56 GMT")
	h.Set("Set-Cookie", fmt.Sprintf("stream_client=%s/%x; path=/; max-age=30", key, c.id))
	h.Set("Content-Type", "multipart/x-mixed-replace;boundary=boundarydonotcross")
	rc := http.NewResponseController(w)
	var b bytes.Buffer
	b.WriteString("--boundarydonotcross\r\n")
	if c.advanceHeaders {
		fmt.Fprintf(&b, "Content-Type: image/jpeg\r\nX-Timestamp: %s\r\n\r\n", ts(time.Now()))
	}
	var last uint64
	var sec int64
	var inSec int64
	for {
		p.mu.Lock()
		for ctx.Err() == nil && p.frame.Load().seq == last {
			p.cond().Wait()
		}
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		f := p.frame.Load()
		last = f.seq
		now := time.Now()
		if now.Unix() != sec {
			c.fps.Store(inSec)
			sec, inSec = now.Unix(), 0
		}
		inSec++
		data := f.data
		if c.zeroData {
			data = nil
		}
		if !c.advanceHeaders {
			fmt.Fprintf(&b, "Content-Type: image/jpeg\r\nContent-Length: %d\r\nX-Timestamp: %s\r\n", len(data), ts(now))
			if c.extraHeaders {
				fmt.Fprintf(&b, "X-UStreamer-Online: %t\r\nX-UStreamer-Width: %d\r\nX-UStreamer-Height: %d\r\nX-UStreamer-Client-FPS: %d\r\n",
					f.online, p.width, p.height, c.fps.Load())
			}
			b.WriteString("\r\n")
		}
		b.Write(data)
		b.WriteString("\r\n--boundarydonotcross\r\n")
		if c.advanceHeaders {
			fmt.Fprintf(&b, "Content-Type: image/jpeg\r\nX-Timestamp: %s\r\n\r\n", ts(time.Now()))
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return
		}
		b.Reset()
		if err := rc.Flush(); err != nil {
			return
		}
		p.queued.Add(1)
	}
}
