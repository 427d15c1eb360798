package h264_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/h264"
	"kvmd/h264/ffmpeg"
	"kvmd/h264/h264test"
	"kvmd/internal/testutil"
)

type fixture struct {
	t     *testing.T
	src   *h264test.Source
	enc   *h264test.Counting
	clock clockwork.FakeClock
	p     *h264.Pipeline
	stop  func()
}

func newFixture(t *testing.T, ffmpegPath string) *fixture {
	t.Helper()
	if ffmpegPath == "" {
		ffmpegPath = testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	}
	before := runtime.NumGoroutine()
	f := &fixture{t: t, src: h264test.NewSource(320, 240), clock: clockwork.NewFakeClock()}
	f.enc = &h264test.Counting{Opener: ffmpeg.NewOpener(ffmpegPath, testutil.Logger(t))}
	f.p = h264.New(h264.Config{Opener: f.enc, Source: f.src, Bitrate: 1000, GOP: 0, Clock: f.clock, Log: testutil.Logger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.p.Run(ctx) }()
	f.stop = func() {
		cancel()
		<-done
		_, running, _ := f.enc.Counts()
		if running != 0 {
			t.Errorf("%d encoders still open after Run returned", running)
		}
		if n := f.src.Streams(); n != 0 {
			t.Errorf("%d picture streams still open after Run returned", n)
		}
		for _, pid := range f.enc.Pids() {
			if syscall.Kill(pid, 0) == nil {
				t.Errorf("ffmpeg %d still runs after Run returned", pid)
			}
		}
		// Goroutines: none of the pipeline's left (the runtime's own
		// and the test's may come and go; give them a moment).
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines after the pipeline ended, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	}
	t.Cleanup(f.stop)
	return f
}

// next waits for the subscriber's next unit.
func (f *fixture) next(s *h264.Sub) h264.Unit {
	f.t.Helper()
	select {
	case u := <-s.C():
		return u
	case <-time.After(20 * time.Second):
		f.t.Fatalf("no unit within 20 s: %+v", f.p.Status())
	}
	return h264.Unit{}
}

// TestPipelineOnDemand: no encoder runs until a subscriber comes; its
// first unit is a key unit; the encoder stops the shutdown delay after
// the last subscriber left, and not before.
func TestPipelineOnDemand(t *testing.T) {
	f := newFixture(t, "")
	time.Sleep(100 * time.Millisecond)
	if opened, _, _ := f.enc.Counts(); opened != 0 || f.src.Opens() != 0 {
		t.Fatalf("an encoder (%d) or a source (%d) opened without a subscriber", opened, f.src.Opens())
	}
	s := f.p.Subscribe()
	u := f.next(s)
	if !u.Key || u.Width != 320 || u.Height != 240 {
		t.Errorf("first unit: key %v, %dx%d; want a key unit of 320x240", u.Key, u.Width, u.Height)
	}
	for range 10 {
		f.next(s)
	}
	st := f.p.Status()
	if !st.Running || st.Subscribers != 1 || st.Encoder != "libx264 (ffmpeg)" || st.Hardware || st.Err != nil {
		t.Errorf("status %+v", st)
	}
	s.Close()
	f.clock.BlockUntil(1)
	f.clock.Advance(h264.DefaultShutdownDelay - time.Second)
	time.Sleep(200 * time.Millisecond)
	if _, running, _ := f.enc.Counts(); running != 1 {
		t.Fatalf("the encoder stopped before the shutdown delay (running %d)", running)
	}
	f.clock.Advance(time.Second)
	testutil.WaitFor(t, 20*time.Second, "the encoder and the pictures to stop", func() bool { _, r, _ := f.enc.Counts(); return r == 0 && f.src.Streams() == 0 })
	if st := f.p.Status(); st.Running {
		t.Errorf("status says running after the stop: %+v", st)
	}
	// A subscriber within the delay keeps the same encoder.
	s = f.p.Subscribe()
	f.next(s)
	s.Close()
	f.clock.BlockUntil(1)
	s2 := f.p.Subscribe()
	f.clock.Advance(time.Second) // its key unit is not within keyMinInterval of the last
	f.next(s2)
	f.clock.Advance(h264.DefaultShutdownDelay)
	time.Sleep(100 * time.Millisecond)
	if opened, running, most := f.enc.Counts(); opened != 2 || running != 1 || most != 1 {
		t.Errorf("opened %d, running %d, most at once %d; want 2, 1, 1", opened, running, most)
	}
	s2.Close()
}

// TestPipelineEncoderDies kills ffmpeg as a crash would: the subscriber
// keeps its subscription and gets a key unit from a new encoder after
// the backoff (1 s, then 2 s), never two encoders at once, and the state
// says why meanwhile.
func TestPipelineEncoderDies(t *testing.T) {
	f := newFixture(t, "")
	s := f.p.Subscribe()
	defer s.Close()
	f.next(s)
	for round, wait := range []time.Duration{time.Second, 2 * time.Second} {
		pids := f.enc.Pids()
		syscall.Kill(pids[len(pids)-1], syscall.SIGKILL)
		testutil.WaitFor(t, 20*time.Second, "the failure in the status", func() bool { return f.p.Status().Err != nil })
		if st := f.p.Status(); st.Running || st.Unavailable {
			t.Errorf("round %d: status %+v after the kill", round, st)
		}
		f.clock.BlockUntil(1)
		f.clock.Advance(wait - time.Millisecond)
		time.Sleep(200 * time.Millisecond)
		if opened, _, _ := f.enc.Counts(); opened != round+1 {
			t.Fatalf("round %d: restarted before the backoff of %v (%d opened)", round, wait, opened)
		}
		f.clock.Advance(time.Millisecond)
		// Units of the dead encoder may still be queued: the next key
		// unit is the new encoder's first.
		for u := f.next(s); !u.Key || u.Seq != 1; u = f.next(s) {
		}
		if st := f.p.Status(); !st.Running || st.Err != nil {
			t.Errorf("round %d: status %+v after the restart", round, st)
		}
	}
	if _, _, most := f.enc.Counts(); most != 1 {
		t.Errorf("%d encoders at once", most)
	}
}

// TestPipelineResize: the picture's size changes (a new resolution on
// the HDMI input): a new encoder, whose first unit is a key unit of the
// new size (a decoder cannot start elsewhere).
func TestPipelineResize(t *testing.T) {
	f := newFixture(t, "")
	s := f.p.Subscribe()
	defer s.Close()
	f.next(s)
	f.src.SetSize(160, 120)
	u := f.next(s)
	for u.Width == 320 {
		u = f.next(s)
	}
	if u.Width != 160 || u.Height != 120 || !u.Key {
		t.Errorf("the first unit after the change: %dx%d, key %v; want a key unit of 160x120", u.Width, u.Height, u.Key)
	}
	if st := f.p.Status(); st.Width != 160 || st.Height != 120 {
		t.Errorf("status size %dx%d", st.Width, st.Height)
	}
	if opened, running, most := f.enc.Counts(); opened != 2 || running != 1 || most != 1 {
		t.Errorf("opened %d, running %d, most %d; want 2, 1, 1", opened, running, most)
	}
}

// TestPipelineSettings: new settings replace the encoder with one
// opened with them.
func TestPipelineSettings(t *testing.T) {
	f := newFixture(t, "")
	s := f.p.Subscribe()
	defer s.Close()
	f.next(s)
	f.p.SetSettings(300, 30)
	testutil.WaitFor(t, 20*time.Second, "a second encoder", func() bool { o, _, _ := f.enc.Counts(); return o == 2 })
	all := f.enc.Settings()
	last := all[len(all)-1]
	if last.Bitrate != 300 || last.GOP != 30 {
		t.Errorf("the new encoder's settings %+v", last)
	}
	if st := f.p.Status(); st.Settings.Bitrate != 300 || st.Settings.GOP != 30 {
		t.Errorf("status settings %+v", st.Settings)
	}
}

// TestPipelineKeyRequest: a key unit comes soon after RequestKey, not
// otherwise (GOP 0: none by the encoder's own choice).
func TestPipelineKeyRequest(t *testing.T) {
	f := newFixture(t, "")
	s := f.p.Subscribe()
	defer s.Close()
	f.next(s)
	f.clock.Advance(time.Second) // past keyMinInterval since the first
	for range 10 {
		if u := f.next(s); u.Key {
			t.Fatalf("a key unit nobody asked for: %d", u.Seq)
		}
	}
	s.RequestKey()
	for i := 0; ; i++ {
		if f.next(s).Key {
			break
		}
		if i > 5 {
			t.Fatal("no key unit within 5 units of the request")
		}
	}
}

// TestPipelineSlowSubscriber: a subscriber that takes nothing loses
// units once its queue is full, and starts again at a key unit, which
// its loss asked for; the other subscriber lost nothing.
func TestPipelineSlowSubscriber(t *testing.T) {
	f := newFixture(t, "")
	slow := f.p.Subscribe()
	defer slow.Close()
	fast := f.p.Subscribe()
	defer fast.Close()
	f.clock.Advance(time.Second)
	testutil.WaitFor(t, 20*time.Second, "the slow subscriber to lose units", func() bool {
		select {
		case <-fast.C():
		default:
		}
		return slow.Lost() > 0
	})
	f.clock.Advance(time.Second)
	// Drain what it held, then the next unit it gets is a key unit.
	for len(slow.C()) > 0 {
		<-slow.C()
		select {
		case <-fast.C():
		default:
		}
	}
	if u := f.next(slow); !u.Key {
		t.Error("after its loss, the slow subscriber's next unit is not a key unit")
	}
	if fast.Lost() != 0 {
		t.Errorf("the fast subscriber lost %d units", fast.Lost())
	}
}

// TestPipelineUnavailable: without ffmpeg the status says so, as one no
// retry mends, and a new subscriber looks again at once.
func TestPipelineUnavailable(t *testing.T) {
	f := newFixture(t, filepath.Join(t.TempDir(), "no-ffmpeg"))
	s := f.p.Subscribe()
	defer s.Close()
	testutil.WaitFor(t, 20*time.Second, "the failure", func() bool { return f.p.Status().Err != nil })
	st := f.p.Status()
	if !st.Unavailable || !errors.Is(st.Err, h264.ErrUnavailable) || st.Running {
		t.Errorf("status %+v", st)
	}
}
