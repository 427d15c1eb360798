package streamer_test

import (
	"bytes"
	"context"
	"errors"
	"image/jpeg"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/hw"
	"kvmd/internal/testutil"
	"kvmd/streamer"
	"kvmd/streamer/streamertest"
)

// run starts s and stops it when t ends, waiting for Run to return.
func run(t *testing.T, s *streamer.Streamer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s of its context's end")
		}
	})
}

// eventually polls cond every 10 ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shortDir is a temporary directory with a short path: a unix socket's
// path is limited to 107 bytes, which t.TempDir's long names can pass.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kvst")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

var vivid = streamer.Capture{Device: "/dev/video0", Kind: hw.CaptureVivid, Driver: "vivid"}

// TestLifecycle drives the controller on a fake clock: a streamer starts
// for the first client, stays while clients come and go within the
// shutdown delay, stops exactly when the delay has passed with none,
// starts again after a death with a backoff that doubles while it keeps
// dying, and two never run at once.
func TestLifecycle(t *testing.T) {
	clock := clockwork.NewFakeClock()
	// Streamers take a while to end after SIGTERM, as real ones do: a
	// new one must wait for that.
	l := &streamertest.Launcher{StopDelay: 100 * time.Millisecond}
	s := streamer.New(streamer.Config{
		Launcher: l, Dir: shortDir(t), Clock: clock,
		Video:         streamertest.Video{Device: vivid},
		ShutdownDelay: 10 * time.Second, StatePoll: time.Hour,
	})
	run(t, s)
	ctx := context.Background()
	// Run's timers on the fake clock: the state watcher's ticker, and one
	// pending delay (shutdown or restart).
	waitTimers := func(n int) {
		t.Helper()
		testutil.BlockUntil(t, clock, n)
	}
	never2 := func() {
		t.Helper()
		if n := l.Running(); n > 1 {
			t.Fatalf("%d streamers running at once", n)
		}
	}

	waitTimers(1)
	if l.Launches() != 0 {
		t.Fatal("a streamer started without a client")
	}
	release := s.Acquire()
	eventually(t, 5*time.Second, "first start", func() bool { return l.Launches() == 1 && s.Running() != 0 })
	if _, err := s.RawSnapshot(ctx); err != nil {
		t.Fatalf("snapshot from the started streamer: %v", err)
	}

	// The last client leaves: the streamer stays for the delay.
	release()
	waitTimers(2)
	clock.Advance(10*time.Second - time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if s.Running() == 0 {
		t.Fatal("stopped before the shutdown delay")
	}
	// A client within the delay cancels the stop; the same streamer serves.
	release = s.Acquire()
	waitTimers(1)
	clock.Advance(time.Hour)
	time.Sleep(50 * time.Millisecond)
	if s.Running() == 0 || l.Launches() != 1 {
		t.Fatalf("a client within the delay: running %d, launches %d", s.Running(), l.Launches())
	}
	release()
	waitTimers(2)
	clock.Advance(10 * time.Second)
	eventually(t, 5*time.Second, "stop after the delay", func() bool { return s.Running() == 0 && l.Running() == 0 })
	never2()

	// Deaths: restarted after 1 s, then 2 s, then 4 s while they keep
	// coming within 30 s of the start.
	release = s.Acquire()
	defer func() { release() }()
	eventually(t, 5*time.Second, "start for a new client", func() bool { return l.Launches() == 2 && s.Running() != 0 })
	for i, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		procs := l.Procs()
		procs[len(procs)-1].Kill()
		waitTimers(2) // the watcher's ticker and the restart's
		never2()
		clock.Advance(delay - time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		if n := l.Launches(); n != 2+i {
			t.Fatalf("death %d: restarted before %v", i+1, delay)
		}
		clock.Advance(time.Millisecond)
		eventually(t, 5*time.Second, "restart", func() bool { return l.Launches() == 3+i && s.Running() != 0 })
		never2()
	}
	// One that ran 30 s dies: the backoff is 1 s again.
	clock.Advance(30 * time.Second)
	procs := l.Procs()
	procs[len(procs)-1].Kill()
	waitTimers(2)
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "restart after a long run", func() bool { return l.Launches() == 6 && s.Running() != 0 })

	// Reset: stopped at once, started again after the reset delay (1 s),
	// once the old one has ended.
	pid := s.Running()
	s.Reset()
	waitTimers(2)
	if s.Running() != 0 || l.Running() != 0 {
		t.Fatalf("a streamer runs after a reset stopped it: %d, %d", s.Running(), l.Running())
	}
	clock.Advance(time.Second)
	eventually(t, 5*time.Second, "start after the reset", func() bool { return s.Running() != 0 && s.Running() != pid })
	never2()
}

