package hid

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/gadget"
)

// File is an open HID function node (/dev/hidgN), or a stand-in with the
// same behaviour: each Write is one report, and it fails with
// os.ErrDeadlineExceeded when the host has not taken the previous one by
// the deadline (O_NONBLOCK's EAGAIN, waited on by Go's poller).
type File interface {
	io.ReadWriteCloser
	SetWriteDeadline(time.Time) error
}

// Timings of a device's writer; variables so that tests can shorten them.
var (
	// writeTimeout is how long one report may wait for the host to take
	// the previous one (kvmd's select_timeout) before the device counts
	// as not read; the report stays at the head of the queue.
	writeTimeout = 100 * time.Millisecond
	// retryInterval is how often a device that is gone (no node, or
	// writes fail: the gadget is unbound or the cable pulled) is tried
	// again.
	retryInterval = 250 * time.Millisecond
)

// errInterrupted is returned to a sender that waits (print, shortcuts)
// when the device was cleared under it: a reset, another print, or the
// host's connection dropping.
var errInterrupted = errors.New("hid: interrupted")

// device is one HID function: the reports for it queue here, and one
// goroutine (run) writes them to its node. Senders never wait for the
// host: when the queue is full the newest pending report is replaced by
// the next (each report carries the whole state, so the last one queued
// is always the truth), except for senders that ask to wait (print).
type device struct {
	name  string // "keyboard", "mouse"
	open  func() (File, error)
	log   *slog.Logger
	leds  bool // read the keyboard's LED output reports
	max   int
	onChg func()

	mu    sync.Mutex
	queue [][]byte
	space chan struct{} // closed when reports leave the queue
	wake  chan struct{} // the writer's, cap 1
	gen   uint64        // bumped when the device is cleared
	// spaceWanted says a sender took space to wait on it: only then is
	// it closed and made anew (a print's every report made a channel).
	spaceWanted bool
	// clearState releases everything held and returns the report that
	// says so; it runs with mu held.
	clearState func() []byte

	online  atomic.Bool
	gone    atomic.Bool // no node, or a write failed other than by timing out
	ledBits atomic.Uint32
	written atomic.Uint64
	dropped atomic.Uint64
}

func newDevice(name string, max int, open func() (File, error), log *slog.Logger, onChange func()) *device {
	return &device{
		name: name, open: open, log: log, max: max, onChg: onChange,
		space: make(chan struct{}), wake: make(chan struct{}, 1),
	}
}

// send applies change, which returns the reports that tell the host of
// it, and queues them. Without wait it never blocks. With wait it first
// waits for room in the queue, until ctx ends (its error), the device is
// cleared after generation gen was read (errInterrupted), or stall passes
// without room (errStalled).
func (d *device) send(ctx context.Context, wait bool, gen uint64, stall time.Duration, change func() [][]byte) error {
	var timer <-chan time.Time
	for {
		d.mu.Lock()
		if wait && (d.gen != gen || d.gone.Load()) {
			d.mu.Unlock()
			return errInterrupted
		}
		// A change gives at most three reports (a release, a rollover,
		// a press): a waiting sender leaves room for them.
		if !wait || len(d.queue)+3 <= d.max {
			for _, r := range change() {
				d.push(r)
			}
			d.mu.Unlock()
			d.kick()
			return nil
		}
		space := d.space
		d.spaceWanted = true
		d.mu.Unlock()
		if timer == nil {
			t := time.NewTimer(stall)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer:
			return errStalled
		}
	}
}

// drain waits until the queue is empty (everything queued was written),
// with send's conditions: ctx, a clear since gen, the stall time.
func (d *device) drain(ctx context.Context, gen uint64, stall time.Duration) error {
	t := time.NewTimer(stall)
	defer t.Stop()
	for {
		d.mu.Lock()
		n, g, space := len(d.queue), d.gen, d.space
		d.spaceWanted = true
		d.mu.Unlock()
		switch {
		case g != gen || d.gone.Load():
			return errInterrupted
		case n == 0:
			return nil
		}
		select {
		case <-space:
			if !t.Stop() {
				<-t.C
			}
			t.Reset(stall)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return errStalled
		}
	}
}

// errStalled is returned to a waiting sender when the host has taken no
// report for the stall time.
var errStalled = errors.New("hid: the host is not reading the device")

// push queues r; mu is held.
func (d *device) push(r []byte) {
	if len(d.queue) >= d.max {
		d.queue[len(d.queue)-1] = r
		d.dropped.Add(1)
		return
	}
	d.queue = append(d.queue, r)
}

func (d *device) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// generation returns the count of clears so far, for a waiting sender.
func (d *device) generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// clear drops what is pending, releases everything and queues the report
// that says so; waiting senders are interrupted.
func (d *device) clear() {
	d.mu.Lock()
	d.dropped.Add(uint64(len(d.queue)))
	d.queue = d.queue[:0]
	d.gen++
	d.queue = append(d.queue, d.clearState())
	d.signalSpace()
	d.mu.Unlock()
	d.kick()
}

