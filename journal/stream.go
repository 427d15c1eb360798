package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sync"
	"time"

	"kvmd/internal/procgroup"
	"kvmd/journal/export"
)

// Buffer sizes: with the caps in entry.go they bound a stream's memory
// (about 100 KiB, plus up to maxMessage while an entry that large passes).
// A slow client stalls Copy in a write; the pipe then fills and journalctl
// blocks in its own write: nothing queues up in the daemon.
const (
	readBuffer  = 64 << 10
	writeBuffer = 32 << 10
	keepMessage = 64 << 10 // a message buffer grown past this is dropped after use
	unitCache   = 64       // unit names whose pattern match a stream remembers
)

// flushEvery is how often Copy flushes, at most, while journalctl's
// output keeps coming: lines written within that time of the last flush
// wait for the next entry rather than go out alone, so that a backlog
// goes out in fewer, fuller writes (a flush per 4 KiB pipe write costs
// the daemon and the client more than the lines themselves). A line
// after a quiet spell, as in a follow, is flushed at once.
const flushEvery = time.Millisecond

var (
	errBusy   = errors.New("journal: stream already being copied")
	errClosed = errors.New("journal: stream closed")
)

// Stream is one journalctl run. Copy writes its log lines; Close ends it.
type Stream struct {
	r      *Reader
	ctx    context.Context
	follow bool

	cmd    *exec.Cmd
	pr     *os.File
	stderr *headBuffer
	stop   func() bool // unregisters the context.AfterFunc

	procMu    sync.Mutex
	exited    bool
	waitOnce  sync.Once
	waitErr   error
	closeOnce sync.Once
	release   func() // the follower slot, if any

	deadlineMu  sync.Mutex // orders Copy's read deadlines with interrupt's
	interrupted bool
	deadline    time.Time // the read deadline Copy set

	flushEvery time.Duration // flushEvery, or longer in tests

	mu      sync.Mutex // held by Copy, and by Close to release what Copy uses
	closed  bool
	br      *bufio.Reader
	rd      *export.Reader // reads br
	e       entry
	units   map[string]bool
	skipped int // entries without a timestamp
}

// CopyOptions are the hooks Copy needs from an HTTP response (or any
// other writer) without depending on net/http. WriteLog takes them from
// its writer's methods.
type CopyOptions struct {
	// Flush, if set, pushes what was written to the client. Copy calls it
	// first thing (so that headers go out before the first entry, which
	// may be hours away with follow) and when it has written lines and
	// reading on would wait (after flushEvery since the last flush).
	Flush func() error
	// SetWriteDeadline, if set, is called with now+WriteTimeout before
	// every write and flush, and with the zero time when Copy returns. An
	// error from it (such as http.ErrNotSupported) stops its use.
	SetWriteDeadline func(time.Time) error
}

// Copy writes the stream's log lines to w, one per entry, in batches: it
// flushes when the next entry is not already buffered, and while
// journalctl's output keeps coming, at most every flushEvery. It returns
// when journalctl ends (nil, unless journalctl failed, or ended while
// following), when the stream's context ends (its error), or on a write
// error. The number of bytes written to w is returned.
//
// Copy is not an io.WriterTo: it needs the flush and deadline hooks.
func (s *Stream) Copy(w io.Writer, opt CopyOptions) (int64, error) {
	if !s.mu.TryLock() {
		return 0, errBusy
	}
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed
	}
	dw := &deadlineWriter{w: w, set: opt.SetWriteDeadline, timeout: s.r.cfg.WriteTimeout}
	defer dw.clear()
	bw := bufio.NewWriterSize(dw, writeBuffer)
	var last time.Time // of the last flush
	flush := func() error {
		s.setReadDeadline(time.Time{})
		last = time.Now()
		if err := bw.Flush(); err != nil {
			return err
		}
		if opt.Flush == nil {
			return nil
		}
		dw.arm()
		return opt.Flush()
	}
	// At once: the response headers go out before the first entry, which
	// may be hours away with follow.
	if err := flush(); err != nil {
		return dw.n, err
	}
	pending := false
	for {
		if pending && s.wouldBlock() && !s.entryBy(last.Add(s.flushEvery)) {
			if err := flush(); err != nil {
				return dw.n, err
			}
			pending = false
		}
		// Here the pipe has no read deadline of Copy's (a flush cleared
		// it), or the next entry is buffered and readEntry does not read.
		err := readEntry(s.rd, &s.e)
		if err == errNoTime {
			s.skipped++
			continue
		}
		if err != nil {
			if pending {
				if ferr := flush(); ferr != nil {
					return dw.n, ferr
				}
			}
			return dw.n, s.end(err)
		}
		if !s.match(&s.e) {
			continue
		}
		if err := writeLine(bw, &s.e, s.r.cfg.Location); err != nil {
			return dw.n, err
		}
		pending = true
		if cap(s.e.message.b) > keepMessage {
			s.e.message.b = nil
		}
	}
}

// WriteLog writes the log lines from seek back (0: the whole boot), and
// with follow those written after, to w until ctx ends: Open, Copy and
// Close in one call. Copy's hooks are w's methods Flush() error and
// SetWriteDeadline(time.Time) error, when it has them. As Copy flushes w
// first thing, an error returned before anything was written to or
// flushed on w is Open's (an *Error, or ctx's); a later one is Copy's.
func (r *Reader) WriteLog(ctx context.Context, w io.Writer, seek time.Duration, follow bool) error {
	s, err := r.Open(ctx, seek, follow)
	if err != nil {
		return err
	}
	defer s.Close()
	var opt CopyOptions
	if f, ok := w.(interface{ Flush() error }); ok {
		opt.Flush = f.Flush
	}
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		opt.SetWriteDeadline = d.SetWriteDeadline
	}
	_, err = s.Copy(w, opt)
	return err
}

