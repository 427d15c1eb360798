package v4l2m2m

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestPixelFormat(t *testing.T) {
	// The codes of videodev2.h: v4l2_fourcc('Y','U','Y','V') and so on.
	for p, want := range map[PixelFormat]uint32{YUYV: 0x56595559, H264: 0x34363248, FWHT: 0x54485746, YUV420: 0x32315559, RGB24: 0x33424752} {
		if uint32(p) != want {
			t.Errorf("%s = %#x, want %#x", p, uint32(p), want)
		}
	}
	if s := YUV420.String(); s != "YU12" {
		t.Errorf("YUV420 spells %q", s)
	}
}

// picture fills w x h pixels of bpp bytes, rows stride apart, with bytes
// that tell each row and column apart; padding is 0xEE.
func picture(w, h, bpp, stride int) []byte {
	b := bytes.Repeat([]byte{0xee}, stride*h)
	for y := range h {
		for x := range w * bpp {
			b[y*stride+x] = byte(y*7 + x)
		}
	}
	return b
}

func TestCopyPacked(t *testing.T) {
	// A 6x4 YUYV picture whose rows are 16 bytes apart (a capture's
	// bytesperline), into a driver buffer of 32 bytes a line and 6 rows.
	f := Frame{Format: YUYV, Width: 6, Height: 4, Stride: 16, Data: picture(6, 4, 2, 16)}
	l := layout{format: YUYV, width: 6, height: 4, bpl: 32, rows: 6}
	dst := bytes.Repeat([]byte{0x55}, 32*6)
	n, err := l.copyFrame(dst, f)
	if err != nil {
		t.Fatal(err)
	}
	if n != 32*6 {
		t.Errorf("bytes used %d, want the buffer's picture, %d", n, 32*6)
	}
	for y := range 6 {
		for x := range 32 {
			want := byte(0x55) // beyond the picture: untouched
			if y < 4 && x < 12 {
				want = byte(y*7 + x)
			}
			if got := dst[y*32+x]; got != want {
				t.Fatalf("row %d byte %d: %#x, want %#x", y, x, got, want)
			}
		}
	}
	// Tight rows (stride 0), and data one byte short.
	f = Frame{Format: RGB24, Width: 3, Height: 2, Data: picture(3, 2, 3, 9)}
	l = layout{format: RGB24, width: 3, height: 2, bpl: 9, rows: 2}
	if _, err := l.copyFrame(make([]byte, 18), f); err != nil {
		t.Errorf("tight RGB24: %v", err)
	}
	f.Data = f.Data[:17]
	if _, err := l.copyFrame(make([]byte, 18), f); !errors.Is(err, ErrFrame) {
		t.Errorf("short frame: %v, want ErrFrame", err)
	}
	// A stride less than a row.
	f = Frame{Format: YUYV, Width: 6, Height: 4, Stride: 10, Data: make([]byte, 100)}
	if _, err := (layout{format: YUYV, width: 6, height: 4, bpl: 12, rows: 4}).copyFrame(make([]byte, 48), f); !errors.Is(err, ErrFormat) {
		t.Errorf("stride 10 for 12-byte rows: %v, want ErrFormat", err)
	}
	// A buffer smaller than the layout says: an error, no panic.
	f = Frame{Format: YUYV, Width: 6, Height: 4, Data: make([]byte, 48)}
	if _, err := (layout{format: YUYV, width: 6, height: 4, bpl: 12, rows: 4}).copyFrame(make([]byte, 40), f); err == nil {
		t.Error("a 40-byte buffer for 48 bytes passed")
	}
}

