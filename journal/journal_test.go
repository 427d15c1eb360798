package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/journal/journaltest"
)

const (
	bootOld = "0000000000000000000000000000b001"
	bootNow = "0000000000000000000000000000b002"
)

// sink collects what Copy writes and lets a test wait for it.
type sink struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSink() *sink { return &sink{changed: make(chan struct{})} }

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output contains substr and returns how long
// that took.
func (s *sink) waitFor(t testing.TB, substr string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		found := strings.Contains(s.b.String(), substr)
		ch := s.changed
		s.mu.Unlock()
		if found {
			return time.Since(start)
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("%q not seen within %v; got:\n%s", substr, timeout, s)
		}
	}
}

func newReader(dir string, edit func(*Config)) *Reader {
	cfg := Config{Dir: dir, Location: time.UTC}
	if edit != nil {
		edit(&cfg)
	}
	return New(cfg)
}

// readAll runs a non-follow stream to its end.
func readAll(t testing.TB, r *Reader, seek time.Duration) string {
	t.Helper()
	s, err := r.Open(context.Background(), seek, false)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	var b bytes.Buffer
	flushes := 0
	n, err := s.Copy(&b, CopyOptions{Flush: func() error { flushes++; return nil }})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if n != int64(b.Len()) || flushes == 0 {
		t.Errorf("Copy returned %d for %d bytes, with %d flushes", n, b.Len(), flushes)
	}
	return b.String()
}

