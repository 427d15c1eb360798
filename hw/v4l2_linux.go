package hw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvmd/internal/ioctl"
)

// DeviceV4L2 asks the kernel's V4L2 drivers through ioctls on the device
// node. It holds nothing: each query opens the node, read-only and
// non-blocking, next to whatever streams from it (V4L2 allows many opens;
// queries do not disturb a capture in progress).
type DeviceV4L2 struct{}

var _ V4L2 = DeviceV4L2{}

// The kernel UAPI (include/uapi/linux/videodev2.h). Only the members read
// here are named.

// v4l2Fract is struct v4l2_fract.
type v4l2Fract struct {
	Numerator, Denominator uint32
}

// v4l2BTTimings is struct v4l2_bt_timings, which the kernel packs: its
// __u64 pixelclock sits at offset 16, 20 within v4l2_dv_timings, where Go
// would align a uint64 to 24 on 64-bit machines. It is kept as bytes.
type v4l2BTTimings struct {
	Width, Height uint32
	Interlaced    uint32
	Polarities    uint32
	PixelClock    [8]byte // __u64, Hz
	HFrontPorch   uint32
	HSync         uint32
	HBackPorch    uint32
	VFrontPorch   uint32
	VSync         uint32
	VBackPorch    uint32
	ILVFrontPorch uint32 // the second field's vertical blanking,
	ILVSync       uint32 // interlaced formats only
	ILVBackPorch  uint32
	Standards     uint32
	Flags         uint32
	PictureAspect v4l2Fract
	CEA861VIC     uint8
	HDMIVIC       uint8
	_             [46]uint8
}

// v4l2DVTimings is struct v4l2_dv_timings, packed: type, then a union of
// the 124-byte bt and __u32 reserved[32], 128 bytes.
type v4l2DVTimings struct {
	Type uint32
	BT   v4l2BTTimings
	_    [128 - unsafe.Sizeof(v4l2BTTimings{})]byte
}

// v4l2Format is struct v4l2_format: type, then a 200-byte union whose
// struct v4l2_window member holds pointers, so the union is pointer-aligned:
// 204 bytes on 32-bit ARM, 208 on 64-bit machines.
type v4l2Format struct {
	Type uint32
	Fmt  struct {
		_   [0]uintptr
		Raw [200]byte // struct v4l2_pix_format(_mplane): width, height, pixelformat, ...
	}
}

// v4l2StreamParm is struct v4l2_streamparm: type, then a 200-byte union of
// members of __u32 only.
type v4l2StreamParm struct {
	Type uint32
	Parm [200]byte // struct v4l2_captureparm: capability, capturemode, timeperframe, ...
}

// ioctl request numbers: _IOR/_IOWR('V', nr, type) in the generic Linux
// encoding that arm, arm64 and amd64 share: direction in bits 30-31 (read
// 2, write 1), size in 16-29, type in 8-15, number in 0-7.
const (
	iocWrite = 1
	iocRead  = 2

	vidiocGFmt                  = (iocRead|iocWrite)<<30 | uint(unsafe.Sizeof(v4l2Format{}))<<16 | 'V'<<8 | 4
	vidiocGParm                 = (iocRead|iocWrite)<<30 | uint(unsafe.Sizeof(v4l2StreamParm{}))<<16 | 'V'<<8 | 21
	vidiocQueryDVTimings        = iocRead<<30 | uint(unsafe.Sizeof(v4l2DVTimings{}))<<16 | 'V'<<8 | 99
	vidiocSubdevQueryDVTimings  = vidiocQueryDVTimings // include/uapi/linux/v4l2-subdev.h: the same _IOR('V', 99, struct v4l2_dv_timings)
	v4l2BufTypeCapture          = 1
	v4l2BufTypeCaptureMPlane    = 9
	v4l2DVBT6561120             = 0 // the only DV timings type
	v4l2DVFlReducedFPS          = 1 << 2
	v4l2DVFlCanDetectReducedFPS = 1 << 9
	v4l2PixFmtFlagBE            = 1 << 31
)

// DVTimings queries the timings the receiver at dev detects: a video node
// that passes the query on to its source, or the source's own sub-device
// node (VIDIOC_SUBDEV_QUERY_DV_TIMINGS, the same request).
func (DeviceV4L2) DVTimings(dev string) (Timings, error) {
	var t v4l2DVTimings
	if err := ioctlNode(dev, vidiocQueryDVTimings, unsafe.Pointer(&t)); err != nil {
		return Timings{}, dvError(dev, err)
	}
	if t.Type != v4l2DVBT6561120 {
		return Timings{}, fmt.Errorf("DV timings of %s: unknown type %d", dev, t.Type)
	}
	return t.BT.timings(), nil
}

