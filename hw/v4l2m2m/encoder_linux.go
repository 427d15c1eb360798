package v4l2m2m

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvmd/internal/ioctl"
)

// ctrl is a control the driver has, with its range.
type ctrl struct {
	id             uint32
	min, max, step int32
}

// clamp fits v to c's range and step.
func (c *ctrl) clamp(v int64) int32 {
	v = max(int64(c.min), min(int64(c.max), v))
	if c.step > 1 {
		v = int64(c.min) + (v-int64(c.min))/int64(c.step)*int64(c.step)
	}
	return int32(v)
}

// mbuf is one mmap'd buffer of a queue.
type mbuf struct {
	data []byte
}

// Encoder is one open stateful encoder. Encode, ForceKeyFrame,
// SetBitrate, SetGOP and Close may be called from several goroutines;
// Encodes run one at a time.
type Encoder struct {
	cfg    Config
	dev    Device
	fd     int
	mplane bool

	bitrate, gop, forceKey, repeat *ctrl

	wantKey atomic.Bool
	closed  atomic.Bool

	mu        sync.Mutex
	streaming bool
	raw       layout
	outType   uint32
	capType   uint32
	out, cap  []mbuf
	outFree   []uint32 // OUTPUT buffers the encoder has given back
	planes    []plane  // the multi-planar ioctls' plane array, on the heap
	seq       uint64
	pending   []byte // coded data that came before its frame's (a header buffer)
	resets    int
}

// The sizes of the queues: two raw frames (one filled while the encoder
// codes the other) and four coded ones.
const (
	outputBuffers  = 2
	captureBuffers = 4
	// maxPending bounds the coded data kept for the next frame.
	maxPending = 4 << 20
)

// Open opens the encoder at cfg.Device for cfg.Coded and sets its
// controls; the queues are set up by the first Encode, for its frame's
// format and size. Its error wraps ErrNotEncoder for a node that is not
// such an encoder, fs.ErrNotExist for a missing one.
func Open(cfg Config) (*Encoder, error) {
	if cfg.FPS <= 0 {
		cfg.FPS = 30
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	fd, err := unix.Open(cfg.Device, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: cfg.Device, Err: err}
	}
	e := &Encoder{cfg: cfg, fd: fd, planes: make([]plane, 1)}
	if err := e.open(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return e, nil
}

func (e *Encoder) open() error {
	dev, err := probeFD(e.fd, e.cfg.Device, e.cfg.Coded)
	if err != nil {
		return err
	}
	e.dev, e.mplane = dev, dev.MPlane
	e.outType, e.capType = bufTypeOutput, bufTypeCapture
	if e.mplane {
		e.outType, e.capType = bufTypeOutputMPlane, bufTypeCaptureMPlane
	}
	e.bitrate = e.query(cidBitrate)
	if e.cfg.Coded == H264 {
		e.gop = e.query(cidH264IPeriod)
	}
	if e.gop == nil {
		e.gop = e.query(cidGOPSize)
	}
	e.forceKey = e.query(cidForceKeyFrame)
	if e.repeat = e.query(cidRepeatSeqHeader); e.repeat == nil {
		e.repeat = e.query(cidPrependSPSPPSToIDR)
	}
	if e.repeat != nil {
		if err := e.setCtrl(e.repeat.id, 1); err != nil {
			return err
		}
	}
	if e.cfg.Coded == H264 {
		// What WebRTC peers take (profile-level-id 42e0xx) and a Pi's
		// encoder codes at 1080p30; a driver whose menu lacks them keeps
		// its own.
		if c := e.query(cidH264Profile); c != nil {
			e.setCtrl(c.id, h264ProfileConstrainedBaseline)
		}
		if c := e.query(cidH264Level); c != nil {
			e.setCtrl(c.id, h264Level40)
		}
	}
	if e.cfg.Bitrate > 0 {
		if _, err := e.setBitrate(e.cfg.Bitrate); err != nil {
			return err
		}
	}
	if e.cfg.GOP >= 0 {
		if _, err := e.setGOP(e.cfg.GOP); err != nil {
			return err
		}
	}
	return nil
}

// Device is what Probe found of the encoder.
func (e *Encoder) Device() Device { return e.dev }

// Controls says which controls the driver has.
func (e *Encoder) Controls() Controls {
	return Controls{Bitrate: e.bitrate != nil, GOP: e.gop != nil, ForceKeyFrame: e.forceKey != nil, RepeatHeaders: e.repeat != nil}
}

// query asks for control id: nil when the driver has none (or a disabled
// or read-only one).
func (e *Encoder) query(id uint32) *ctrl {
	q := queryCtrl{ID: id}
	if err := ioctl.Do(e.fd, vidiocQueryCtrl, unsafe.Pointer(&q)); err != nil || q.ID != id ||
		q.Flags&(ctrlFlagDisabled|ctrlFlagReadOnly) != 0 {
		return nil
	}
	return &ctrl{id: id, min: q.Minimum, max: q.Maximum, step: q.Step}
}

func (e *Encoder) setCtrl(id uint32, v int32) error {
	c := control{ID: id, Value: v}
	if err := ioctl.Do(e.fd, vidiocSCtrl, unsafe.Pointer(&c)); err != nil {
		return e.errorf("setting control %#x to %d: %w", id, v, err)
	}
	return nil
}

// SetBitrate asks for kbps kbit/s (clamped to the driver's range and
// step), at once where the driver allows it, else after a reset of the
// stream. It reports false, and no error, when the driver has no bitrate
// control (vicodec).
func (e *Encoder) SetBitrate(kbps int) (bool, error) {
	return e.locked(func() (bool, error) { return e.setBitrate(kbps) })
}

// locked runs set under the lock, unless the encoder is closed.
func (e *Encoder) locked(set func() (bool, error)) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return false, ErrClosed
	}
	return set()
}