type follower struct {
	s      *Stream
	out    *sink
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// follow opens a following stream and copies it in the background until
// the test ends.
func follow(t testing.TB, r *Reader, seek time.Duration) *follower {
	t.Helper()
	f, err := startFollower(r, seek)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(f.stop)
	return f
}

func startFollower(r *Reader, seek time.Duration) (*follower, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := r.Open(ctx, seek, true)
	if err != nil {
		cancel()
		return nil, err
	}
	f := &follower{s: s, out: newSink(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		_, err := s.Copy(f.out, CopyOptions{})
		f.done <- err
	}()
	return f, nil
}

func (f *follower) stop() {
	f.once.Do(func() {
		f.cancel()
		<-f.done
		f.s.Close()
	})
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\r\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\r\n")
}

func diff(t testing.TB, got string, want []string) {
	t.Helper()
	if g := lines(got); strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines (-want +got):\n-%s\n+%s", strings.Join(want, "\n-"), strings.Join(g, "\n+"))
	}
}

func TestSeekAndBoot(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().Truncate(time.Second)
	journaltest.Write(t, dir, "system", []journaltest.Entry{
		{Time: now.Add(-3 * time.Hour), Boot: bootOld, Unit: "kvmd.service", Message: "old boot, first"},
		{Time: now.Add(-2 * time.Hour), Boot: bootOld, Unit: "kvmd.service", Message: "old boot, last"},
		{Time: now.Add(-time.Hour), Boot: bootNow, Unit: "kvmd.service", Message: "an hour ago"},
		{Time: now.Add(-10 * time.Minute), Boot: bootNow, Unit: "kvmd.service", Message: "ten minutes ago"},
		{Time: now.Add(-30 * time.Second), Boot: bootNow, Unit: "kvmd.service", Message: "half a minute ago"},
	})
	r := newReader(dir, nil)
	line := func(ago time.Duration, msg string) string {
		return fmt.Sprintf("[%s kvmd.service] --- %s", now.Add(-ago).UTC().Format(time.DateTime), msg)
	}
	for _, tc := range []struct {
		seek time.Duration
		want []string
	}{
		{0, []string{line(time.Hour, "an hour ago"), line(10*time.Minute, "ten minutes ago"), line(30*time.Second, "half a minute ago")}},
		{60 * time.Second, []string{line(30*time.Second, "half a minute ago")}},
		{15 * time.Minute, []string{line(10*time.Minute, "ten minutes ago"), line(30*time.Second, "half a minute ago")}},
		{10 * time.Second, nil},
		{1 << 62, []string{line(time.Hour, "an hour ago"), line(10*time.Minute, "ten minutes ago"), line(30*time.Second, "half a minute ago")}},
	} {
		t.Run(fmt.Sprint(tc.seek), func(t *testing.T) {
			diff(t, readAll(t, r, tc.seek), tc.want)
		})
	}
}

func TestUnits(t *testing.T) {
	dir := t.TempDir()
	var entries []journaltest.Entry
	for _, u := range []string{"kvmd.service", "sshd.service", "kvmd-otg.service", "kvmdx.service", "notkvmd.service", "kvmd-vnc.service", "kvmd.socket"} {
		entries = append(entries, journaltest.Entry{Boot: bootNow, Unit: u, Message: "from " + u})
	}
	// PID 1 about the unit, which --unit=kvmd.service also matches.
	entries = append(entries,
		journaltest.Entry{Boot: bootNow, Unit: "init.scope", Message: "Started kvmd.service - PiKVM daemon.",
			Fields: map[string]string{"_PID": "1", "UNIT": "kvmd.service"}},
		journaltest.Entry{Boot: bootNow, Message: "Stopping kvmd-otg.service...",
			Fields: map[string]string{"_PID": "1", "UNIT": "kvmd-otg.service"}})
	journaltest.Write(t, dir, "system", entries)
	r := newReader(dir, nil)

	// The PID 1 entries come from journalctl: the filter here is what
	// drops them.
	out, err := exec.Command("journalctl", r.Args(Query{Boot: BootCurrent, Units: true})...).Output()
	if err != nil || !bytes.Contains(out, []byte("Started kvmd.service")) || !bytes.Contains(out, []byte("Stopping kvmd-otg")) {
		t.Fatalf("journalctl --unit does not bring PID 1's messages (%v):\n%s", err, out)
	}

	var got []string
	for _, l := range lines(readAll(t, r, 0)) {
		got = append(got, l[strings.Index(l, "] --- ")+6:])
	}
	want := "from kvmd.service,from kvmd-otg.service,from kvmd-vnc.service"
	if strings.Join(got, ",") != want {
		t.Errorf("got %q, want %s", got, want)
	}

	// Only globs, as configured: still no PID 1 entries.
	r = newReader(dir, func(c *Config) { c.Units = []string{"kvmd-*.service", "*.socket"} })
	out2 := readAll(t, r, 0)
	if l := lines(out2); len(l) != 3 || !strings.Contains(out2, "from kvmd.socket") || strings.Contains(out2, "Stopping") {
		t.Errorf("globs: got\n%s", out2)
	}
}

func TestFormat(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	journaltest.Write(t, dir, "system", []journaltest.Entry{
		{Time: at, Unit: "kvmd.service", Message: "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad  \n\n"},
		{Time: at.Add(time.Second), Unit: "kvmd.service", Message: "Привет, мир ✓ 🎉 trailing \t "},
		{Time: at.Add(2 * time.Second), Unit: "kvmd.service", Message: "binary \xff\xfe\x00 and \x1b[1mescape\x1b[0m"},
		{Time: at.Add(3 * time.Second), Unit: "kvmd.service"},
		{Time: at.Add(4 * time.Second), Unit: "kvmd.service", Message: "big " + strings.Repeat("x", 5000)},
		{Time: at.Add(5 * time.Second), Unit: "kvmd.service", Message: "two", Fields: map[string]string{"MESSAGE": "values"}},
	})
	zone := time.FixedZone("UTC+5:30", 5*3600+30*60)
	r := newReader(dir, func(c *Config) { c.Location = zone })
	diff(t, readAll(t, r, 0), []string{
		"[2024-05-01 17:30:00 kvmd.service] --- Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad",
		"[2024-05-01 17:30:01 kvmd.service] --- Привет, мир ✓ 🎉 trailing",
		`[2024-05-01 17:30:02 kvmd.service] --- binary \xff\xfe\x00 and \x1b[1mescape\x1b[0m`,
		"[2024-05-01 17:30:03 kvmd.service] --- ",
		"[2024-05-01 17:30:04 kvmd.service] --- big " + strings.Repeat("x", 5000),
		"[2024-05-01 17:30:05 kvmd.service] --- two",
	})
}

// TestHugeMessage runs an entry over the cap through journalctl.
func TestHugeMessage(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	journaltest.Write(t, dir, "system", []journaltest.Entry{
		{Time: at, Unit: "kvmd.service", Message: strings.Repeat("y", 3<<20)},
		{Time: at, Unit: "kvmd.service", Message: "after"},
	})
	diff(t, readAll(t, newReader(dir, nil), 0), []string{
		"[2024-05-01 12:00:00 kvmd.service] --- " + strings.Repeat("y", maxMessage) + " [message truncated: 3145728 bytes]",
		"[2024-05-01 12:00:00 kvmd.service] --- after",
	})
}

// TestLocalZone checks the default zone, time.Local, follows TZ, in a
// child process (time.Local is set once per process).
func TestLocalZone(t *testing.T) {
	if dir := os.Getenv("JOURNAL_TEST_TZ_DIR"); dir != "" {
		out := readAll(t, New(Config{Dir: dir}), 0)
		if want := "[2024-01-15 13:00:00 kvmd.service] --- winter\r\n[2024-07-15 14:00:00 kvmd.service] --- summer\r\n"; out != want {
			t.Fatalf("got %q, want %q", out, want)
		}
		return
	}
	if _, err := os.Stat("/usr/share/zoneinfo/Europe/Berlin"); err != nil {
		t.Skip("no zoneinfo")
	}
	dir := t.TempDir()
	journaltest.Write(t, dir, "system", []journaltest.Entry{
		{Time: time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC), Unit: "kvmd.service", Message: "winter"},
		{Time: time.Date(2024, 7, 15, 12, 0, 0, 0, time.UTC), Unit: "kvmd.service", Message: "summer"},
	})
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalZone$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ=Europe/Berlin", "JOURNAL_TEST_TZ_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("--- PASS: TestLocalZone")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// appendN appends messages "msg <i>" for i in [from, to).
func appendN(w *journaltest.Writer, from, to int) {
	for i := from; i < to; i++ {
		w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: fmt.Sprintf("msg %d", i)})
	}
}

