// Package memsink reads the frames ustreamer 4.9 (Debian 12's) puts in a
// shared-memory sink: its --raw-sink, the raw frames it captures, which
// the daemon's hardware H.264 encoder takes (--sink holds its JPEG ones
// in the same format).
//
// The sink is one POSIX shared-memory object (/dev/shm/NAME) of struct
// memsink_shared_s (src/libs/memsinksh.h at pikvm/ustreamer's v4.9): a
// header and up to 32 MiB of frame. ustreamer writes a frame under an
// exclusive flock(2) of the object, with a new id; a client takes the
// same lock to read it, and writes the time it read (last_client_ts, of
// CLOCK_MONOTONIC_RAW) into the header: ustreamer writes frames only
// while some client has read within --raw-sink-client-ttl seconds, or
// when the frame's size or format changes (memsink_server_check). There
// is no wakeup: clients poll, as ustreamer's own do. Without a capture
// device ustreamer 4.9 puts its "NO SIGNAL" JPEG there once a second,
// marked offline.
package memsink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The format's constants (src/libs/memsinksh.h at v4.9).
const (
	magic   = 0xcafebabecafebabe // MEMSINK_MAGIC
	version = 2                  // MEMSINK_VERSION
	// MaxData is the most data a frame has: CFG_MEMSINK_MAX_DATA's
	// default, which Debian's build keeps.
	MaxData = 32 << 20
)

// Errors.
var (
	// ErrVersion is a sink of another format version than 4.9's.
	ErrVersion = errors.New("memsink: not ustreamer 4.9's sink (another format version)")
	// ErrUnsupported is a machine whose C layout the package does not
	// know (only x86-64, aarch64 and 32-bit ARM).
	ErrUnsupported = errors.New("memsink: the sink's layout on this machine is not known")
	// ErrName is a sink name shm_open(3) would not take.
	ErrName = errors.New("memsink: bad sink name")
	// ErrCorrupt is a header that does not fit its object.
	ErrCorrupt = errors.New("memsink: corrupt sink")
	// ErrClosed is a Reader used after Close.
	ErrClosed = errors.New("memsink: reader closed")
)

// Frame is one frame of the sink.
type Frame struct {
	// ID is ustreamer's, new for each frame it puts.
	ID uint64
	// Format is the V4L2 pixel format code (fourcc) of Data: the
	// capture's ("YUYV", "UYVY"...), or JPEG for the placeholder.
	Format uint32
	// Width, Height and Stride (bytes from one row to the next) of the
	// picture.
	Width, Height, Stride int
	// Online is false for ustreamer's placeholder (no capture device, no
	// signal); Key marks a key frame of a coded sink.
	Online, Key bool
	// Grab is when ustreamer took the frame from the device, on this
	// machine's clock (zero for the placeholder, which it never took).
	Grab time.Time
	Data []byte
}

// FourCC spells Format: "YUYV", "JPEG".
func (f Frame) FourCC() string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], f.Format)
	return strings.TrimRight(string(b[:]), " \x00")
}

// Options tune a Reader; zero values take the defaults.
type Options struct {
	// Dir is where the system keeps POSIX shared memory: /dev/shm.
	Dir string
	// Poll is how often the sink is looked at while no new frame is
	// there: 2 ms (ustreamer's own Python client polls every 1 ms).
	Poll time.Duration
	// MaxData bounds a frame: MaxData, ustreamer's own bound.
	MaxData int
}

// Reader reads one sink. Next is called from one goroutine at a time;
// Close may be called from another.
type Reader struct {
	name, path string
	opts       Options
	l          layout

	mu      sync.Mutex
	f       *os.File
	size    int64 // the object's size when opened
	lastID  uint64
	checked time.Time
	hdr     []byte
	done    chan struct{}
}

// Open opens the sink called name (ustreamer's --raw-sink NAME). Its
// error wraps fs.ErrNotExist while ustreamer has not made it.
func Open(name string, o Options) (*Reader, error) {
	if native.data == 0 {
		return nil, ErrUnsupported
	}
	// shm_open(3) takes a name with one leading slash and no other.
	base := strings.TrimPrefix(name, "/")
	if base == "" || base == "." || base == ".." || strings.ContainsRune(base, '/') || strings.ContainsRune(base, 0) {
		return nil, fmt.Errorf("%w: %q", ErrName, name)
	}
	if o.Dir == "" {
		o.Dir = "/dev/shm"
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Millisecond
	}
	if o.MaxData <= 0 || o.MaxData > MaxData {
		o.MaxData = MaxData
	}
	r := &Reader{name: base, path: filepath.Join(o.Dir, base), opts: o, l: native,
		hdr: make([]byte, native.data), done: make(chan struct{})}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// open opens the object at the path, the one there now.
func (r *Reader) open() error {
	f, err := os.OpenFile(r.path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("memsink: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("memsink: %w", err)
	}
	if r.f != nil {
		r.f.Close()
	}
	r.f, r.size, r.lastID, r.checked = f, st.Size(), 0, time.Now()
	return nil
}

// Next waits for a frame newer than the last one it returned (the first
// call takes the one there, which may be old: see its Grab) and returns
// it, its Data in buf when buf is large enough. It ends with ctx or Close.
func (r *Reader) Next(ctx context.Context, buf []byte) (Frame, error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		case <-r.done:
			return Frame{}, ErrClosed
		case <-t.C:
		}
		f, ok, err := r.look(buf)
		if err != nil || ok {
			return f, err
		}
		t.Reset(r.opts.Poll)
	}
}