func TestCopyPlanar(t *testing.T) {
	// 4x2 I420: Y 8 bytes, U 2, V 2, tight; the driver's lines are 8
	// bytes (chroma 4) and its rows 4 (chroma 2).
	src := []byte{
		1, 2, 3, 4, 5, 6, 7, 8, // Y
		10, 11, // U
		20, 21, // V
	}
	l := layout{format: YUV420, width: 4, height: 2, bpl: 8, rows: 4}
	dst := make([]byte, l.dstSize())
	if len(dst) != 48 {
		t.Fatalf("dstSize %d, want 8*4*3/2", len(dst))
	}
	if _, err := l.copyFrame(dst, Frame{Format: YUV420, Width: 4, Height: 2, Data: src}); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 48)
	copy(want[0:], []byte{1, 2, 3, 4})
	copy(want[8:], []byte{5, 6, 7, 8})
	copy(want[32:], []byte{10, 11}) // U plane at bpl*rows, 4 bytes a line
	copy(want[40:], []byte{20, 21}) // V plane after U's 4*2 bytes
	if !bytes.Equal(dst, want) {
		t.Errorf("I420 copied as\n% x\nwant\n% x", dst, want)
	}
	// NV12: U V pairs at the luma's line length.
	src = []byte{1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 11, 21}
	l.format = NV12
	dst = make([]byte, l.dstSize())
	if _, err := l.copyFrame(dst, Frame{Format: NV12, Width: 4, Height: 2, Data: src}); err != nil {
		t.Fatal(err)
	}
	want = make([]byte, 48)
	copy(want[0:], []byte{1, 2, 3, 4})
	copy(want[8:], []byte{5, 6, 7, 8})
	copy(want[32:], []byte{10, 20, 11, 21})
	if !bytes.Equal(dst, want) {
		t.Errorf("NV12 copied as\n% x\nwant\n% x", dst, want)
	}
	// An odd size has no 4:2:0 layout.
	if _, err := (layout{format: NV12, width: 3, height: 2}).srcSize(0); !errors.Is(err, ErrFormat) {
		t.Errorf("3x2 NV12: %v, want ErrFormat", err)
	}
}

// fwhtHeader is struct fwht_cframe_hdr with the given flags.
func fwhtHeader(flags uint32) []byte {
	h := make([]byte, 44)
	copy(h, []byte{0x4f, 0x4f, 0x4f, 0x4f, 0xff, 0xff, 0xff, 0xff})
	binary.BigEndian.PutUint32(h[8:], 3) // version
	binary.BigEndian.PutUint32(h[12:], 640)
	binary.BigEndian.PutUint32(h[16:], 480)
	binary.BigEndian.PutUint32(h[20:], flags)
	return h
}

func TestIsKey(t *testing.T) {
	// An FWHT I-frame as vicodec's encoder writes it for YUYV: 3
	// components (2 << 16), YUV (1 << 19), full-height chroma (1 << 7),
	// I-frame (1 << 10).
	iFrame := fwhtHeader(2<<16 | 1<<19 | 1<<7 | 1<<10)
	pFrame := fwhtHeader(2<<16 | 1<<19 | 1<<7)
	sps := []byte{0, 0, 0, 1, 0x67, 0x42}
	idr := []byte{0, 0, 0, 1, 0x65, 0x88}
	nonIDR := []byte{0, 0, 1, 0x41, 0x9a}
	for _, c := range []struct {
		name  string
		coded PixelFormat
		flags uint32
		data  []byte
		want  bool
	}{
		{"driver's key flag", H264, bufFlagKeyFrame, nonIDR, true},
		{"driver's P flag beats the data", FWHT, bufFlagPFrame, iFrame, false},
		{"FWHT I-frame", FWHT, 0, iFrame, true},
		{"FWHT P-frame", FWHT, 0, pFrame, false},
		{"FWHT without magic", FWHT, 0, append([]byte{1}, iFrame[1:]...), false},
		{"FWHT short", FWHT, 0, iFrame[:40], false},
		{"H.264 SPS PPS IDR", H264, 0, append(append([]byte(nil), sps...), idr...), true},
		{"H.264 non-IDR", H264, 0, nonIDR, false},
		{"H.264 empty", H264, 0, nil, false},
		{"another codec", JPEG, 0, iFrame, false},
	} {
		if got := isKey(c.coded, c.flags, c.data); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestClamp(t *testing.T) {
	// bcm2835-codec's bitrate: 25000 to 25000000 in steps of 25000.
	c := ctrl{min: 25000, max: 25000000, step: 25000}
	for in, want := range map[int64]int32{0: 25000, 5000000: 5000000, 5010000: 5000000, 1 << 40: 25000000} {
		if got := c.clamp(in); got != want {
			t.Errorf("clamp(%d) = %d, want %d", in, got, want)
		}
	}
}