func TestFollow(t *testing.T) {
	dir := t.TempDir()
	w := journaltest.Start(t, dir, "system")
	w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: "before"},
		// --unit expands the glob when journalctl starts: this unit has to
		// be in the journal by then (see doc.go).
		journaltest.Entry{Boot: bootNow, Unit: "kvmd-otg.service", Message: "otg before"})
	w.Sync()
	f := follow(t, newReader(dir, nil), 0)
	f.out.waitFor(t, "--- otg before\r\n", 5*time.Second)

	var worst time.Duration
	for i := range 20 {
		msg := fmt.Sprintf("appended %d\r\n", i)
		start := time.Now()
		w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: strings.TrimSuffix(msg, "\r\n")})
		f.out.waitFor(t, msg, 5*time.Second)
		worst = max(worst, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("append to Copy's output: at most %v", worst)
	if worst > 500*time.Millisecond {
		t.Errorf("an appended entry took %v to arrive", worst)
	}
	// An entry of another unit is filtered, not a stall.
	w.Append(journaltest.Entry{Boot: bootNow, Unit: "sshd.service", Message: "ssh"},
		journaltest.Entry{Boot: bootNow, Unit: "kvmd-otg.service", Message: "otg"})
	f.out.waitFor(t, "--- otg\r\n", 5*time.Second)
	if strings.Contains(f.out.String(), "ssh") {
		t.Error("sshd.service shown")
	}
}