func (e *Encoder) setBitrate(kbps int) (bool, error) {
	if e.bitrate == nil {
		return false, nil
	}
	return true, e.setLive(e.bitrate.id, e.bitrate.clamp(int64(kbps)*1000))
}

// SetGOP asks for a key frame every frames frames (clamped to the
// driver's range): 0 asks for as few as it allows (kvmd's h264_gop 0:
// key frames only when asked), which is 0 where its range has it, else
// its most. It reports false, and no error, when the driver has no such
// control.
func (e *Encoder) SetGOP(frames int) (bool, error) {
	return e.locked(func() (bool, error) { return e.setGOP(frames) })
}

func (e *Encoder) setGOP(frames int) (bool, error) {
	if e.gop == nil {
		return false, nil
	}
	v := int64(frames)
	if frames == 0 && e.gop.min > 0 {
		v = int64(e.gop.max)
	}
	return true, e.setLive(e.gop.id, e.gop.clamp(v))
}

// setLive sets a control, stopping the CAPTURE queue for it where the
// driver refuses while streaming (EBUSY: dev-encoder.rst, Encoding
// Parameter Changes).
func (e *Encoder) setLive(id uint32, v int32) error {
	err := e.setCtrl(id, v)
	if !errors.Is(err, unix.EBUSY) || !e.streaming {
		return err
	}
	return e.reset(func() error { return e.setCtrl(id, v) })
}

// ForceKeyFrame makes the next frame given to Encode a key frame.
func (e *Encoder) ForceKeyFrame() { e.wantKey.Store(true) }

// Resets counts the resets of the stream so far (a key frame forced
// without the driver's control, a control changed only that way).
func (e *Encoder) Resets() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resets
}

// Encode codes one frame and returns it. A frame of another format or
// size than the one before ends the stream and starts a new one at it
// (its first frame a key frame). ctx ends the wait early; an error other
// than ErrFrame, ErrFormat or a cancelled ctx means the encoder is no
// longer usable: close it and open another.
func (e *Encoder) Encode(ctx context.Context, f Frame) (Unit, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return Unit{}, ErrClosed
	}
	l := layout{format: f.Format, width: f.Width, height: f.Height}
	if _, err := l.srcSize(f.Stride); err != nil {
		return Unit{}, err
	}
	if !e.streaming || f.Format != e.raw.format || f.Width != e.raw.width || f.Height != e.raw.height {
		if err := e.restart(l); err != nil {
			return Unit{}, err
		}
	}
	if e.wantKey.Swap(false) {
		if err := e.keyFrame(); err != nil {
			return Unit{}, err
		}
	}
	deadline := time.Now().Add(e.cfg.Timeout)
	idx, err := e.freeOutput(ctx, deadline)
	if err != nil {
		return Unit{}, err
	}
	n, err := e.raw.copyFrame(e.out[idx].data, f)
	if err != nil {
		e.outFree = append(e.outFree, idx)
		return Unit{}, err
	}
	e.seq++
	seq := e.seq
	b := e.newBuf(e.outType, idx)
	b.Timestamp = seqTime(seq)
	b.Field = fieldNone
	e.setBytesUsed(&b, n)
	if err := e.do(vidiocQBuf, unsafe.Pointer(&b)); err != nil {
		e.outFree = append(e.outFree, idx)
		return Unit{}, e.errorf("queueing a frame: %w", err)
	}
	u, err := e.await(ctx, seq, deadline)
	if err != nil {
		// A frame given up on may still come, and the next frames
		// refer to it: the next one starts afresh.
		e.wantKey.Store(true)
		return Unit{}, err
	}
	u.Width, u.Height, u.Time, u.Seq = f.Width, f.Height, f.Time, seq
	return u, nil
}