// dvError maps the errnos of VIDIOC_QUERY_DV_TIMINGS to this package's
// errors, keeping "no such file" recognisable.
func dvError(dev string, err error) error {
	for _, m := range []struct {
		errno unix.Errno
		err   error
	}{
		{unix.ENOLINK, ErrNoSignal},
		{unix.ENOLCK, ErrNoLock},
		{unix.ERANGE, ErrOutOfRange},
		{unix.ENOTTY, ErrNotSupported},
		{unix.EINVAL, ErrNotSupported},
		{unix.ENODATA, ErrNotSupported},
		{unix.ENOSYS, ErrNotSupported}, // qemu-user, for ioctls it does not translate
	} {
		if errors.Is(err, m.errno) {
			return fmt.Errorf("DV timings of %s: %w", dev, m.err)
		}
	}
	return err
}

// timings converts the kernel's timings, computing the refresh rate from
// the pixel clock and the total frame including porches and syncs.
func (bt *v4l2BTTimings) timings() Timings {
	t := Timings{Width: int(bt.Width), Height: int(bt.Height)}
	htot := float64(bt.Width) + float64(bt.HFrontPorch) + float64(bt.HSync) + float64(bt.HBackPorch)
	vtot := float64(bt.Height) + float64(bt.VFrontPorch) + float64(bt.VSync) + float64(bt.VBackPorch)
	if bt.Interlaced != 0 {
		// Height counts both fields, the porches and sync one field's
		// blanking each: the frame is both, and it comes as two fields.
		vtot += float64(bt.ILVFrontPorch) + float64(bt.ILVSync) + float64(bt.ILVBackPorch)
		vtot /= 2
	}
	pclk := float64(binary.NativeEndian.Uint64(bt.PixelClock[:]))
	if bt.Flags&v4l2DVFlCanDetectReducedFPS != 0 && bt.Flags&v4l2DVFlReducedFPS != 0 {
		pclk = pclk * 1000 / 1001 // 59.94 rather than 60
	}
	if htot > 0 && vtot > 0 {
		t.FPS = pclk / (htot * vtot)
	}
	return t
}

// Format reads the capture format of dev, single- or multi-planar, and its
// frame interval when the driver keeps one.
func (DeviceV4L2) Format(dev string) (Format, error) {
	var f v4l2Format
	var typ uint32
	var err error
	for _, typ = range []uint32{v4l2BufTypeCapture, v4l2BufTypeCaptureMPlane} {
		f = v4l2Format{Type: typ}
		if err = ioctlNode(dev, vidiocGFmt, unsafe.Pointer(&f)); !errors.Is(err, unix.EINVAL) {
			break
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOTTY), errors.Is(err, unix.ENOSYS):
		return Format{}, fmt.Errorf("format of %s: %w", dev, ErrNotSupported)
	default:
		return Format{}, err
	}
	raw := f.Fmt.Raw[:]
	out := Format{
		Width:       int(binary.NativeEndian.Uint32(raw[0:])),
		Height:      int(binary.NativeEndian.Uint32(raw[4:])),
		PixelFormat: fourCC(binary.NativeEndian.Uint32(raw[8:])),
	}
	p := v4l2StreamParm{Type: typ}
	if err := ioctlNode(dev, vidiocGParm, unsafe.Pointer(&p)); err == nil {
		// timeperframe follows capability and capturemode.
		num := binary.NativeEndian.Uint32(p.Parm[8:])
		den := binary.NativeEndian.Uint32(p.Parm[12:])
		if num > 0 && den > 0 {
			out.FPS = float64(den) / float64(num)
		}
	}
	return out, nil
}

// fourCC spells a V4L2 pixel format code: "UYVY", "MJPG", "Y10"; "-BE"
// marks the big-endian variants.
func fourCC(v uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v&^v4l2PixFmtFlagBE)
	s := strings.TrimRight(string(b[:]), " \x00")
	if v&v4l2PixFmtFlagBE != 0 {
		s += "-BE"
	}
	return s
}

// ioctlNode opens dev and issues one ioctl with arg.
func ioctlNode(dev string, req uint, arg unsafe.Pointer) error {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return pathError("open", dev, err)
	}
	defer unix.Close(fd)
	if err := ioctl.Do(fd, req, arg); err != nil {
		return pathError("ioctl", dev, err)
	}
	return nil
}

// pathError keeps the errno recognisable: errors.Is(err, fs.ErrNotExist)
// for a missing node, fs.ErrPermission for one the daemon may not open.
func pathError(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}
