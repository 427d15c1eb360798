package v4l2m2m

import (
	"testing"
	"unsafe"
)

// TestLayout checks the UAPI structures and request numbers against what
// gcc 12 printed (sizeof, offsetof, the VIDIOC_* macros) with Debian 12's
// linux-libc-dev for x86-64, aarch64 and arm-linux-gnueabihf, on the
// architecture the test runs on: run it with GOARCH=arm64 and GOARCH=arm
// (under qemu-user) too.
func TestLayout(t *testing.T) {
	var b buffer
	var p plane
	var f format
	var s streamParm
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(struct v4l2_capability)", unsafe.Sizeof(capability{}), 104},
		{"sizeof(struct v4l2_fmtdesc)", unsafe.Sizeof(fmtDesc{}), 64},
		{"sizeof(struct v4l2_format)", unsafe.Sizeof(f), pick[uintptr](204, 208)},
		{"offsetof(v4l2_format, fmt)", unsafe.Offsetof(f.Fmt), pick[uintptr](4, 8)},
		{"sizeof(struct v4l2_requestbuffers)", unsafe.Sizeof(requestBuffers{}), 20},
		{"sizeof(struct v4l2_buffer)", unsafe.Sizeof(b), pick[uintptr](68, 88)},
		{"offsetof(v4l2_buffer, timestamp)", unsafe.Offsetof(b.Timestamp), pick[uintptr](20, 24)},
		{"offsetof(v4l2_buffer, timecode)", unsafe.Offsetof(b.Timecode), pick[uintptr](28, 40)},
		{"offsetof(v4l2_buffer, sequence)", unsafe.Offsetof(b.Sequence), pick[uintptr](44, 56)},
		{"offsetof(v4l2_buffer, m)", unsafe.Offsetof(b.M), pick[uintptr](52, 64)},
		{"offsetof(v4l2_buffer, length)", unsafe.Offsetof(b.Length), pick[uintptr](56, 72)},
		{"offsetof(v4l2_buffer, request_fd)", unsafe.Offsetof(b.RequestFD), pick[uintptr](64, 80)},
		{"sizeof(struct v4l2_plane)", unsafe.Sizeof(p), pick[uintptr](60, 64)},
		{"offsetof(v4l2_plane, m)", unsafe.Offsetof(p.M), 8},
		{"offsetof(v4l2_plane, data_offset)", unsafe.Offsetof(p.DataOffset), pick[uintptr](12, 16)},
		{"sizeof(struct v4l2_control)", unsafe.Sizeof(control{}), 8},
		{"sizeof(struct v4l2_queryctrl)", unsafe.Sizeof(queryCtrl{}), 68},
		{"sizeof(struct v4l2_encoder_cmd)", unsafe.Sizeof(encoderCmd{}), 40},
		{"sizeof(struct v4l2_streamparm)", unsafe.Sizeof(s), 204},
		{"offsetof(v4l2_streamparm, parm)", unsafe.Offsetof(s.Parm), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		got, want uint
	}{
		{"VIDIOC_QUERYCAP", vidiocQueryCap, 0x80685600},
		{"VIDIOC_ENUM_FMT", vidiocEnumFmt, 0xc0405602},
		{"VIDIOC_G_FMT", vidiocGFmt, pick[uint](0xc0cc5604, 0xc0d05604)},
		{"VIDIOC_S_FMT", vidiocSFmt, pick[uint](0xc0cc5605, 0xc0d05605)},
		{"VIDIOC_REQBUFS", vidiocReqBufs, 0xc0145608},
		{"VIDIOC_QUERYBUF", vidiocQueryBuf, pick[uint](0xc0445609, 0xc0585609)},
		{"VIDIOC_QBUF", vidiocQBuf, pick[uint](0xc044560f, 0xc058560f)},
		{"VIDIOC_DQBUF", vidiocDQBuf, pick[uint](0xc0445611, 0xc0585611)},
		{"VIDIOC_STREAMON", vidiocStreamOn, 0x40045612},
		{"VIDIOC_STREAMOFF", vidiocStreamOff, 0x40045613},
		{"VIDIOC_S_PARM", vidiocSParm, 0xc0cc5616},
		{"VIDIOC_S_CTRL", vidiocSCtrl, 0xc008561c},
		{"VIDIOC_QUERYCTRL", vidiocQueryCtrl, 0xc0445624},
		{"VIDIOC_ENCODER_CMD", vidiocEncoderCmd, 0xc028564d},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// pick is the value for 32-bit ARM or for the 64-bit machines, on the
// machine the test runs on.
func pick[T any](arm, b64 T) T {
	if unsafe.Sizeof(uintptr(0)) == 8 {
		return b64
	}
	return arm
}

// TestPixFormat checks where the single- and multi-planar formats keep
// their fields (struct v4l2_pix_format: bytesperline at 16, sizeimage at
// 20; struct v4l2_pix_format_mplane: plane_fmt[0] at 20, sizeimage
// first, num_planes at 180), both ways.
func TestPixFormat(t *testing.T) {
	want := pixFormat{Width: 1280, Height: 720, PixelFormat: YUYV, BytesPerLine: 2560, SizeImage: 1843200}
	for _, mplane := range []bool{false, true} {
		var f format
		want.put(&f, mplane)
		got := getPixFormat(&f, mplane)
		w := want
		if mplane {
			w.Planes = 1
		}
		if got != w {
			t.Errorf("mplane %v: %+v, want %+v", mplane, got, w)
		}
		bpl, size := 16, 20
		if mplane {
			bpl, size = 24, 20
		}
		if f.Fmt.Raw[bpl] != 2560&0xff || f.Fmt.Raw[bpl+1] != 2560>>8 || f.Fmt.Raw[size] != 1843200&0xff {
			t.Errorf("mplane %v: bytesperline or sizeimage not at %d, %d: % x", mplane, bpl, size, f.Fmt.Raw[:32])
		}
	}
}
