package m2m

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/h264"
	"kvmd/hw"
	"kvmd/hw/v4l2m2m"
)

// The tests below drive the kernel's vicodec, a stateful FWHT encoder
// with the interface of a board's H.264 one, through the daemon's H.264
// pipeline. Debian's kernel does not ship it: the booted test (imagetest,
// subtest "m2m") loads one built for its kernel and runs this package's
// test binary there with KVMD_VICODEC=1 (and KVMD_RAW_SINK, the name of
// the raw sink of a ustreamer on vivid). Elsewhere they skip.

func vicodecOpener(t *testing.T) *Opener {
	t.Helper()
	if os.Getenv("KVMD_VICODEC") != "1" {
		t.Skip("needs the kernel's vicodec: the booted test runs it (KVMD_VICODEC=1)")
	}
	dev, ok, err := v4l2m2m.Detect(hw.New("/"), v4l2m2m.FWHT)
	if err != nil || !ok {
		t.Fatalf("Detect(FWHT) = %+v, %v, %v: want vicodec's encoder", dev, ok, err)
	}
	return &Opener{Device: dev, Coded: v4l2m2m.FWHT, Timeout: time.Minute}
}

// gradient is a source of YUYV pictures: a luma ramp that moves a step
// each picture, so that vicodec codes most blocks against the picture
// before (a P-frame) and a key frame shows as one.
type gradient struct {
	mu   sync.Mutex
	w, h int
	n    int
	open int
}

func (g *gradient) setSize(w, h int) {
	g.mu.Lock()
	g.w, g.h = w, h
	g.mu.Unlock()
}

func (g *gradient) streams() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

func (g *gradient) Open(ctx context.Context) (h264.Pictures, error) {
	g.mu.Lock()
	g.open++
	g.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	return &gradientPics{g: g, ctx: ctx, cancel: cancel, tick: time.NewTicker(time.Second / 15)}, nil
}

type gradientPics struct {
	g      *gradient
	ctx    context.Context
	cancel context.CancelFunc
	tick   *time.Ticker
	once   sync.Once
}

func (p *gradientPics) Next() (h264.Frame, error) {
	select {
	case <-p.ctx.Done():
		return h264.Frame{}, p.ctx.Err()
	case <-p.tick.C:
	}
	g := p.g
	g.mu.Lock()
	w, h, n := g.w, g.h, g.n
	g.n++
	g.mu.Unlock()
	b := make([]byte, w*h*2)
	for y := range h {
		for x := range w {
			b[(y*w+x)*2] = byte(x + y + 4*n)
			b[(y*w+x)*2+1] = 128
		}
	}
	return h264.Frame{Format: h264.YUYV, Width: w, Height: h, Data: b, Time: time.Now(), Online: true}, nil
}

func (p *gradientPics) Close() error {
	p.once.Do(func() {
		p.cancel()
		p.tick.Stop()
		p.g.mu.Lock()
		p.g.open--
		p.g.mu.Unlock()
	})
	return nil
}

// fwhtSize reads the picture size in an FWHT frame's header; 0x0 for
// data too short to hold one.
func fwhtSize(data []byte) (int, int) {
	w, h, _ := v4l2m2m.FWHTSize(data)
	return w, h
}

// nodeFiles counts this process's open files of the node.
func nodeFiles(node string) int {
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == node {
			n++
		}
	}
	return n
}

// next waits for s's next unit.
func next(t *testing.T, s *h264.Sub) h264.Unit {
	t.Helper()
	select {
	case u := <-s.C():
		return u
	case <-time.After(time.Minute):
		t.Fatal("no unit within a minute")
		return h264.Unit{}
	}
}