// TestSetParamsRestarts: new params restart a running streamer with them.
func TestSetParamsRestarts(t *testing.T) {
	l := &streamertest.Launcher{}
	s := streamer.New(streamer.Config{
		Launcher: l, Dir: shortDir(t), ResetDelay: time.Millisecond,
		Video: streamertest.Video{Device: vivid},
	})
	run(t, s)
	defer s.Acquire()()
	eventually(t, 5*time.Second, "start", func() bool { return s.Running() != 0 })
	if err := s.SetParams(streamer.Change{"quality": "42", "desired_fps": "7"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "restart", func() bool { return l.Launches() == 2 && s.Running() != 0 })
	args := strings.Join(l.Procs()[1].Args, " ")
	if !strings.Contains(args, "--quality=42") || !strings.Contains(args, "--desired-fps=7") {
		t.Errorf("restarted with %s", args)
	}
	// The same params again: no restart.
	if err := s.SetParams(streamer.Change{"quality": "42"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if l.Launches() != 2 {
		t.Error("unchanged params restarted the streamer")
	}
	var pe *streamer.ParamError
	if err := s.SetParams(streamer.Change{"quality": "0"}); !errors.As(err, &pe) {
		t.Errorf("quality 0: %v", err)
	}
}

// TestNoClientForALeavingStreamer: once the daemon has decided to stop a
// streamer (a reset, new params, the shutdown delay over), a client that
// comes gets the next one, never the leaving one, which serves on while
// it ends (a real one finishing its work after SIGTERM) and then cuts it:
// PiKVM's page asks for a snapshot right after its reset, and got 503
// about once in 30 tries when it was given the old streamer.
func TestNoClientForALeavingStreamer(t *testing.T) {
	for _, tc := range []struct {
		name string
		// leave makes the daemon decide to stop the running streamer,
		// with release letting go of the test's hold on it.
		leave func(t *testing.T, s *streamer.Streamer, l *streamertest.Launcher, release func())
	}{
		{"reset", func(t *testing.T, s *streamer.Streamer, _ *streamertest.Launcher, _ func()) {
			s.Reset()
		}},
		{"new params", func(t *testing.T, s *streamer.Streamer, _ *streamertest.Launcher, _ func()) {
			if err := s.SetParams(streamer.Change{"quality": "42"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"shutdown delay", func(t *testing.T, _ *streamer.Streamer, l *streamertest.Launcher, release func()) {
			release()
			eventually(t, 5*time.Second, "the stop after the shutdown delay", func() bool { return l.Procs()[0].Asked() })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &streamertest.Launcher{StopDelay: 300 * time.Millisecond}
			s := streamer.New(streamer.Config{
				Launcher: l, Dir: shortDir(t), ResetDelay: time.Millisecond, ShutdownDelay: 20 * time.Millisecond,
				Video: streamertest.Video{Device: vivid},
			})
			run(t, s)
			release := s.Acquire()
			defer release()
			if _, err := s.Snapshot(context.Background(), false, false, true); err != nil {
				t.Fatalf("first snapshot: %v", err)
			}
			tc.leave(t, s, l, release)
			if _, err := s.Snapshot(context.Background(), false, false, true); err != nil {
				t.Fatalf("snapshot after the decision: %v", err)
			}
			// The snapshot came after the old streamer ended: from the next.
			if n, old := l.Launches(), l.Procs()[0]; n != 2 || !old.Asked() || l.Running() != 1 {
				t.Errorf("the snapshot came with %d streamers started, %d running: the leaving one served it", n, l.Running())
			}
		})
	}
}

// TestNotInstalled: without ustreamer, the operations say so at once and
// the state has no streamer.
func TestNotInstalled(t *testing.T) {
	s := streamer.New(streamer.Config{
		Launcher: streamer.Exec{Path: "/nonexistent/ustreamer"}, Dir: shortDir(t),
		Video: streamertest.Video{Device: vivid},
	})
	run(t, s)
	start := time.Now()
	_, err := s.Snapshot(context.Background(), false, false, true)
	if !errors.Is(err, streamer.ErrNotInstalled) {
		t.Fatalf("snapshot: %v, want ErrNotInstalled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to say so", d)
	}
	if st := s.State(context.Background()); st["streamer"] != nil || st["error"] != "ustreamer is not installed" {
		t.Errorf("streamer %v error %v, want null and why", st["streamer"], st["error"])
	}
	if _, _, err := s.Stream(context.Background(), ""); !errors.Is(err, streamer.ErrNotInstalled) {
		t.Errorf("stream: %v", err)
	}
	if _, err := s.Hold(context.Background()); !errors.Is(err, streamer.ErrNotInstalled) {
		t.Errorf("hold: %v", err)
	}
}

// TestNoCapture: without a capture device, the same.
func TestNoCapture(t *testing.T) {
	s := streamer.New(streamer.Config{Launcher: &streamertest.Launcher{}, Dir: shortDir(t)})
	run(t, s)
	if _, err := s.RawSnapshot(context.Background()); !errors.Is(err, streamer.ErrNoCapture) {
		t.Fatalf("snapshot: %v, want ErrNoCapture", err)
	}
	if _, err := s.Hold(context.Background()); !errors.Is(err, streamer.ErrNoCapture) {
		t.Errorf("hold: %v, want ErrNoCapture", err)
	}
}

// procsWith lists the processes whose command line holds sock.
func procsWith(t *testing.T, sock string) []int {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		// With --process-name-prefix, ustreamer rewrites its command
		// line as one string: "kvmd/streamer: ustreamer --device=...".
		b = bytes.ReplaceAll(b, []byte{0}, []byte{' '})
		if err != nil || !bytes.Contains(b, []byte("--unix="+sock+" ")) {
			continue
		}
		st, err := os.ReadFile(d + "/stat")
		if err == nil && strings.Contains(string(st[bytes.LastIndexByte(st, ')')+1:]), " Z ") {
			continue // a zombie: gone, not yet reaped
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		pids = append(pids, pid)
	}
	return pids
}

// TestRealUstreamer runs Debian's ustreamer without a capture device,
// where it serves its "NO SIGNAL" placeholder: it starts for a client, its
// output is in the log, its state and snapshots come through, a kill -9
// is followed by a new one, it stops after the last client, and there is
// never more than one.
func TestRealUstreamer(t *testing.T) {
	path := testutil.NeedTool(t, "ustreamer", "ustreamer")
	var logBuf testutil.SyncBuffer
	dir := shortDir(t)
	s := streamer.New(streamer.Config{
		Launcher: streamer.Exec{Path: path}, Dir: dir,
		Video:         streamertest.Video{Device: streamer.Capture{Device: "/dev/kvmd-test-no-such-video", Kind: hw.CaptureVivid}},
		ShutdownDelay: 500 * time.Millisecond, SnapshotTimeout: 300 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	run(t, s)
	sock := s.Socket()
	stopCount := make(chan struct{})
	maxSeen := make(chan int, 1)
	go func() { // never two: sampled while the test runs
		most := 0
		for {
			select {
			case <-stopCount:
				maxSeen <- most
				return
			case <-time.After(5 * time.Millisecond):
				most = max(most, len(procsWith(t, sock)))
			}
		}
	}()
	if pids := procsWith(t, sock); len(pids) != 0 {
		t.Fatalf("ustreamer running before a client: %v", pids)
	}

	// Hold (a reader of the raw sink's) returns once it runs.
	ctx := context.Background()
	release, err := s.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Running() == 0 || len(procsWith(t, sock)) != 1 {
		t.Errorf("Hold returned with ustreamer %d running, processes %v", s.Running(), procsWith(t, sock))
	}
	snap, err := s.Snapshot(ctx, false, false, true)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(snap.Data))
	if err != nil || snap.Online || cfg.Width != 640 || cfg.Height != 480 || snap.Width != 640 {
		t.Errorf("placeholder snapshot: %+v online=%v %dx%d, %v", cfg, snap.Online, snap.Width, snap.Height, err)
	}
	if _, err := s.Snapshot(ctx, false, false, false); !errors.Is(err, streamer.ErrOffline) {
		t.Errorf("snapshot of the placeholder without allow_offline: %v, want ErrOffline", err)
	}
	st := s.State(ctx)
	ss, ok := st["streamer"].(map[string]any)
	if !ok {
		t.Fatalf("state without the streamer's: %v", st)
	}
	if enc := ss["encoder"].(map[string]any); enc["type"] != "CPU" {
		t.Errorf("encoder %v", enc)
	}
	if !strings.Contains(logBuf.String(), "ustreamer: Listening HTTP on UNIX socket") {
		t.Errorf("ustreamer's output is not in the log:\n%s", logBuf.String())
	}

	// kill -9: a new one comes, after the 1 s backoff.
	old := s.Running()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new ustreamer after kill -9", func() bool {
		p := s.Running()
		return p != 0 && p != old
	})
	if _, err := s.RawSnapshot(ctx); err != nil {
		t.Errorf("snapshot from the restarted one: %v", err)
	}
	if !strings.Contains(logBuf.String(), "streamer exited") {
		t.Errorf("the death is not in the log:\n%s", logBuf.String())
	}

	// The last client leaves: gone after the delay, and its process too.
	pid := s.Running()
	release()
	eventually(t, 5*time.Second, "stop after the last client", func() bool { return s.Running() == 0 })
	eventually(t, 5*time.Second, "the process gone", func() bool { return len(procsWith(t, sock)) == 0 })
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("pid %d still exists", pid)
	}
	close(stopCount)
	if n := <-maxSeen; n != 1 {
		t.Errorf("at most %d ustreamers ran at once, want 1", n)
	}
}

// TestSocketRemoved: the socket is the Streamer's alone: gone when Run
// returns, a stale one too (a streamer killed leaves its socket), while
// its directory, the caller's, stays.
func TestSocketRemoved(t *testing.T) {
	dir := shortDir(t)
	s := streamer.New(streamer.Config{Launcher: &streamertest.Launcher{}, Dir: dir, Video: streamertest.Video{Device: vivid}})
	for _, started := range []bool{true, false} {
		if !started {
			if err := os.WriteFile(s.Socket(), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		if started {
			release := s.Acquire()
			eventually(t, 5*time.Second, "the socket", func() bool { _, err := os.Stat(s.Socket()); return err == nil })
			release()
		}
		cancel()
		<-done
		if _, err := os.Lstat(s.Socket()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("started %v: the socket outlived Run: %v", started, err)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the directory went with it: %v", err)
	}
}