// TestRotation follows while the journal moves to a second file, as
// after journald's rotation: no entry lost or repeated.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	w1 := journaltest.Start(t, dir, "system")
	appendN(w1, 0, 15)
	w1.Sync()
	f := follow(t, newReader(dir, nil), 0)
	appendN(w1, 15, 60)
	f.out.waitFor(t, "--- msg 59\r\n", 5*time.Second)
	w1.Close()
	w2 := journaltest.Start(t, dir, "system@2")
	for i := 60; i < 120; i += 10 {
		appendN(w2, i, i+10)
		time.Sleep(2 * time.Millisecond)
	}
	f.out.waitFor(t, "--- msg 119\r\n", 5*time.Second)
	time.Sleep(50 * time.Millisecond) // let duplicates, if any, arrive

	var want []string
	for i := range 120 {
		want = append(want, fmt.Sprintf("msg %d", i))
	}
	var got []string
	for _, l := range lines(f.out.String()) {
		got = append(got, l[strings.Index(l, "] --- ")+6:])
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %d lines:\n%s", len(got), strings.Join(got, ","))
	}
}

// settleGoroutines waits for the goroutine count to come back to n.
func settleGoroutines(t *testing.T, n int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(10 * time.Millisecond) {
		if runtime.NumGoroutine() <= n {
			return
		}
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}

func processGone(t *testing.T, pid int) {
	t.Helper()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("journalctl (pid %d) still exists: %v", pid, err)
	}
}

func TestStop(t *testing.T) {
	dir := t.TempDir()
	w := journaltest.Start(t, dir, "system")
	appendN(w, 0, 3)
	w.Sync()
	r := newReader(dir, func(c *Config) { c.MaxFollowers = 1 })
	before := runtime.NumGoroutine()

	t.Run("context cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := r.Open(ctx, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pid := s.cmd.Process.Pid
		out := newSink()
		done := make(chan error, 1)
		go func() {
			_, err := s.Copy(out, CopyOptions{})
			done <- err
		}()
		out.waitFor(t, "msg 2\r\n", 5*time.Second)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Copy: %v, want context.Canceled", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Copy did not return after cancel")
		}
		s.Close()
		s.Close()
		processGone(t, pid)
		if _, err := s.Copy(io.Discard, CopyOptions{}); !errors.Is(err, errClosed) {
			t.Errorf("Copy after Close: %v", err)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := r.Open(ctx, 0, true)
		if err != nil {
			t.Fatal(err) // also: the slot of the first subtest was released
		}
		defer s.Close()
		pid := s.cmd.Process.Pid
		wantErr := errors.New("connection reset")
		_, err = s.Copy(errWriter{wantErr}, CopyOptions{})
		if !errors.Is(err, wantErr) {
			t.Errorf("Copy: %v", err)
		}
		s.Close()
		processGone(t, pid)
	})
	t.Run("closed while copying", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := r.Open(ctx, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pid := s.cmd.Process.Pid
		out := newSink()
		done := make(chan error, 1)
		go func() {
			_, err := s.Copy(out, CopyOptions{})
			done <- err
		}()
		out.waitFor(t, "msg 2\r\n", 5*time.Second)
		s.Close()
		if err := <-done; err == nil {
			t.Error("Copy returned nil after Close")
		}
		processGone(t, pid)
	})
	settleGoroutines(t, before)
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// flushLog records what Copy had written at each flush, and when.
type flushLog struct {
	mu      sync.Mutex
	b       bytes.Buffer
	flushes []string
	at      []time.Time
}

func (f *flushLog) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.Write(p)
}

func (f *flushLog) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes = append(f.flushes, f.b.String())
	f.at = append(f.at, time.Now())
	return nil
}

func (f *flushLog) get() ([]string, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.flushes...), append([]time.Time(nil), f.at...)
}