// seqTime is the V4L2 timestamp that marks frame seq: its number in
// microseconds, which the drivers copy to the coded buffer (vicodec
// exactly; bcm2835-codec through MMAL's microsecond pts).
func seqTime(seq uint64) unix.Timeval {
	return unix.NsecToTimeval(int64(seq) * 1000)
}

// tvSeq is the frame number a timestamp carries.
func tvSeq(tv unix.Timeval) uint64 {
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec)
}

// freeOutput returns an OUTPUT buffer the encoder has given back, waiting
// for one.
func (e *Encoder) freeOutput(ctx context.Context, deadline time.Time) (uint32, error) {
	for {
		if n := len(e.outFree); n > 0 {
			idx := e.outFree[n-1]
			e.outFree = e.outFree[:n-1]
			return idx, nil
		}
		if err := e.wait(ctx, unix.POLLOUT, deadline); err != nil {
			return 0, err
		}
		if _, err := e.reclaim(); err != nil {
			return 0, err
		}
	}
}

// reclaim dequeues the OUTPUT buffers the encoder is done with.
func (e *Encoder) reclaim() (int, error) {
	n := 0
	for {
		b := e.newBuf(e.outType, 0)
		err := e.do(vidiocDQBuf, unsafe.Pointer(&b))
		if errors.Is(err, unix.EAGAIN) {
			return n, nil
		}
		if err != nil {
			return n, e.errorf("dequeueing a raw buffer: %w", err)
		}
		if b.Index >= uint32(len(e.out)) {
			return n, e.errorf("the driver gave back raw buffer %d of %d", b.Index, len(e.out))
		}
		e.outFree = append(e.outFree, b.Index)
		n++
	}
}

// await waits for the coded frame of seq, keeping coded data that comes
// before it (a driver's separate header buffer) to go with it.
func (e *Encoder) await(ctx context.Context, seq uint64, deadline time.Time) (Unit, error) {
	want := seqTime(seq)
	for {
		if _, err := e.reclaim(); err != nil {
			return Unit{}, err
		}
		for {
			b, data, ok, err := e.dequeueCoded()
			if err != nil {
				return Unit{}, err
			}
			if !ok {
				break
			}
			if b.Timestamp != want {
				// Data of no frame (bcm2835-codec's first buffer,
				// the SPS and PPS, has timestamp 0) goes with the
				// next; a frame given up on is dropped.
				if k := tvSeq(b.Timestamp); (k == 0 || k > seq) && len(data) > 0 && len(e.pending)+len(data) <= maxPending {
					e.pending = append(e.pending, data...)
				}
				continue
			}
			if b.Flags&bufFlagError != 0 {
				e.pending = e.pending[:0]
				return Unit{}, e.errorf("frame %d: %w", seq, ErrCoding)
			}
			u := Unit{Data: data, Key: isKey(e.cfg.Coded, b.Flags, data)}
			if len(e.pending) > 0 {
				u.Data = append(e.pending, data...)
			}
			e.pending = nil
			return u, nil
		}
		if err := e.wait(ctx, unix.POLLIN|unix.POLLOUT, deadline); err != nil {
			return Unit{}, err
		}
	}
}