// signalSpace wakes the senders waiting for room; mu is held.
func (d *device) signalSpace() {
	if !d.spaceWanted {
		return
	}
	close(d.space)
	d.space = make(chan struct{})
	d.spaceWanted = false
}

func (d *device) head() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queue) == 0 {
		return nil, false
	}
	return d.queue[0], true
}

// pop removes the head if it is still r (a clear may have replaced the
// queue while r was written).
func (d *device) pop(r []byte) {
	d.mu.Lock()
	if len(d.queue) > 0 && &d.queue[0][0] == &r[0] {
		// Moved down rather than resliced: the queue keeps its array
		// (at most max reports) instead of walking off its end and
		// growing a new one every few reports.
		n := copy(d.queue, d.queue[1:])
		d.queue[n] = nil
		d.queue = d.queue[:n]
		d.signalSpace()
	}
	d.mu.Unlock()
}

func (d *device) setOnline(on bool) {
	if d.online.Swap(on) != on && d.onChg != nil {
		d.onChg()
	}
}

// run writes the queue to the device until ctx ends, then writes the
// release of everything held (kvmd's cleanup) and closes it.
func (d *device) run(ctx context.Context) {
	var f File
	var readerDone chan struct{}
	// reopened: the last write failed and the node was opened again for
	// one more try.
	reopened := false
	closeFile := func() {
		if f != nil {
			f.Close()
			if readerDone != nil {
				<-readerDone
			}
			f, readerDone = nil, nil
		}
	}
	defer closeFile()
	for ctx.Err() == nil {
		if f == nil {
			var err error
			if f, err = d.open(); err != nil {
				f = nil
				d.lost("HID device not available", err)
				d.sleep(ctx, retryInterval)
				continue
			}
			if !d.gone.Load() {
				d.setOnline(true)
			}
			if d.leds {
				readerDone = make(chan struct{})
				go d.readLEDs(f, readerDone)
			}
		}
		gone := d.gone.Load()
		var r []byte
		if gone {
			// Input sent while the host is gone is dropped: what is
			// written first when it is back is the release of all.
			r = d.probe()
		} else {
			var ok bool
			if r, ok = d.head(); !ok {
				select {
				case <-ctx.Done():
				case <-d.wake:
				}
				continue
			}
		}
		err := d.write(f, r)
		switch {
		case err == nil:
			if gone {
				d.gone.Store(false)
				d.log.Info("HID host is back", "device", d.name)
			} else {
				d.pop(r)
			}
			d.written.Add(1)
			d.setOnline(true)
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The host has not read the last report: not gone, maybe
			// asleep, or nobody opened the device. The head stays and
			// is written again; the queue coalesces meanwhile.
			d.setOnline(false)
		default:
			// A descriptor of a gadget made anew (kvmd otg stop and
			// start) fails though the host is there: open the node
			// again and write once more before calling the host gone.
			closeFile()
			if !gone && !reopened {
				reopened = true
				continue
			}
			// Unbound, unplugged, the function removed: what the host
			// had held it dropped with the device.
			d.lost("HID host gone; everything held is released", err)
			d.sleep(ctx, retryInterval)
		}
		if err == nil {
			reopened = false
		}
	}
	if f != nil && !d.gone.Load() {
		d.mu.Lock()
		r := d.clearState()
		d.mu.Unlock()
		if err := d.write(f, r); err != nil {
			d.log.Debug("HID release on exit not written", "device", d.name, "err", err)
		}
	}
}

// lost marks the device gone: at the first failure everything held is
// released (a waiting print stops), and it is said once.
func (d *device) lost(msg string, err error) {
	d.setOnline(false)
	if d.gone.Swap(true) {
		return
	}
	// A gadget without the function (no gadget yet, a board without a
	// device controller) is no fault of the daemon's.
	level := slog.LevelWarn
	if errors.Is(err, ErrNoFunction) || errors.Is(err, gadget.ErrNoNode) {
		level = slog.LevelInfo
	}
	d.log.Log(context.Background(), level, msg, "device", d.name, "err", err)
	d.clear()
}

// probe resets the state and drops what is queued while the host is gone,
// and returns the release report to try.
func (d *device) probe() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropped.Add(uint64(len(d.queue)))
	d.queue = d.queue[:0]
	d.signalSpace()
	return d.clearState()
}

func (d *device) write(f File, r []byte) error {
	if err := f.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		return err
	}
	n, err := f.Write(r)
	if err == nil && n != len(r) {
		err = io.ErrShortWrite
	}
	return err
}

func (d *device) sleep(ctx context.Context, dt time.Duration) {
	t := time.NewTimer(dt)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// readLEDs reads the keyboard's output reports until f is closed: one
// byte of LED bits (num 1, caps 2, scroll 4; kvmd/plugins/hid/otg/events.py).
func (d *device) readLEDs(f File, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 64)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
				d.log.Debug("HID output report not read", "device", d.name, "err", err)
			}
			return
		}
		if n == 0 {
			return
		}
		if d.ledBits.Swap(uint32(buf[0])) != uint32(buf[0]) && d.onChg != nil {
			d.onChg()
		}
	}
}
