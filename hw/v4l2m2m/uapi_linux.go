package v4l2m2m

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvmd/internal/ioctl"
)

// The kernel UAPI (include/uapi/linux/videodev2.h, v4l2-controls.h).
// Structures whose members the package reads are laid out as Go lays them
// out on arm, arm64 and amd64 alike; unions are bytes read at their
// offsets. The layout test checks sizes, offsets and request numbers
// against what gcc 12 gives for the three (with Debian 12's
// linux-libc-dev), on the architecture it runs on.

// capability is struct v4l2_capability.
type capability struct {
	Driver     [16]byte
	Card       [32]byte
	BusInfo    [32]byte
	Version    uint32
	Caps       uint32
	DeviceCaps uint32
	_          [3]uint32
}

// fmtDesc is struct v4l2_fmtdesc.
type fmtDesc struct {
	Index       uint32
	Type        uint32
	Flags       uint32
	Description [32]byte
	PixelFormat uint32
	MbusCode    uint32
	_           [3]uint32
}

// format is struct v4l2_format: the type, then a 200-byte union that
// holds pointers in one member, so it is pointer-aligned: 204 bytes on
// 32-bit ARM, 208 on 64-bit machines. Its members are read as bytes: see
// pixFormat.
type format struct {
	Type uint32
	Fmt  struct {
		_   [0]uintptr
		Raw [200]byte
	}
}

// requestBuffers is struct v4l2_requestbuffers.
type requestBuffers struct {
	Count    uint32
	Type     uint32
	Memory   uint32
	Caps     uint32
	Flags    uint8
	Reserved [3]uint8
}

// plane is struct v4l2_plane: m is a union of __u32 mem_offset, unsigned
// long userptr and __s32 fd, so a uintptr, whose low bytes (these
// machines are little-endian) are the offset.
type plane struct {
	BytesUsed  uint32
	Length     uint32
	M          uintptr
	DataOffset uint32
	_          [11]uint32
}

// buffer is struct v4l2_buffer. The timestamp is a struct timeval: on
// 32-bit ARM its 32-bit form, which the kernel takes as
// VIDIOC_QBUF_TIME32 (the request number carries the size). m is a union
// of the offset, a user pointer, the planes' pointer and an fd.
type buffer struct {
	Index     uint32
	Type      uint32
	BytesUsed uint32
	Flags     uint32
	Field     uint32
	Timestamp unix.Timeval
	Timecode  [16]byte
	Sequence  uint32
	Memory    uint32
	M         uintptr
	Length    uint32
	_         uint32
	RequestFD int32
}

// control is struct v4l2_control.
type control struct {
	ID    uint32
	Value int32
}

// queryCtrl is struct v4l2_queryctrl.
type queryCtrl struct {
	ID      uint32
	Type    uint32
	Name    [32]byte
	Minimum int32
	Maximum int32
	Step    int32
	Default int32
	Flags   uint32
	_       [2]uint32
}

// encoderCmd is struct v4l2_encoder_cmd.
type encoderCmd struct {
	Cmd   uint32
	Flags uint32
	Data  [8]uint32
}

// streamParm is struct v4l2_streamparm: the type, then a 200-byte union of
// members of __u32 only; struct v4l2_outputparm has timeperframe at 8.
type streamParm struct {
	Type uint32
	Parm [200]byte
}

var (
	vidiocQueryCap   = ioctl.IOR('V', 0, unsafe.Sizeof(capability{}))
	vidiocEnumFmt    = ioctl.IOWR('V', 2, unsafe.Sizeof(fmtDesc{}))
	vidiocGFmt       = ioctl.IOWR('V', 4, unsafe.Sizeof(format{}))
	vidiocSFmt       = ioctl.IOWR('V', 5, unsafe.Sizeof(format{}))
	vidiocReqBufs    = ioctl.IOWR('V', 8, unsafe.Sizeof(requestBuffers{}))
	vidiocQueryBuf   = ioctl.IOWR('V', 9, unsafe.Sizeof(buffer{}))
	vidiocQBuf       = ioctl.IOWR('V', 15, unsafe.Sizeof(buffer{}))
	vidiocDQBuf      = ioctl.IOWR('V', 17, unsafe.Sizeof(buffer{}))
	vidiocStreamOn   = ioctl.IOW('V', 18, unsafe.Sizeof(int32(0)))
	vidiocStreamOff  = ioctl.IOW('V', 19, unsafe.Sizeof(int32(0)))
	vidiocSParm      = ioctl.IOWR('V', 22, unsafe.Sizeof(streamParm{}))
	vidiocSCtrl      = ioctl.IOWR('V', 28, unsafe.Sizeof(control{}))
	vidiocQueryCtrl  = ioctl.IOWR('V', 36, unsafe.Sizeof(queryCtrl{}))
	vidiocEncoderCmd = ioctl.IOWR('V', 77, unsafe.Sizeof(encoderCmd{}))
)