// dequeueCoded takes one coded buffer if one is ready, copies its data
// and gives the buffer back to the driver.
func (e *Encoder) dequeueCoded() (buffer, []byte, bool, error) {
	b := e.newBuf(e.capType, 0)
	err := e.do(vidiocDQBuf, unsafe.Pointer(&b))
	if errors.Is(err, unix.EAGAIN) {
		return b, nil, false, nil
	}
	if err != nil {
		return b, nil, false, e.errorf("dequeueing a coded buffer: %w", err)
	}
	if b.Index >= uint32(len(e.cap)) {
		return b, nil, false, e.errorf("the driver gave back coded buffer %d of %d", b.Index, len(e.cap))
	}
	mem := e.cap[b.Index].data
	used, off := e.bytesUsed(&b)
	if used > len(mem) || off > used {
		return b, nil, false, e.errorf("coded buffer %d holds %d bytes of %d", b.Index, used, len(mem))
	}
	data := append([]byte(nil), mem[off:used]...)
	if b.Flags&bufFlagLast == 0 {
		if err := e.queueCoded(b.Index); err != nil {
			return b, nil, false, err
		}
	}
	return b, data, true, nil
}

func (e *Encoder) queueCoded(idx uint32) error {
	b := e.newBuf(e.capType, idx)
	if err := e.do(vidiocQBuf, unsafe.Pointer(&b)); err != nil {
		return e.errorf("queueing coded buffer %d: %w", idx, err)
	}
	return nil
}

// wait polls the node for events until the deadline or ctx's end, in
// slices, so that a cancelled ctx or a Close is seen.
func (e *Encoder) wait(ctx context.Context, events int16, deadline time.Time) error {
	return e.poll(ctx, events, deadline, true)
}

