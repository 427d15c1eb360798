package hw

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestV4L2Layout checks the structs against the kernel's sizes and
// offsets (videodev2.h), on whatever architecture the test runs: run it
// with GOARCH=arm too (under qemu-user) for 32-bit ARM.
func TestV4L2Layout(t *testing.T) {
	ptr64 := unsafe.Sizeof(uintptr(0)) == 8
	fmtSize, fmtOff, gFmt := uintptr(204), uintptr(4), uint(0xc0cc5604)
	if ptr64 {
		fmtSize, fmtOff, gFmt = 208, 8, 0xc0d05604
	}
	var bt v4l2BTTimings
	var dv v4l2DVTimings
	var f v4l2Format
	var p v4l2StreamParm
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(struct v4l2_bt_timings)", unsafe.Sizeof(bt), 124},
		{"sizeof(struct v4l2_dv_timings)", unsafe.Sizeof(dv), 132},
		{"offsetof(v4l2_dv_timings, bt)", unsafe.Offsetof(dv.BT), 4},
		{"offsetof(bt, pixelclock)", unsafe.Offsetof(bt.PixelClock), 16},
		{"offsetof(bt, hfrontporch)", unsafe.Offsetof(bt.HFrontPorch), 24},
		{"offsetof(bt, il_vbackporch)", unsafe.Offsetof(bt.ILVBackPorch), 56},
		{"offsetof(bt, flags)", unsafe.Offsetof(bt.Flags), 64},
		{"offsetof(bt, picture_aspect)", unsafe.Offsetof(bt.PictureAspect), 68},
		{"offsetof(bt, cea861_vic)", unsafe.Offsetof(bt.CEA861VIC), 76},
		{"offsetof(bt, hdmi_vic)", unsafe.Offsetof(bt.HDMIVIC), 77},
		{"sizeof(struct v4l2_format)", unsafe.Sizeof(f), fmtSize},
		{"offsetof(v4l2_format, fmt)", unsafe.Offsetof(f.Fmt), fmtOff},
		{"sizeof(struct v4l2_streamparm)", unsafe.Sizeof(p), 204},
		{"offsetof(v4l2_streamparm, parm)", unsafe.Offsetof(p.Parm), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		got, want uint
	}{
		{"VIDIOC_QUERY_DV_TIMINGS", vidiocQueryDVTimings, 0x80845663},
		{"VIDIOC_G_PARM", vidiocGParm, 0xc0cc5615},
		{"VIDIOC_G_FMT", vidiocGFmt, gFmt},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// dvBytes lays out a struct v4l2_dv_timings as the kernel writes it.
func dvBytes(width, height, interlaced uint32, pclk uint64, h [3]uint32, v, il [3]uint32, flags uint32) []byte {
	b := make([]byte, 132)
	ne := binary.NativeEndian
	bt := b[4:]
	ne.PutUint32(bt[0:], width)
	ne.PutUint32(bt[4:], height)
	ne.PutUint32(bt[8:], interlaced)
	ne.PutUint64(bt[16:], pclk)
	for i, x := range append(append(h[:], v[:]...), il[:]...) {
		ne.PutUint32(bt[24+4*i:], x)
	}
	ne.PutUint32(bt[64:], flags)
	return b
}

func TestDVTimingsDecode(t *testing.T) {
	for _, tt := range []struct {
		name string
		raw  []byte
		want Timings
	}{
		{"1080p60", dvBytes(1920, 1080, 0, 148500000, [3]uint32{88, 44, 148}, [3]uint32{4, 5, 36}, [3]uint32{}, 0), Timings{1920, 1080, 60}},
		{"720p50", dvBytes(1280, 720, 0, 74250000, [3]uint32{440, 40, 220}, [3]uint32{5, 5, 20}, [3]uint32{}, 0), Timings{1280, 720, 50}},
		{"1080i60, field rate", dvBytes(1920, 1080, 1, 74250000, [3]uint32{88, 44, 148}, [3]uint32{2, 5, 15}, [3]uint32{3, 5, 15}, 0), Timings{1920, 1080, 60}},
		// As the TC358743 reports it, all blanking in hsync and vsync: a
		// real 1080p50 of pikvm/ustreamer issue 307 (pixclk=115024000,
		// hsync=160, vsync=26).
		{"tc358743 1080p50", dvBytes(1920, 1080, 0, 115024000, [3]uint32{0, 160, 0}, [3]uint32{0, 26, 0}, [3]uint32{}, 0), Timings{1920, 1080, 115024000.0 / (2080 * 1106)}},
		{"1080p59.94", dvBytes(1920, 1080, 0, 148500000, [3]uint32{88, 44, 148}, [3]uint32{4, 5, 36}, [3]uint32{}, 1<<9|1<<2), Timings{1920, 1080, 60 * 1000.0 / 1001}},
		{"reduced fps flag alone", dvBytes(1920, 1080, 0, 148500000, [3]uint32{88, 44, 148}, [3]uint32{4, 5, 36}, [3]uint32{}, 1<<2), Timings{1920, 1080, 60}},
		{"no pixel clock", dvBytes(640, 480, 0, 0, [3]uint32{16, 96, 48}, [3]uint32{10, 2, 33}, [3]uint32{}, 0), Timings{640, 480, 0}},
		{"zero frame", dvBytes(0, 0, 0, 25175000, [3]uint32{}, [3]uint32{}, [3]uint32{}, 0), Timings{0, 0, 0}},
		{"pixel clock above 4 GHz", dvBytes(1, 1, 0, 1<<33, [3]uint32{}, [3]uint32{}, [3]uint32{}, 0), Timings{1, 1, 1 << 33}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var dv v4l2DVTimings
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&dv)), unsafe.Sizeof(dv)), tt.raw)
			got := dv.BT.timings()
			if got.Width != tt.want.Width || got.Height != tt.want.Height || math.Abs(got.FPS-tt.want.FPS) > 1e-9 {
				t.Errorf("timings() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFourCC(t *testing.T) {
	for in, want := range map[uint32]string{
		'U' | 'Y'<<8 | 'V'<<16 | 'Y'<<24:         "UYVY",
		'M' | 'J'<<8 | 'P'<<16 | 'G'<<24:         "MJPG",
		'Y' | '1'<<8 | '0'<<16 | ' '<<24:         "Y10",
		'R' | 'G'<<8 | 'B'<<16 | '3'<<24:         "RGB3",
		'R' | 'G'<<8 | 'B'<<16 | 'R'<<24 | 1<<31: "RGBR-BE",
		0:                                        "",
	} {
		if got := fourCC(in); got != want {
			t.Errorf("fourCC(%#x) = %q, want %q", in, got, want)
		}
	}
}

func TestDVError(t *testing.T) {
	for _, tt := range []struct {
		errno unix.Errno
		want  error
	}{
		{unix.ENOLINK, ErrNoSignal},
		{unix.ENOLCK, ErrNoLock},
		{unix.ERANGE, ErrOutOfRange},
		{unix.ENOTTY, ErrNotSupported},
		{unix.EINVAL, ErrNotSupported},
		{unix.ENODATA, ErrNotSupported},
		{unix.ENOSYS, ErrNotSupported},
		{unix.ENOENT, fs.ErrNotExist},
		{unix.EACCES, fs.ErrPermission}, // a node the daemon may not open: status no_access
		{unix.EIO, unix.EIO},
		{unix.EBUSY, unix.EBUSY},
	} {
		err := dvError("/dev/video0", &fs.PathError{Op: "ioctl", Path: "/dev/video0", Err: tt.errno})
		if !errors.Is(err, tt.want) {
			t.Errorf("dvError(%v) = %v, want %v", tt.errno, err, tt.want)
		}
	}
}

// TestDeviceV4L2 runs the real ioctls on what a test machine has: no node,
// and nodes that are not video devices.
func TestDeviceV4L2(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var v DeviceV4L2
	missing := filepath.Join(dir, "dev/video0")
	if _, err := v.DVTimings(missing); !Absent(err) {
		t.Errorf("DVTimings(missing) error %v, want fs.ErrNotExist", err)
	}
	if _, err := v.Format(missing); !Absent(err) {
		t.Errorf("Format(missing) error %v, want fs.ErrNotExist", err)
	}
	for _, dev := range []string{plain, "/dev/null"} {
		if _, err := os.Stat(dev); err != nil {
			continue
		}
		if got, err := v.DVTimings(dev); !errors.Is(err, ErrNotSupported) {
			t.Errorf("DVTimings(%s) = %+v, %v; want ErrNotSupported", dev, got, err)
		}
		if got, err := v.Format(dev); !errors.Is(err, ErrNotSupported) {
			t.Errorf("Format(%s) = %+v, %v; want ErrNotSupported", dev, got, err)
		}
	}
}
