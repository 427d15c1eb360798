package v4l2m2m

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PixelFormat is a V4L2 pixel format code, four characters
// (include/uapi/linux/videodev2.h, v4l2_fourcc).
type PixelFormat uint32

func fourcc(s string) PixelFormat {
	return PixelFormat(binary.LittleEndian.Uint32([]byte(s)))
}

// The formats the package knows: the raw ones a capture (vivid,
// ustreamer's raw sink, the TC358743) gives and the encoders take, and the
// coded ones.
var (
	YUYV   = fourcc("YUYV") // packed 4:2:2, Y0 U Y1 V: vivid's, ustreamer's raw sink's
	UYVY   = fourcc("UYVY") // packed 4:2:2, U Y0 V Y1: the TC358743's
	RGB24  = fourcc("RGB3") // packed R G B
	YUV420 = fourcc("YU12") // planar Y, U, V at 4:2:0 (I420)
	NV12   = fourcc("NV12") // planar Y, then U V interleaved at 4:2:0

	H264  = fourcc("H264") // H.264 in Annex B, with start codes
	FWHT  = fourcc("FWHT") // vicodec's codec
	JPEG  = fourcc("JPEG")
	MJPEG = fourcc("MJPG")
)

// String spells the code: "YUYV", "H264".
func (p PixelFormat) String() string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(p))
	return strings.TrimRight(string(b[:]), " \x00")
}

// MarshalText spells the code, for JSON.
func (p PixelFormat) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Frame is one raw picture given to an encoder.
type Frame struct {
	// Format, Width and Height say what Data holds; a frame of another
	// size or format than the one before makes the encoder start a new
	// stream at it.
	Format        PixelFormat
	Width, Height int
	// Stride is the bytes from one row to the next of a packed format
	// (ustreamer's stride, V4L2's bytesperline); 0 is tight. The planar
	// formats are tight.
	Stride int
	// Data is the picture; the encoder copies it and does not keep it.
	Data []byte
	// Time is when the picture was captured, as well as it is known; it
	// travels to the Unit the picture becomes.
	Time time.Time
}

// Unit is one coded frame out of an encoder: for H.264 an access unit in
// Annex B (a key one with its SPS and PPS before it where the driver
// repeats them), for FWHT a frame with its header.
type Unit struct {
	Data []byte
	// Key is a frame a decoder can start at: the driver's
	// V4L2_BUF_FLAG_KEYFRAME, or where the driver marks no frame type,
	// what the coded data says (an IDR picture, FWHT's I-frame flag).
	Key bool
	// Width and Height are the picture's size.
	Width, Height int
	// Time is the Frame's Time; Seq counts the frames of one encoder
	// from 1.
	Time time.Time
	Seq  uint64
}

// Errors.
var (
	// ErrNotEncoder is a device node that is not a stateful encoder of
	// the coded format asked for (a capture device, a decoder, the
	// encoder of another codec).
	ErrNotEncoder = errors.New("v4l2m2m: not a stateful encoder of that format")
	// ErrFormat is a raw format, or a size, the encoder does not take.
	ErrFormat = errors.New("v4l2m2m: format not supported")
	// ErrFrame is a frame whose data is shorter than its format and
	// size need.
	ErrFrame = errors.New("v4l2m2m: frame data too short")
	// ErrTimeout is a frame the encoder did not give back in time.
	ErrTimeout = errors.New("v4l2m2m: the encoder did not answer in time")
	// ErrCoding is a frame the encoder marked bad (V4L2_BUF_FLAG_ERROR).
	ErrCoding = errors.New("v4l2m2m: the encoder failed to code the frame")
	// ErrClosed is an encoder used after Close.
	ErrClosed = errors.New("v4l2m2m: encoder closed")
	// ErrNotSupported is V4L2 where there is none (not Linux).
	ErrNotSupported = errors.New("v4l2m2m: not supported on this system")
)

// layout is where a raw picture's planes go in one buffer of the driver:
// its bytes per line and the rows it has (both at least the picture's).
type layout struct {
	format        PixelFormat
	width, height int // the picture's
	bpl, rows     int // the buffer's
}

// packedBytes is the bytes per pixel of a packed format, 0 for a planar
// one.
func packedBytes(p PixelFormat) int {
	switch p {
	case YUYV, UYVY:
		return 2
	case RGB24:
		return 3
	}
	return 0
}

// rawFormat says whether the package can lay out frames of p.
func rawFormat(p PixelFormat) bool {
	return packedBytes(p) > 0 || p == YUV420 || p == NV12
}

// size is the bytes a frame of l's picture needs with the given stride
// (0: tight), before the copy reads it.
func (l layout) srcSize(stride int) (int, error) {
	if n := packedBytes(l.format); n > 0 {
		row := l.width * n
		if stride == 0 {
			stride = row
		}
		if stride < row {
			return 0, fmt.Errorf("%w: stride %d is less than a row's %d bytes", ErrFormat, stride, row)
		}
		return stride*(l.height-1) + row, nil
	}
	if l.width%2 != 0 || l.height%2 != 0 {
		return 0, fmt.Errorf("%w: %s needs an even size, not %dx%d", ErrFormat, l.format, l.width, l.height)
	}
	return l.width * l.height * 3 / 2, nil
}