// poll is wait, ended by Close where abortable (Close's own drain is
// not).
func (e *Encoder) poll(ctx context.Context, events int16, deadline time.Time, abortable bool) error {
	const slice = 50 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if abortable && e.closed.Load() {
			return ErrClosed
		}
		left := time.Until(deadline)
		if left <= 0 {
			return e.errorf("%w (%v)", ErrTimeout, e.cfg.Timeout)
		}
		fds := []unix.PollFd{{Fd: int32(e.fd), Events: events}}
		n, err := unix.Poll(fds, int(min(left, slice)/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) || n == 0 {
			continue
		}
		if err != nil {
			return e.errorf("poll: %w", err)
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 && fds[0].Revents&events == 0 {
			return e.errorf("poll: the encoder reports an error (revents %#x)", fds[0].Revents)
		}
		return nil
	}
}

// keyFrame makes the next frame a key frame: the driver's control, else a
// reset of the stream (dev-encoder.rst, Reset: the frames after it make a
// stream of their own, which begins with a key frame).
func (e *Encoder) keyFrame() error {
	if e.forceKey != nil {
		return e.setCtrl(e.forceKey.id, 1)
	}
	return e.reset(nil)
}

// reset drains the encoder, stops the CAPTURE queue, calls between (a
// control the driver takes only then) and starts it again.
func (e *Encoder) reset(between func() error) error {
	if err := e.drain(true); err != nil {
		return err
	}
	if err := e.streamOff(e.capType); err != nil {
		return err
	}
	if between != nil {
		if err := between(); err != nil {
			return err
		}
	}
	for i := range e.cap {
		if err := e.queueCoded(uint32(i)); err != nil {
			return err
		}
	}
	if err := e.streamOn(e.capType); err != nil {
		return err
	}
	e.resets++
	return nil
}

// drain runs the drain sequence: V4L2_ENC_CMD_STOP, then the coded
// buffers until the one marked last (dev-encoder.rst, Drain). Each
// Encode waits for its frame, so nothing is in flight: the last buffer
// comes empty. A driver without encoder commands has nothing to drain.
func (e *Encoder) drain(abortable bool) error {
	cmd := encoderCmd{Cmd: encCmdStop}
	err := e.do(vidiocEncoderCmd, unsafe.Pointer(&cmd))
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	if err != nil {
		return e.errorf("V4L2_ENC_CMD_STOP: %w", err)
	}
	deadline := time.Now().Add(e.cfg.Timeout)
	for {
		if _, err := e.reclaim(); err != nil {
			return err
		}
		b, _, ok, err := e.dequeueCoded()
		if errors.Is(err, unix.EPIPE) {
			return nil // the last buffer was dequeued already
		}
		if err != nil {
			return err
		}
		if ok && b.Flags&bufFlagLast != 0 {
			return nil
		}
		if !ok {
			if err := e.poll(context.Background(), unix.POLLIN, deadline, abortable); err != nil {
				return fmt.Errorf("draining: %w", err)
			}
		}
	}
}

// restart sets the queues up for frames of l: a drain and both queues
// torn down first when they were running (a new size: dev-encoder.rst,
// Reset then Initialization).
func (e *Encoder) restart(l layout) error {
	if e.streaming {
		if err := e.drain(true); err != nil {
			return err
		}
	}
	if err := e.teardown(); err != nil {
		return err
	}
	if err := e.setup(l); err != nil {
		e.teardown()
		return err
	}
	return nil
}

// setup is the initialization sequence of dev-encoder.rst: the coded
// format on CAPTURE, the raw one on OUTPUT, the frame interval, the
// buffers, both queues streaming.
func (e *Encoder) setup(l layout) error {
	if !rawFormat(l.format) {
		return fmt.Errorf("%w: raw format %s", ErrFormat, l.format)
	}
	// The coded buffers' size: what bcm2835-codec needs for a 1080p key
	// frame at a high bitrate is 1.5 MiB (pikvm/ustreamer#169); a
	// driver that knows better (vicodec) sets its own.
	capFmt := format{Type: e.capType}
	pixFormat{Width: uint32(l.width), Height: uint32(l.height), PixelFormat: e.cfg.Coded,
		SizeImage: uint32(max(l.width*l.height*3/4, 512<<10))}.put(&capFmt, e.mplane)
	if err := e.do(vidiocSFmt, unsafe.Pointer(&capFmt)); err != nil {
		return e.errorf("setting the coded format %s: %w", e.cfg.Coded, err)
	}
	if got := getPixFormat(&capFmt, e.mplane); got.PixelFormat != e.cfg.Coded {
		return e.errorf("%w: the driver took %s for %s", ErrNotEncoder, got.PixelFormat, e.cfg.Coded)
	}
	outFmt := format{Type: e.outType}
	pixFormat{Width: uint32(l.width), Height: uint32(l.height), PixelFormat: l.format}.put(&outFmt, e.mplane)
	if err := e.do(vidiocSFmt, unsafe.Pointer(&outFmt)); err != nil {
		return e.errorf("setting the raw format %s %dx%d: %w", l.format, l.width, l.height, err)
	}
	got := getPixFormat(&outFmt, e.mplane)
	if got.PixelFormat != l.format || int(got.Width) < l.width || int(got.Height) < l.height || e.mplane && got.Planes != 1 {
		return e.errorf("%w: asked for %s %dx%d, the driver took %s %dx%d in %d planes",
			ErrFormat, l.format, l.width, l.height, got.PixelFormat, got.Width, got.Height, got.Planes)
	}
	l.bpl, l.rows = int(got.BytesPerLine), int(got.Height)
	if least := l.width * max(packedBytes(l.format), 1); l.bpl < least {
		return e.errorf("%w: %d bytes per line for %d pixels of %s", ErrFormat, l.bpl, l.width, l.format)
	}
	// The interval is a hint (dev-encoder.rst); a driver without it
	// (vicodec) does without.
	parm := streamParm{Type: e.outType}
	binary.NativeEndian.PutUint32(parm.Parm[8:], 1)
	binary.NativeEndian.PutUint32(parm.Parm[12:], uint32(e.cfg.FPS))
	if err := e.do(vidiocSParm, unsafe.Pointer(&parm)); err != nil && !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
		return e.errorf("setting %d frames a second: %w", e.cfg.FPS, err)
	}
	var err error
	if e.out, err = e.allocate(e.outType, outputBuffers); err != nil {
		return err
	}
	if e.cap, err = e.allocate(e.capType, captureBuffers); err != nil {
		return err
	}
	for _, m := range e.out {
		if len(m.data) < l.dstSize() {
			return e.errorf("raw buffers of %d bytes for a picture of %d", len(m.data), l.dstSize())
		}
	}
	e.outFree = e.outFree[:0]
	for i := range e.out {
		e.outFree = append(e.outFree, uint32(i))
	}
	for i := range e.cap {
		if err := e.queueCoded(uint32(i)); err != nil {
			return err
		}
	}
	if err := e.streamOn(e.outType); err != nil {
		return err
	}
	if err := e.streamOn(e.capType); err != nil {
		return err
	}
	e.raw, e.streaming, e.pending = l, true, nil
	return nil
}