// look looks at the sink once: under its lock, it says it is read (for
// ustreamer to go on writing) and takes the frame if it is new. A lock
// ustreamer holds is a look with nothing new.
func (r *Reader) look(buf []byte) (Frame, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return Frame{}, false, ErrClosed
	}
	if time.Since(r.checked) >= time.Second {
		if err := r.reopenIfReplaced(); err != nil {
			return Frame{}, false, err
		}
	}
	fd := int(r.f.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR) {
			return Frame{}, false, nil
		}
		return Frame{}, false, fmt.Errorf("memsink: locking %s: %w", r.path, err)
	}
	defer unix.Flock(fd, unix.LOCK_UN)
	if _, err := r.f.ReadAt(r.hdr, 0); err != nil {
		if errors.Is(err, io.EOF) {
			return Frame{}, false, nil // not sized yet
		}
		return Frame{}, false, fmt.Errorf("memsink: %w", err)
	}
	h := r.l.parse(r.hdr)
	if h.magic != magic {
		return Frame{}, false, nil // nothing written yet
	}
	if h.version != version {
		return Frame{}, false, fmt.Errorf("%w: %s has version %d, not %d", ErrVersion, r.path, h.version, version)
	}
	raw := monoRaw()
	ts := make([]byte, r.l.longDouble)
	r.l.putLongDouble(ts, raw)
	if _, err := r.f.WriteAt(ts, int64(r.l.lastClient)); err != nil {
		return Frame{}, false, fmt.Errorf("memsink: %w", err)
	}
	if h.id == r.lastID {
		return Frame{}, false, nil
	}
	if h.used > uint64(r.opts.MaxData) || int64(r.l.data)+int64(h.used) > r.size {
		return Frame{}, false, fmt.Errorf("%w: %s holds a frame of %d bytes in an object of %d", ErrCorrupt, r.path, h.used, r.size)
	}
	n := int(h.used)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := r.f.ReadAt(buf, int64(r.l.data)); err != nil {
		return Frame{}, false, fmt.Errorf("memsink: %w", err)
	}
	r.lastID = h.id
	f := Frame{ID: h.id, Format: h.format, Width: int(h.width), Height: int(h.height), Stride: int(h.stride),
		Online: h.online, Key: h.key, Data: buf}
	if h.grab > 0 {
		f.Grab = time.Now().Add(-time.Duration((raw - h.grab) * float64(time.Second)))
	}
	return f, true, nil
}

// reopenIfReplaced opens the object at the path again when it is another
// than the one open: a new ustreamer made it anew (--raw-sink-rm). A
// removed one is kept: nothing else will come.
func (r *Reader) reopenIfReplaced() error {
	r.checked = time.Now()
	now, err := os.Stat(r.path)
	if err != nil {
		return nil
	}
	open, err := r.f.Stat()
	if err != nil {
		return fmt.Errorf("memsink: %w", err)
	}
	if os.SameFile(now, open) {
		return nil
	}
	if err := r.open(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Close closes the sink; a Next waiting returns ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	close(r.done)
	err := r.f.Close()
	r.f = nil
	return err
}

// header is what the reader takes of memsink_shared_s.
type header struct {
	magic                         uint64
	version                       uint32
	id, used                      uint64
	width, height, format, stride uint32
	online, key                   bool
	grab                          float64
}

// parse reads a header laid out as l says.
func (l layout) parse(b []byte) header {
	ne := binary.LittleEndian // the three machines are little-endian
	h := header{
		magic:   ne.Uint64(b[0:]),
		version: ne.Uint32(b[8:]),
		id:      ne.Uint64(b[l.id:]),
		width:   ne.Uint32(b[l.width:]),
		height:  ne.Uint32(b[l.height:]),
		format:  ne.Uint32(b[l.format:]),
		stride:  ne.Uint32(b[l.stride:]),
		online:  b[l.online] != 0,
		key:     b[l.key] != 0,
		grab:    l.getLongDouble(b[l.grab:]),
	}
	if l.usedSize == 8 {
		h.used = ne.Uint64(b[l.used:])
	} else {
		h.used = uint64(ne.Uint32(b[l.used:]))
	}
	return h
}

// monoRaw is CLOCK_MONOTONIC_RAW in seconds, the clock of ustreamer's
// timestamps (get_now_monotonic in src/libs/tools.h).
func monoRaw() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return 0
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}
