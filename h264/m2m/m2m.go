// Package m2m is the hardware H.264 encoder: a board's V4L2
// memory-to-memory encoder (on a Raspberry Pi 4 the bcm2835-codec's
// /dev/video11), driven by package hw/v4l2m2m, behind package h264's
// Opener and Encoder. It takes raw pictures (ustreamer's raw sink:
// h264.SinkSource), not JPEG: the board's encoder decodes nothing.
//
// v4l2m2m's Encode codes one picture and waits for it; the Encoder here
// gives its unit to Units at once, so that a picture goes out as soon as
// the board has coded it, as the software encoder's do.
package m2m

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"kvmd/h264"
	"kvmd/hw"
	"kvmd/hw/v4l2m2m"
)

// formats pairs package h264's raw formats with V4L2's, the preferred
// first: the packed 4:2:2 ones a capture gives as they are (vivid's and
// ustreamer's raw sink's YUYV, the TC358743's UYVY).
var formats = []struct {
	h264 h264.Format
	v4l2 v4l2m2m.PixelFormat
}{
	{h264.YUYV, v4l2m2m.YUYV},
	{h264.UYVY, v4l2m2m.UYVY},
	{h264.NV12, v4l2m2m.NV12},
	{h264.I420, v4l2m2m.YUV420},
}

// FormatOf is the h264 format of a V4L2 pixel format, false for one the
// encoders here do not take.
func FormatOf(p v4l2m2m.PixelFormat) (h264.Format, bool) {
	for _, f := range formats {
		if f.v4l2 == p {
			return f.h264, true
		}
	}
	return 0, false
}

func v4l2Format(f h264.Format) (v4l2m2m.PixelFormat, bool) {
	for _, p := range formats {
		if p.h264 == f {
			return p.v4l2, true
		}
	}
	return 0, false
}

// Opener opens encoders on one device.
type Opener struct {
	// Device is the encoder as Probe or Detect found it.
	Device v4l2m2m.Device
	// Coded is what it makes: v4l2m2m.H264 when zero. Tests set FWHT,
	// the kernel's vicodec's codec, which has no H.264.
	Coded v4l2m2m.PixelFormat
	// Timeout bounds the wait for one coded picture (v4l2m2m's).
	Timeout time.Duration
	Log     *slog.Logger
}

// Detect finds the machine's H.264 encoder in f's sysfs. Its error wraps
// h264.ErrUnavailable where there is none.
func Detect(f hw.FS, log *slog.Logger) (*Opener, error) {
	dev, ok, err := v4l2m2m.Detect(f, v4l2m2m.H264)
	if err != nil {
		return nil, fmt.Errorf("looking for the board's H.264 encoder: %w", err)
	}
	if !ok {
		return nil, h264.Unavailable("no V4L2 memory-to-memory H.264 encoder on this machine", nil)
	}
	return &Opener{Device: dev, Log: log}, nil
}

func (o *Opener) coded() v4l2m2m.PixelFormat {
	if o.Coded == 0 {
		return v4l2m2m.H264
	}
	return o.Coded
}

func (o *Opener) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// Name is the device's card and node: "bcm2835-codec-encode
// (/dev/video11)".
func (o *Opener) Name() string { return o.Device.Card + " (" + o.Device.Path + ")" }

// Hardware is true.
func (o *Opener) Hardware() bool { return true }

// Formats are the raw formats the device takes that package h264 has.
func (o *Opener) Formats() []h264.Format {
	var out []h264.Format
	for _, f := range formats {
		if o.Device.Takes(f.v4l2) {
			out = append(out, f.h264)
		}
	}
	return out
}

// Check asks the device again what it is: an error wrapping
// h264.ErrUnavailable when it is gone or no longer an encoder.
func (o *Opener) Check(context.Context) error {
	_, err := v4l2m2m.Probe(o.Device.Path, o.coded())
	return unavailable(err)
}

// unavailable marks the errors that no retry mends.
func unavailable(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, v4l2m2m.ErrNotEncoder) || errors.Is(err, v4l2m2m.ErrNotSupported) || errors.Is(err, v4l2m2m.ErrFormat) {
		return h264.Unavailable("", err)
	}
	return err
}