// Constants of videodev2.h and v4l2-controls.h.
const (
	capVideoM2MMPlane = 0x00004000
	capVideoM2M       = 0x00008000
	capStreaming      = 0x04000000
	capDeviceCaps     = 0x80000000

	bufTypeCapture       = 1
	bufTypeOutput        = 2
	bufTypeCaptureMPlane = 9
	bufTypeOutputMPlane  = 10

	memoryMMap = 1
	fieldNone  = 1

	fmtFlagCompressed = 0x0001

	bufFlagError = 0x00000040
	bufFlagLast  = 0x00100000

	encCmdStop = 1

	ctrlFlagDisabled = 0x0001
	ctrlFlagReadOnly = 0x0004

	cidCodecBase          = 0x00990900 // V4L2_CID_CODEC_BASE
	cidGOPSize            = cidCodecBase + 203
	cidBitrate            = cidCodecBase + 207
	cidRepeatSeqHeader    = cidCodecBase + 226
	cidForceKeyFrame      = cidCodecBase + 229
	cidH264IPeriod        = cidCodecBase + 358
	cidH264Level          = cidCodecBase + 359
	cidH264Profile        = cidCodecBase + 363
	cidPrependSPSPPSToIDR = cidCodecBase + 644

	h264ProfileConstrainedBaseline = 1  // V4L2_MPEG_VIDEO_H264_PROFILE_CONSTRAINED_BASELINE
	h264Level40                    = 11 // V4L2_MPEG_VIDEO_H264_LEVEL_4_0
)

// pixFormat is the part of struct v4l2_pix_format (single-planar) or
// struct v4l2_pix_format_mplane (one plane) the package sets and reads.
// Both begin with width, height, pixelformat and field; the single-planar
// one has bytesperline at 16 and sizeimage at 20, the multi-planar one
// (packed) its first struct v4l2_plane_pix_format at 20, sizeimage then
// bytesperline, and num_planes at 180.
type pixFormat struct {
	Width, Height uint32
	PixelFormat   PixelFormat
	BytesPerLine  uint32
	SizeImage     uint32
	Planes        uint8 // multi-planar only
}

func (p pixFormat) put(f *format, mplane bool) {
	b, ne := f.Fmt.Raw[:], binary.NativeEndian
	ne.PutUint32(b[0:], p.Width)
	ne.PutUint32(b[4:], p.Height)
	ne.PutUint32(b[8:], uint32(p.PixelFormat))
	ne.PutUint32(b[12:], fieldNone)
	if mplane {
		ne.PutUint32(b[20:], p.SizeImage)
		ne.PutUint32(b[24:], p.BytesPerLine)
		b[180] = 1
		return
	}
	ne.PutUint32(b[16:], p.BytesPerLine)
	ne.PutUint32(b[20:], p.SizeImage)
}

func getPixFormat(f *format, mplane bool) pixFormat {
	b, ne := f.Fmt.Raw[:], binary.NativeEndian
	p := pixFormat{
		Width:       ne.Uint32(b[0:]),
		Height:      ne.Uint32(b[4:]),
		PixelFormat: PixelFormat(ne.Uint32(b[8:])),
	}
	if mplane {
		p.SizeImage, p.BytesPerLine, p.Planes = ne.Uint32(b[20:]), ne.Uint32(b[24:]), b[180]
	} else {
		p.BytesPerLine, p.SizeImage = ne.Uint32(b[16:]), ne.Uint32(b[20:])
	}
	return p
}

// cString is a NUL-padded name of the UAPI.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