// TestFlushBatches: lines that come within flushEvery of the last flush
// go out together; a line after a quiet spell goes out at once.
func TestFlushBatches(t *testing.T) {
	entry := func(msg string) string {
		return "__REALTIME_TIMESTAMP=1714564800000000\\n_SYSTEMD_UNIT=kvmd.service\\nMESSAGE=" + msg + "\\n\\n"
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "journalctl")
	marker := filepath.Join(dir, "c")
	script := "#!/bin/sh\nprintf '" + entry("a") + "'\nsleep 0.05\nprintf '" + entry("b") + "'\nsleep 1.5\n" +
		"touch " + marker + "\nprintf '" + entry("c") + "'\nexec sleep 1000\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := New(Config{Dir: dir, Journalctl: bin, Location: time.UTC}).Open(ctx, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const every = 500 * time.Millisecond
	s.flushEvery = every
	out := &flushLog{}
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Copy(out, CopyOptions{Flush: out.Flush})
		done <- err
	}()
	line := func(msg string) string { return "[2024-05-01 12:00:00 kvmd.service] --- " + msg + "\r\n" }
	for {
		if flushes, _ := out.get(); len(flushes) >= 3 || time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	flushes, at := out.get()
	want := []string{"", line("a") + line("b"), line("a") + line("b") + line("c")}
	if len(flushes) < 3 || strings.Join(flushes[:3], "|") != strings.Join(want, "|") {
		t.Fatalf("flushed %q, want %q", flushes, want)
	}
	if d := at[1].Sub(at[0]); d < every-50*time.Millisecond {
		t.Errorf("a and b flushed %v after the headers, want about %v", d, every)
	}
	fi, err := os.Stat(marker)
	if err != nil {
		t.Fatal(err)
	}
	if d := at[2].Sub(fi.ModTime()); d > 200*time.Millisecond {
		t.Errorf("c, after a quiet spell, flushed %v after it was printed", d)
	}
}