// dstSize is the bytes of one buffer's picture at the driver's layout.
func (l layout) dstSize() int {
	if packedBytes(l.format) > 0 {
		return l.bpl * l.rows
	}
	return l.bpl * l.rows * 3 / 2
}

// copyFrame copies f's picture into dst at l's layout, row by row, and
// returns the bytes the buffer holds. Rows and columns of dst beyond the
// picture keep what they had: the encoder crops them.
func (l layout) copyFrame(dst []byte, f Frame) (int, error) {
	need, err := l.srcSize(f.Stride)
	if err != nil {
		return 0, err
	}
	if len(f.Data) < need {
		return 0, fmt.Errorf("%w: %d bytes for a %dx%d %s frame that needs %d", ErrFrame, len(f.Data), l.width, l.height, l.format, need)
	}
	n := l.dstSize()
	if len(dst) < n {
		return 0, fmt.Errorf("v4l2m2m: a buffer of %d bytes for a picture of %d", len(dst), n)
	}
	if px := packedBytes(l.format); px > 0 {
		stride := f.Stride
		if stride == 0 {
			stride = l.width * px
		}
		copyPlane(dst, l.bpl, f.Data, stride, l.width*px, l.height)
		return n, nil
	}
	// 4:2:0: the luma plane, then the chroma at half the rows: I420's two
	// planes of half the width each, or NV12's one of U V pairs.
	w, h := l.width, l.height
	src := f.Data
	copyPlane(dst, l.bpl, src, w, w, h)
	dst, src = dst[l.bpl*l.rows:], src[w*h:]
	if l.format == NV12 {
		copyPlane(dst, l.bpl, src, w, w, h/2)
		return n, nil
	}
	copyPlane(dst, l.bpl/2, src, w/2, w/2, h/2)
	copyPlane(dst[l.bpl/2*(l.rows/2):], l.bpl/2, src[w/2*(h/2):], w/2, w/2, h/2)
	return n, nil
}

// copyPlane copies rows of row bytes from src (stride apart) to dst (bpl
// apart).
func copyPlane(dst []byte, bpl int, src []byte, stride, row, rows int) {
	for y := range rows {
		copy(dst[y*bpl:y*bpl+row], src[y*stride:y*stride+row])
	}
}

// The buffer flags that say a coded frame's type (videodev2.h).
const (
	bufFlagKeyFrame = 0x08
	bufFlagPFrame   = 0x10
	bufFlagBFrame   = 0x20
)

// isKey says whether a coded frame is a key frame: the driver's flag
// where it marks the frame's type, else the coded data. vicodec's encoder
// marks none (vicodec-core.c copies only the timestamp to the CAPTURE
// buffer); bcm2835-codec sets V4L2_BUF_FLAG_KEYFRAME from MMAL's.
func isKey(coded PixelFormat, flags uint32, data []byte) bool {
	if flags&(bufFlagKeyFrame|bufFlagPFrame|bufFlagBFrame) != 0 {
		return flags&bufFlagKeyFrame != 0
	}
	switch coded {
	case FWHT:
		return fwhtKey(data)
	case H264:
		return h264Key(data)
	}
	return false
}

// fwhtKey reads the I-frame flag of an FWHT frame's header, struct
// fwht_cframe_hdr of drivers/media/test-drivers/vicodec/codec-fwht.h: two
// magic words, then big-endian version, width, height, flags (bit 10,
// V4L2_FWHT_FL_I_FRAME), colour fields and the size, 44 bytes.
func fwhtKey(data []byte) bool {
	const hdrSize, flagsAt, iFrame = 44, 20, 1 << 10
	if len(data) < hdrSize || binary.BigEndian.Uint64(data) != 0x4f4f4f4fffffffff {
		return false
	}
	return binary.BigEndian.Uint32(data[flagsAt:])&iFrame != 0
}

// FWHTSize reads the picture size in an FWHT frame's header (after the
// version, big-endian, as fwhtKey reads it); ok is false for data too
// short to hold one.
func FWHTSize(data []byte) (width, height int, ok bool) {
	if len(data) < 44 {
		return 0, 0, false
	}
	return int(binary.BigEndian.Uint32(data[12:])), int(binary.BigEndian.Uint32(data[16:])), true
}

// h264Key says whether an Annex B access unit holds an IDR picture (NAL
// unit type 5).
func h264Key(data []byte) bool {
	for i := 0; i+3 < len(data); i++ {
		if data[i] == 0 && data[i+1] == 0 && data[i+2] == 1 {
			if data[i+3]&0x1f == 5 {
				return true
			}
			i += 2
		}
	}
	return false
}