// Open opens the device for pictures of s.
func (o *Opener) Open(_ context.Context, s h264.Settings) (h264.Encoder, error) {
	pf, ok := v4l2Format(s.Format)
	if !ok || !o.Device.Takes(pf) {
		return nil, h264.Unavailable(fmt.Sprintf("%s takes no %v pictures", o.Name(), s.Format), nil)
	}
	// GOP 0 (key units only when asked) is v4l2m2m's 0 too: as few as
	// the driver allows.
	enc, err := v4l2m2m.Open(v4l2m2m.Config{
		Device: o.Device.Path, Coded: o.coded(), Bitrate: s.Bitrate, GOP: s.GOP, FPS: s.FPS, Timeout: o.Timeout,
	})
	if err != nil {
		return nil, unavailable(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &encoder{s: s, pf: pf, enc: enc, ctx: ctx, cancel: cancel, units: make(chan h264.Unit, 1), log: o.log()}
	e.log.Info("H.264 encoder opened", "encoder", o.Name(), "size", fmt.Sprintf("%dx%d", s.Width, s.Height),
		"input", s.Format.String(), "bitrate_kbps", s.Bitrate, "gop", s.GOP, "controls", enc.Controls())
	return e, nil
}

// encoder is one open device.
type encoder struct {
	s   h264.Settings
	pf  v4l2m2m.PixelFormat
	enc *v4l2m2m.Encoder
	log *slog.Logger

	ctx    context.Context // ended by Close: an Encode waiting returns
	cancel context.CancelFunc
	units  chan h264.Unit

	encMu sync.Mutex // held by Encode; Close takes it to close units

	mu     sync.Mutex
	ended  bool
	err    error
	closed bool
}

func (e *encoder) Units() <-chan h264.Unit { return e.units }

func (e *encoder) ForceKey() { e.enc.ForceKeyFrame() }

func (e *encoder) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// ErrEnded is Encode's error once the encoder has ended.
var ErrEnded = errors.New("m2m: the encoder has ended")

// Encode codes f and gives its unit to Units; it waits while the unit
// before is still unread.
func (e *encoder) Encode(f h264.Frame) error {
	if err := e.s.Fits(f); err != nil {
		return err
	}
	e.encMu.Lock()
	defer e.encMu.Unlock()
	e.mu.Lock()
	ended := e.ended
	e.mu.Unlock()
	if ended {
		return ErrEnded
	}
	u, err := e.enc.Encode(e.ctx, v4l2m2m.Frame{
		Format: e.pf, Width: f.Width, Height: f.Height, Stride: f.Stride, Data: f.Data, Time: f.Time,
	})
	switch {
	case e.ctx.Err() != nil:
		return ErrEnded
	case errors.Is(err, v4l2m2m.ErrFrame):
		return err // this picture only: the encoder goes on
	case err != nil:
		// The device is no longer usable (v4l2m2m.Encode): the pipeline
		// opens another.
		e.end(fmt.Errorf("m2m: %w", err))
		return fmt.Errorf("%w: %w", ErrEnded, err)
	}
	select {
	case e.units <- h264.Unit{Data: u.Data, Key: u.Key, Width: u.Width, Height: u.Height, Time: u.Time, Seq: u.Seq}:
		return nil
	case <-e.ctx.Done():
		return ErrEnded
	}
}

// end marks the encoder ended by err (nil: closed) and closes Units. It
// runs under encMu.
func (e *encoder) end(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return
	}
	e.ended, e.err = true, err
	close(e.units)
	if err != nil {
		e.log.Warn("H.264 encoder failed", "err", err)
	}
}

// Close ends a waiting Encode, frees the device's buffers and closes it.
func (e *encoder) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.encMu.Lock()
	e.end(nil)
	e.encMu.Unlock()
	err := e.enc.Close()
	e.log.Info("H.264 encoder closed", "resets", e.enc.Resets())
	return err
}