// TestWriteTimeout: a client that stops reading is dropped after
// WriteTimeout, when Copy can set deadlines.
func TestWriteTimeout(t *testing.T) {
	dir := t.TempDir()
	w := journaltest.Start(t, dir, "system")
	appendN(w, 0, 1)
	w.Sync()
	r := newReader(dir, func(c *Config) { c.WriteTimeout = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.Open(ctx, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stuck := &stuckConn{}
	start := time.Now()
	_, err = s.Copy(stuck, CopyOptions{SetWriteDeadline: stuck.setDeadline})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Copy: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
		t.Errorf("dropped after %v, want about 100ms", d)
	}
	if !stuck.deadline.IsZero() {
		t.Error("deadline not cleared")
	}
}

// stuckConn blocks every write until its deadline, like a connection to
// a client that does not read.
type stuckConn struct{ deadline time.Time }

func (c *stuckConn) setDeadline(t time.Time) error { c.deadline = t; return nil }

func (c *stuckConn) Write([]byte) (int, error) {
	if c.deadline.IsZero() {
		return 0, errors.New("write without a deadline: would block forever")
	}
	time.Sleep(time.Until(c.deadline))
	return 0, os.ErrDeadlineExceeded
}

func TestManyFollowers(t *testing.T) {
	const n = 100
	dir := t.TempDir()
	w := journaltest.Start(t, dir, "system")
	appendN(w, 0, 1)
	w.Sync()
	r := newReader(dir, func(c *Config) { c.MaxFollowers = n })

	start := time.Now()
	fs := make([]*follower, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range fs {
		wg.Go(func() { fs[i], errs[i] = startFollower(r, 0) })
	}
	wg.Wait()
	for i, f := range fs {
		if f != nil {
			t.Cleanup(f.stop)
		}
		if errs[i] != nil {
			t.Fatalf("follower %d: %v", i, errs[i])
		}
	}
	t.Logf("%d followers opened in %v", n, time.Since(start))
	if _, err := r.Open(context.Background(), 0, true); !errors.Is(err, ErrTooManyFollowers) {
		t.Fatalf("follower %d: %v, want ErrTooManyFollowers", n+1, err)
	}
	s, err := r.Open(context.Background(), 0, false) // not a follower
	if err != nil {
		t.Fatalf("non-follow Open with every follower slot taken: %v", err)
	}
	if got := r.Followers(); got != n {
		t.Errorf("Followers() = %d with %d follows and a plain read open, want %d", got, n, n)
	}
	s.Close()

	start = time.Now()
	w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: "to everyone"})
	deadline := start.Add(10 * time.Second)
	for _, f := range fs {
		f.out.waitFor(t, "--- to everyone\r\n", time.Until(deadline))
	}
	t.Logf("%d followers got the entry within %v", n, time.Since(start))

	fs[0].stop()
	if got := r.Followers(); got != n-1 {
		t.Errorf("Followers() = %d after one follow ended, want %d", got, n-1)
	}
	if s, err := r.Open(context.Background(), 0, true); err != nil {
		t.Errorf("Open after a follower left: %v", err)
	} else {
		s.Close()
	}
}

func TestUnavailable(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, dir, "system", []journaltest.Entry{{Unit: "kvmd.service", Message: "x"}})
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	failing := filepath.Join(t.TempDir(), "journalctl")
	os.WriteFile(failing, []byte("#!/bin/sh\necho 'Failed to open journal: \033[1mInput/output error\033[0m' >&2\necho second line >&2\necho third line >&2\nexit 1\n"), 0o755)

	for _, tc := range []struct {
		name   string
		cfg    Config
		reason string
	}{
		{"missing directory", Config{Dir: filepath.Join(dir, "nope")}, "no such file or directory"},
		{"not a directory", Config{Dir: file}, "is not a directory"},
		{"no journalctl", Config{Dir: dir, Journalctl: "/nonexistent/journalctl"}, "no such file or directory"},
		{"journalctl not on PATH", Config{Dir: dir, Journalctl: "journalctl-missing"}, "executable file not found"},
		{"journalctl fails", Config{Dir: dir, Journalctl: failing},
			"journal: not available: journalctl: Failed to open journal: [1mInput/output error[0m; second line"},
		{"bad pattern", Config{Dir: dir, Units: []string{"kvmd-[.service"}}, "bad unit pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, follow := range []bool{false, true} {
				s, err := New(tc.cfg).Open(context.Background(), 0, follow)
				if err == nil {
					s.Close()
					t.Fatal("no error")
				}
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("got %q, want ErrUnavailable with %q", err, tc.reason)
				}
			}
		})
	}

	t.Run("no system journal", func(t *testing.T) {
		r := New(Config{})
		r.systemDirs = []string{filepath.Join(dir, "run"), filepath.Join(dir, "var")}
		if _, err := r.Open(context.Background(), 0, false); !errors.Is(err, ErrUnavailable) {
			t.Errorf("got %v", err)
		}
	})

	t.Run("permission denied", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads every file")
		}
		locked := t.TempDir()
		p := journaltest.Write(t, locked, "system", []journaltest.Entry{{Unit: "kvmd.service", Message: "x"}})
		os.Chmod(p, 0)
		if _, err := New(Config{Dir: locked}).Open(context.Background(), 0, false); !errors.Is(err, ErrUnavailable) ||
			!strings.Contains(err.Error(), "permission denied") {
			t.Errorf("got %v", err)
		}
	})
}