// TestVicodecPipeline runs the daemon's pipeline over vicodec: units at
// the source's size from a key one on, P-frames between key frames, a
// key frame on request, a new encoder at a new size whose first unit is a
// key frame of that size, and after the last subscriber the device
// closed and no goroutine left.
func TestVicodecPipeline(t *testing.T) {
	o := vicodecOpener(t)
	if got := o.Formats(); len(got) == 0 || got[0] != h264.YUYV {
		t.Errorf("Formats() = %v, want YUYV first", got)
	}
	if err := o.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	goroutines := runtime.NumGoroutine()
	src := &gradient{}
	// vicodec's least size is 640x360 (MIN_WIDTH, MIN_HEIGHT in
	// vicodec-core.c): a smaller picture is coded padded to it.
	src.setSize(640, 360)
	p := h264.New(h264.Config{Opener: o, Source: src, GOP: 0, FPS: 15, ShutdownDelay: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()

	s := p.Subscribe()
	u := next(t, s)
	if w, h := fwhtSize(u.Data); !u.Key || u.Width != 640 || u.Height != 360 || w != 640 || h != 360 {
		t.Errorf("first unit: key %v, %dx%d, coded %dx%d: want a key unit of 640x360", u.Key, u.Width, u.Height, w, h)
	}
	if st := p.Status(); !st.Running || !st.Hardware || !strings.Contains(st.Encoder, o.Device.Path) {
		t.Errorf("status %+v", st)
	}
	if n := nodeFiles(o.Device.Path); n != 1 {
		t.Errorf("%d open files of %s while encoding, want 1", n, o.Device.Path)
	}
	p2 := 0
	for range 6 {
		if u := next(t, s); !u.Key {
			p2++
		}
	}
	if p2 == 0 {
		t.Error("every unit a key frame: a key frame asked for could not be told apart")
	}
	// Past the pipeline's least time between key frames, reading on
	// (a subscriber that lost units would be sent a key frame anyway).
	for start := time.Now(); time.Since(start) < 600*time.Millisecond; {
		next(t, s)
	}
	if s.Lost() != 0 {
		t.Errorf("the subscriber lost %d units", s.Lost())
	}
	s.RequestKey()
	key := false
	for range 6 {
		if next(t, s).Key {
			key = true
			break
		}
	}
	if !key {
		t.Error("no key frame within 6 units of asking")
	}

	src.setSize(640, 480)
	for range 30 {
		u = next(t, s)
		if u.Height == 480 {
			break
		}
	}
	if w, h := fwhtSize(u.Data); !u.Key || u.Width != 640 || u.Height != 480 || w != 640 || h != 480 {
		t.Errorf("first unit at the new size: key %v, %dx%d, coded %dx%d: want a key unit of 640x480", u.Key, u.Width, u.Height, w, h)
	}

	s.Close()
	deadline := time.Now().Add(30 * time.Second)
	for (nodeFiles(o.Device.Path) != 0 || src.streams() != 0 || p.Status().Running) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := nodeFiles(o.Device.Path); n != 0 || src.streams() != 0 {
		t.Errorf("after the last subscriber: %d open files of the device, %d streams", n, src.streams())
	}
	cancel()
	<-done
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the pipeline ended, %d before", n, goroutines)
	}
}

// TestVicodecSink codes ustreamer's raw frames of vivid (its raw sink,
// KVMD_RAW_SINK) through the pipeline: h264.SinkSource's pictures are
// vivid's, at its size, in YUYV, and become units of that size.
func TestVicodecSink(t *testing.T) {
	o := vicodecOpener(t)
	name := os.Getenv("KVMD_RAW_SINK")
	if name == "" {
		t.Skip("needs a ustreamer's raw sink: KVMD_RAW_SINK")
	}
	var held atomic.Int32
	src := h264.SinkSource{Name: name, Hold: func(context.Context) (func(), error) {
		held.Add(1)
		return func() { held.Add(-1) }, nil
	}, Wait: time.Minute}
	pics, err := src.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f, err := pics.Next()
	pics.Close()
	if err != nil {
		t.Fatal(err)
	}
	if f.Format != h264.YUYV || f.Width != 640 || f.Height != 480 || !f.Online || len(f.Data) < f.Height*max(f.Stride, 2*f.Width) || held.Load() != 0 {
		t.Fatalf("the sink's picture: %v %dx%d stride %d online %v, %d bytes; held %d after Close: want vivid's YUYV 640x480",
			f.Format, f.Width, f.Height, f.Stride, f.Online, len(f.Data), held.Load())
	}
	p := h264.New(h264.Config{Opener: o, Source: src, FPS: 30, ShutdownDelay: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	s := p.Subscribe()
	for i := range 3 {
		u := next(t, s)
		if w, h := fwhtSize(u.Data); w != 640 || h != 480 || (i == 0 && !u.Key) {
			t.Errorf("unit %d: key %v, coded %dx%d: want 640x480, the first a key unit", i, u.Key, w, h)
		}
	}
	s.Close()
	cancel()
	<-done
}