// allocate asks for n mmap buffers of a queue and maps them.
func (e *Encoder) allocate(typ uint32, n int) ([]mbuf, error) {
	req := requestBuffers{Count: uint32(n), Type: typ, Memory: memoryMMap}
	if err := e.do(vidiocReqBufs, unsafe.Pointer(&req)); err != nil {
		return nil, e.errorf("allocating %d buffers of queue %d: %w", n, typ, err)
	}
	if req.Count == 0 || req.Count > 32 {
		return nil, e.errorf("the driver allocated %d buffers of queue %d", req.Count, typ)
	}
	bufs := make([]mbuf, 0, req.Count)
	for i := range req.Count {
		b := e.newBuf(typ, i)
		if err := e.do(vidiocQueryBuf, unsafe.Pointer(&b)); err != nil {
			unmap(bufs)
			return nil, e.errorf("querying buffer %d of queue %d: %w", i, typ, err)
		}
		length, offset := int(b.Length), int64(uint32(b.M))
		if e.mplane {
			length, offset = int(e.planes[0].Length), int64(uint32(e.planes[0].M))
		}
		data, err := unix.Mmap(e.fd, offset, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unmap(bufs)
			return nil, e.errorf("mapping buffer %d of queue %d: %w", i, typ, err)
		}
		bufs = append(bufs, mbuf{data: data})
	}
	return bufs, nil
}

func unmap(bufs []mbuf) {
	for _, b := range bufs {
		unix.Munmap(b.data)
	}
}

// teardown stops both queues and frees their buffers.
func (e *Encoder) teardown() error {
	var errs []error
	if e.streaming {
		errs = append(errs, e.streamOff(e.capType), e.streamOff(e.outType))
	}
	e.streaming = false
	unmap(e.out)
	unmap(e.cap)
	for _, q := range []struct {
		typ  uint32
		bufs []mbuf
	}{{e.outType, e.out}, {e.capType, e.cap}} {
		if q.bufs == nil {
			continue
		}
		req := requestBuffers{Type: q.typ, Memory: memoryMMap}
		if err := e.do(vidiocReqBufs, unsafe.Pointer(&req)); err != nil {
			errs = append(errs, e.errorf("freeing the buffers of queue %d: %w", q.typ, err))
		}
	}
	e.out, e.cap, e.outFree, e.pending = nil, nil, nil, nil
	return errors.Join(errs...)
}

func (e *Encoder) streamOn(typ uint32) error {
	t := int32(typ)
	if err := e.do(vidiocStreamOn, unsafe.Pointer(&t)); err != nil {
		return e.errorf("starting queue %d: %w", typ, err)
	}
	return nil
}

func (e *Encoder) streamOff(typ uint32) error {
	t := int32(typ)
	if err := e.do(vidiocStreamOff, unsafe.Pointer(&t)); err != nil {
		return e.errorf("stopping queue %d: %w", typ, err)
	}
	if typ == e.outType {
		// STREAMOFF gives every buffer of the queue back.
		e.outFree = e.outFree[:0]
		for i := range e.out {
			e.outFree = append(e.outFree, uint32(i))
		}
	}
	return nil
}

// newBuf is a struct v4l2_buffer for buffer idx of a queue, pointing at
// the plane array on the multi-planar API.
func (e *Encoder) newBuf(typ, idx uint32) buffer {
	b := buffer{Index: idx, Type: typ, Memory: memoryMMap}
	if e.mplane {
		e.planes[0] = plane{}
		b.M = uintptr(unsafe.Pointer(&e.planes[0]))
		b.Length = 1
	}
	return b
}

func (e *Encoder) setBytesUsed(b *buffer, n int) {
	if e.mplane {
		e.planes[0].BytesUsed = uint32(n)
		return
	}
	b.BytesUsed = uint32(n)
}

// bytesUsed is a dequeued buffer's payload: its end, and where the data
// begins (a plane's data_offset).
func (e *Encoder) bytesUsed(b *buffer) (int, int) {
	if e.mplane {
		return int(e.planes[0].BytesUsed), int(e.planes[0].DataOffset)
	}
	return int(b.BytesUsed), 0
}

// do issues an ioctl; the plane array stays alive across it (the
// multi-planar buffer points to it).
func (e *Encoder) do(req uint, arg unsafe.Pointer) error {
	err := ioctl.Do(e.fd, req, arg)
	runtime.KeepAlive(e.planes)
	return err
}

func (e *Encoder) errorf(format string, a ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{e.cfg.Device}, a...)...)
}

// Close ends the stream (a drain), stops the queues, frees the buffers and
// closes the node. It may be called more than once.
func (e *Encoder) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	if e.streaming {
		errs = append(errs, e.drain(false))
	}
	errs = append(errs, e.teardown(), unix.Close(e.fd))
	e.fd = -1
	return errors.Join(errs...)
}
