package h264

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Format is the encoding of a Frame's Data.
type Format uint8

// The formats a Frame comes in. An encoder takes those its Opener's
// Formats lists.
const (
	// JPEG is one JPEG picture (baseline or progressive, any chroma
	// subsampling): what ustreamer's MJPEG stream carries.
	JPEG Format = iota + 1
	// YUYV is packed 4:2:2, Y0 U Y1 V (V4L2_PIX_FMT_YUYV): vivid's and
	// ustreamer's raw sink's.
	YUYV
	// UYVY is packed 4:2:2, U Y0 V Y1 (V4L2_PIX_FMT_UYVY): the TC358743's.
	UYVY
	// NV12 is planar Y then interleaved U V at 4:2:0 (V4L2_PIX_FMT_NV12).
	NV12
	// I420 is planar Y, U, V at 4:2:0 (V4L2_PIX_FMT_YUV420).
	I420
)

var formatNames = [...]string{JPEG: "JPEG", YUYV: "YUYV", UYVY: "UYVY", NV12: "NV12", I420: "I420"}

func (f Format) String() string {
	if int(f) < len(formatNames) && formatNames[f] != "" {
		return formatNames[f]
	}
	return "unknown"
}

// Frame is one picture given to an encoder.
type Frame struct {
	Format Format
	// Width and Height are the picture's size in pixels; Stride the
	// bytes from one row to the next of a packed raw format (0: tight),
	// unused for JPEG and the planar formats (tight).
	Width, Height, Stride int
	// Data is the picture. An encoder does not keep it after Encode
	// returns: the caller may reuse it.
	Data []byte
	// Time is when the picture was captured, as well as it is known (the
	// streamer's timestamp, else when it arrived); it travels to the
	// Unit the picture becomes, for the latency figures.
	Time time.Time
	// Online is false for a streamer's placeholder picture ("NO SIGNAL"):
	// encoded like any other, counted apart in the state.
	Online bool
}

// Unit is one access unit out of an encoder: the H.264 of one picture,
// as Annex B NAL units, each after a start code (00 00 00 01). A key
// unit is an IDR picture with its SPS and PPS before it, so that a
// decoder can start at it: what PiKVM's Direct H.264 clients and a
// WebRTC track need.
type Unit struct {
	Data []byte
	Key  bool
	// Width and Height are the picture's size, as the encoder was
	// opened for.
	Width, Height int
	// Time is the Frame's Time; Seq counts the units of one encoder
	// from 1.
	Time time.Time
	Seq  uint64
}

// Settings are what an encoder is opened with. They hold for its life:
// the pipeline opens a new one to change them, as ustreamer restarts
// with new params.
type Settings struct {
	// Width and Height are the pictures' size: every Frame has it (the
	// pipeline opens a new encoder when the source's size changes).
	Width, Height int
	// Format is the Frames' format, one of the Opener's Formats.
	Format Format
	// Bitrate is the most the stream may take, in kbit/s (kvmd's
	// h264_bitrate, 25 to 20000).
	Bitrate int
	// GOP is the most frames from one key unit to the next (kvmd's
	// h264_gop, 0 to 60); 0: key units only when asked (ForceKey).
	GOP int
	// FPS is the frame rate expected, for rate control (0: 30).
	FPS int
}

// Fits says whether f is of the settings' format and size, the only
// pictures an encoder opened with them takes: nil if so, else an error
// that says what differs.
func (s Settings) Fits(f Frame) error {
	if f.Format != s.Format || f.Width != s.Width || f.Height != s.Height {
		return fmt.Errorf("h264: a %v picture of %dx%d to an encoder of %v %dx%d", f.Format, f.Width, f.Height, s.Format, s.Width, s.Height)
	}
	return nil
}

// Encoder turns pictures of one size into H.264: one Unit for each Frame
// it took, in order, with no reordering (no B-frames) and no lookahead,
// so that a picture goes out as soon as it is encoded. Encode and
// ForceKey may be called from one goroutine while another reads Units.
type Encoder interface {
	// Encode gives the encoder a picture. It may block while the
	// encoder is busy with the one before (the pipeline drops pictures
	// that come meanwhile, keeping the newest); it returns an error
	// once the encoder has ended.
	Encode(f Frame) error
	// ForceKey makes the next picture given to Encode a key unit.
	ForceKey()
	// Units are the encoded pictures. The channel is closed when the
	// encoder ends, by Close or on its own; Err then says why.
	Units() <-chan Unit
	// Err is why the encoder ended: nil while it runs and after Close,
	// else its failure (a process that died, a device error).
	Err() error
	// Close ends the encoder and frees what it holds (a child process,
	// a device's buffers); Units is closed when it returns. It may be
	// called more than once.
	Close() error
}

// Opener opens encoders of one kind: the software one (package
// h264/ffmpeg) or a board's hardware encoder.
type Opener interface {
	// Name names the encoder for the state and the log: "libx264
	// (ffmpeg)", "bcm2835-codec-encode (/dev/video11)".
	Name() string
	// Hardware says it is the board's own encoder.
	Hardware() bool
	// Formats are the Frame formats it takes, the preferred first.
	Formats() []Format
	// Check says whether an encoder can be opened here, without opening
	// one: an error wrapping ErrUnavailable when its program is not
	// installed or its device is absent.
	Check(ctx context.Context) error
	// Open starts an encoder; ctx bounds only the opening. Its error
	// wraps ErrUnavailable when the encoder cannot exist here (no
	// program, no device), which no retry mends.
	Open(ctx context.Context, s Settings) (Encoder, error)
}

// ErrUnavailable means an encoder cannot be opened on this machine: its
// program is not installed, its device is absent.
var ErrUnavailable = errors.New("h264: no encoder available")

// Unavailable returns an error wrapping ErrUnavailable, and cause when
// it is not nil, that says why for a person (Why).
func Unavailable(why string, cause error) error {
	return &unavailableError{why: why, cause: cause}
}

type unavailableError struct {
	why   string
	cause error
}

func (e *unavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.reason() }

func (e *unavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

// reason is the why and the cause, each where there is one.
func (e *unavailableError) reason() string {
	switch {
	case e.cause == nil:
		return e.why
	case e.why == "":
		return e.cause.Error()
	}
	return e.why + ": " + e.cause.Error()
}

// Why is what an error of Unavailable says beyond ErrUnavailable, for a
// person: "ffmpeg is not installed (ffmpeg): ..."; any other error's
// text.
func Why(err error) string {
	var u *unavailableError
	if errors.As(err, &u) {
		return u.reason()
	}
	return err.Error()
}