// wouldBlock tells whether reading the next entry needs a read from the
// pipe, that is whether it is not wholly buffered.
func (s *Stream) wouldBlock() bool { return !s.rd.Ready() }

// end turns the error that stopped reading into Copy's result.
func (s *Stream) end(err error) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if errors.Is(err, os.ErrClosed) {
		return errClosed
	}
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		return fmt.Errorf("journal: reading journalctl's output: %w", err)
	}
	// The output ended: journalctl exited, or was killed by Close.
	if werr := s.wait(); werr != nil {
		return fmt.Errorf("journal: %w", &exitError{err: werr, stderr: s.stderr.String()})
	}
	if err == io.ErrUnexpectedEOF {
		return errors.New("journal: journalctl's output ends inside an entry")
	}
	if s.follow {
		return errors.New("journal: journalctl stopped following")
	}
	return nil
}

// match tells whether e is from one of the configured units. journalctl's
// --unit also brings PID 1's and coredumps' messages about the unit,
// which kvmd does not show.
func (s *Stream) match(e *entry) bool {
	if !e.unit.set || e.unit.dropped > 0 {
		return false
	}
	if ok, found := s.units[string(e.unit.b)]; found {
		return ok
	}
	unit := string(e.unit.b)
	ok := false
	for _, p := range s.r.cfg.Units {
		if m, _ := path.Match(p, unit); m {
			ok = true
			break
		}
	}
	if s.units == nil {
		s.units = make(map[string]bool)
	}
	if len(s.units) < unitCache {
		s.units[unit] = ok
	}
	return ok
}

// awaitReady waits until journalctl has shown it runs: it printed
// something, it exited (successfully: an empty result; else an
// *exitError), or, when following, it watches the journal. See doc.go.
func (s *Stream) awaitReady(ctx context.Context) error {
	defer s.pr.SetReadDeadline(time.Time{})
	start := time.Now()
	step := time.Millisecond
	for {
		s.pr.SetReadDeadline(time.Now().Add(step))
		_, err := s.br.Peek(1)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			// Its output closed: it has exited.
			if werr := s.wait(); werr != nil {
				return &exitError{err: werr, stderr: s.stderr.String()}
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.follow && watching(s.cmd.Process.Pid) {
			return nil
		}
		if time.Since(start) > readyTimeout {
			return nil
		}
		step = min(2*step, 20*time.Millisecond)
	}
}

// interrupt wakes a Copy blocked reading, when the context ends.
func (s *Stream) interrupt() {
	s.deadlineMu.Lock()
	defer s.deadlineMu.Unlock()
	s.interrupted = true
	s.pr.SetReadDeadline(time.Unix(1, 0))
}

// entryBy waits until the next entry is wholly buffered, at the latest
// until t, and tells whether it is. The read deadline it sets stays until
// Copy's next flush: set once per flush, not once per wait, it spares the
// runtime a timer per pipe write.
func (s *Stream) entryBy(t time.Time) bool {
	if !time.Now().Before(t) || !s.setReadDeadline(t) {
		return false
	}
	for {
		n := s.br.Buffered()
		if n == s.br.Size() {
			return false // an entry longer than the buffer: it is read in parts
		}
		if _, err := s.br.Peek(n + 1); err != nil {
			return false
		}
		if s.rd.Ready() {
			return true
		}
	}
}

// setReadDeadline sets the pipe's read deadline, unless interrupt has
// set it in the past for good; it tells whether it did.
func (s *Stream) setReadDeadline(t time.Time) bool {
	s.deadlineMu.Lock()
	defer s.deadlineMu.Unlock()
	if s.interrupted {
		return false
	}
	if !t.Equal(s.deadline) {
		s.pr.SetReadDeadline(t)
		s.deadline = t
	}
	return true
}

// wait reaps journalctl, once.
func (s *Stream) wait() error {
	s.waitOnce.Do(func() {
		s.waitErr = s.cmd.Wait()
		s.procMu.Lock()
		s.exited = true
		s.procMu.Unlock()
	})
	return s.waitErr
}

func (s *Stream) kill() {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if !s.exited {
		procgroup.Kill(s.cmd.Process)
	}
}

// Close kills journalctl and its process group, waits for it, and frees
// the stream's buffers and follower slot. A Copy in progress returns (if
// it is blocked writing, once its write returns). Close may be called
// more than once; it returns nil.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.kill()
		s.pr.Close()
		s.wait()
		s.mu.Lock()
		s.closed = true
		s.br, s.rd, s.e, s.units = nil, nil, entry{}, nil
		s.mu.Unlock()
		if s.release != nil {
			s.release()
		}
	})
	return nil
}

// deadlineWriter counts what it writes and arms a write deadline first.
type deadlineWriter struct {
	w       io.Writer
	set     func(time.Time) error
	timeout time.Duration
	n       int64
}

func (d *deadlineWriter) arm() {
	if d.set != nil && d.set(time.Now().Add(d.timeout)) != nil {
		d.set = nil
	}
}

func (d *deadlineWriter) clear() {
	if d.set != nil {
		d.set(time.Time{})
	}
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.arm()
	n, err := d.w.Write(p)
	d.n += int64(n)
	return n, err
}