// TestNothingYet: a journal that is fine but has nothing to show is an
// empty stream, and a follow on it sees what comes.
func TestNothingYet(t *testing.T) {
	t.Run("empty directory", func(t *testing.T) {
		dir := t.TempDir()
		r := newReader(dir, nil)
		if out := readAll(t, r, 0); out != "" {
			t.Errorf("got %q", out)
		}
		f := follow(t, r, 0)
		w := journaltest.Start(t, dir, "system")
		appendN(w, 0, 1)
		f.out.waitFor(t, "--- msg 0\r\n", 5*time.Second)
	})
	t.Run("no unit matches the globs", func(t *testing.T) {
		dir := t.TempDir()
		w := journaltest.Start(t, dir, "system")
		w.Append(journaltest.Entry{Boot: bootNow, Unit: "sshd.service", Message: "ssh"})
		w.Sync()
		r := newReader(dir, func(c *Config) { c.Units = []string{"kvmd-*.service"} })
		if out := readAll(t, r, 0); out != "" {
			t.Errorf("got %q", out)
		}
		f := follow(t, r, 0)
		w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd-new.service", Message: "new unit"})
		f.out.waitFor(t, "[", 5*time.Second)
		if got := lines(f.out.String()); len(got) != 1 || !strings.HasSuffix(got[0], "kvmd-new.service] --- new unit") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("system journal", func(t *testing.T) {
		r := New(Config{})
		if _, err := r.preflight(); err != nil {
			t.Skipf("no readable system journal here: %v", err)
		}
		start := time.Now()
		s, err := r.Open(context.Background(), time.Nanosecond, true)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if d := time.Since(start); d > readyTimeout*3/4 {
			t.Errorf("Open of an idle follow took %v, near readyTimeout", d)
		}
	})
}

// TestOpenIdleFollow: with nothing in the seek window, Open returns as soon
// as journalctl watches the journal, not after readyTimeout.
func TestOpenIdleFollow(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, dir, "system", []journaltest.Entry{
		{Time: time.Now().Add(-time.Hour), Boot: bootNow, Unit: "kvmd.service", Message: "old"},
	})
	r := newReader(dir, nil)
	var worst time.Duration
	for range 5 {
		start := time.Now()
		s, err := r.Open(context.Background(), time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		s.Close()
	}
	t.Logf("Open of an idle follow: at most %v", worst)
	// Well under readyTimeout (2 s), which is what a wrong Open would
	// take; not tighter, so that a loaded machine does not fail it.
	if worst > readyTimeout*3/4 {
		t.Errorf("Open of an idle follow took %v, near readyTimeout", worst)
	}
}

// fakeJournalctl writes a journalctl that prints one entry and then
// waits, unlike journalctl, without watching its output: only a kill
// ends it. body runs after the entry; PIDFILE in it is replaced.
func fakeJournalctl(t *testing.T, body string) (path, pidfile string) {
	dir := t.TempDir()
	path, pidfile = filepath.Join(dir, "journalctl"), filepath.Join(dir, "pid")
	script := "#!/bin/sh\nprintf '__REALTIME_TIMESTAMP=1714564800000000\\n_SYSTEMD_UNIT=kvmd.service\\nMESSAGE=fake\\n\\n'\n" +
		strings.ReplaceAll(body, "PIDFILE", pidfile)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pidfile
}

// readPid waits for the fake journalctl to write its pid file.
func readPid(t *testing.T, pidfile string) int {
	t.Helper()
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
		var pid int
		if b, err := os.ReadFile(pidfile); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatal("no pid file")
	return 0
}

// alive tells whether pid runs (a zombie does not: nothing may reap
// orphans in a container).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(5 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Errorf("%s (pid %d) still runs", what, pid)
}

// TestCloseKillsGroup: Close kills what journalctl started too.
func TestCloseKillsGroup(t *testing.T) {
	bin, pidfile := fakeJournalctl(t, "sleep 1000 &\necho $! > PIDFILE\nwait\n")
	s, err := New(Config{Dir: t.TempDir(), Journalctl: bin}).Open(context.Background(), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidfile)
	s.Close()
	processGone(t, s.cmd.Process.Pid)
	waitDead(t, child, "journalctl's child")
}

// TestParentDeath: journalctl dies with the daemon, even one killed
// before it could Close.
func TestParentDeath(t *testing.T) {
	if bin := os.Getenv("JOURNAL_TEST_ORPHAN"); bin != "" {
		s, err := New(Config{Dir: t.TempDir(), Journalctl: bin}).Open(context.Background(), 0, true)
		if err != nil {
			t.Fatal(err)
		}
		_ = s
		fmt.Println("open")
		time.Sleep(time.Minute) // killed before
		return
	}
	bin, pidfile := fakeJournalctl(t, "echo $$ > PIDFILE\nexec sleep 1000\n")
	cmd := exec.Command(os.Args[0], "-test.run=^TestParentDeath$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOURNAL_TEST_ORPHAN="+bin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line := make([]byte, 5)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "open\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	pid := readPid(t, pidfile)
	if !alive(pid) {
		t.Fatal("fake journalctl not running")
	}
	cmd.Process.Kill()
	waitDead(t, pid, "journalctl of a killed daemon")
}
