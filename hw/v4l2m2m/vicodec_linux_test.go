package v4l2m2m

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kvmd/hw"
)

// The tests below drive the kernel's vicodec, a stateful FWHT encoder
// with the interface of a board's H.264 one. No kernel this project's CI
// runs on has it, and Debian's does not ship it: the booted test
// (imagetest, subtest "m2m") builds it from Debian's kernel source for
// Debian's kernel, loads it (single-planar, then multiplanar=1), and runs
// this package's test binary in that system with KVMD_VICODEC=1. Elsewhere
// they skip.

func needVicodec(t *testing.T) Device {
	t.Helper()
	if os.Getenv("KVMD_VICODEC") != "1" {
		t.Skip("needs the kernel's vicodec: the booted test runs it (KVMD_VICODEC=1)")
	}
	dev, ok, err := Detect(hw.New("/"), FWHT)
	if err != nil || !ok {
		t.Fatalf("Detect(FWHT) = %+v, %v, %v: want vicodec's encoder", dev, ok, err)
	}
	return dev
}

// yuyvBars is a YUYV picture of eight vertical bars of different
// colours, stride bytes a row, with a fixed grain in the luma: vicodec
// codes a block against the last frame only where that costs less than
// coding it alone (decide_blocktype in codec-fwht.c), never for a flat
// block, so frames of flat bars would all come out as I-frames.
func yuyvBars(w, h, stride int) []byte {
	yuv := [8][3]byte{{180, 128, 128}, {162, 44, 142}, {131, 156, 44}, {112, 72, 58},
		{84, 184, 198}, {65, 100, 212}, {35, 212, 114}, {16, 128, 128}}
	b := make([]byte, stride*h)
	seed := uint32(1)
	grain := func() byte {
		seed ^= seed << 13
		seed ^= seed >> 17
		seed ^= seed << 5
		return byte(seed % 24)
	}
	for y := range h {
		for x := 0; x < w; x += 2 {
			c := yuv[x*8/w]
			copy(b[y*stride+2*x:], []byte{c[0] + grain(), c[1], c[0] + grain(), c[2]})
		}
	}
	return b
}

// fwhtSize reads the picture size in an FWHT frame's header.
func fwhtSize(t *testing.T, data []byte) (int, int) {
	t.Helper()
	w, h, ok := FWHTSize(data)
	if !ok {
		t.Fatalf("an FWHT frame of %d bytes", len(data))
	}
	return w, h
}

// mappings counts this process's mappings and open files of the node.
func mappings(t *testing.T, node string) (maps, fds int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	maps = strings.Count(string(b), " "+node+"\n")
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == node {
			fds++
		}
	}
	return maps, fds
}

func TestVicodecDetect(t *testing.T) {
	dev := needVicodec(t)
	t.Logf("found %+v", dev)
	if dev.Driver != "vicodec" || !dev.Takes(YUYV) || !dev.Takes(YUV420) {
		t.Errorf("device %+v: want vicodec taking YUYV and YU12", dev)
	}
	// No H.264 encoder here: absent, and not an error.
	if d, ok, err := Detect(hw.New("/"), H264); ok || err != nil {
		t.Errorf("Detect(H264) = %+v, %v, %v: want absent, no error", d, ok, err)
	}
	// vicodec's decoder is an M2M device, but no encoder.
	if _, err := Probe(findNode(t, "stateful-decoder"), FWHT); !errors.Is(err, ErrNotEncoder) {
		t.Errorf("the decoder probed as an encoder: %v", err)
	}
}

// findNode is the node of the video device sysfs names name.
func findNode(t *testing.T, name string) string {
	t.Helper()
	devs, err := hw.New("/").VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == name {
			return d.Node
		}
	}
	t.Fatalf("no video device %q in %+v", name, devs)
	return ""
}

func TestVicodecEncode(t *testing.T) {
	dev := needVicodec(t)
	maps0, fds0 := mappings(t, dev.Path)
	e, err := Open(Config{Device: dev.Path, Coded: FWHT, GOP: 4, Bitrate: 5000, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// vicodec has a GOP control (1 to 16) and none of the others.
	if c := e.Controls(); c != (Controls{GOP: true}) {
		t.Errorf("controls %+v: want GOP only", c)
	}
	if ok, err := e.SetBitrate(2000); ok || err != nil {
		t.Errorf("SetBitrate on vicodec: %v, %v: want absent, no error", ok, err)
	}
	ctx := context.Background()
	enc := func(f Frame) Unit {
		t.Helper()
		u, err := e.Encode(ctx, f)
		if err != nil {
			t.Fatalf("frame %dx%d %s: %v", f.Width, f.Height, f.Format, err)
		}
		if w, h := fwhtSize(t, u.Data); w != f.Width || h != f.Height {
			t.Fatalf("frame %dx%d coded as %dx%d", f.Width, f.Height, w, h)
		}
		return u
	}
	// A padded stride, as a capture's bytesperline can be.
	vga := Frame{Format: YUYV, Width: 640, Height: 480, Stride: 1344, Data: yuyvBars(640, 480, 1344)}
	var keys []bool
	for i := range 6 {
		vga.Time = time.Unix(1000, int64(i))
		u := enc(vga)
		if u.Seq != uint64(i+1) || !u.Time.Equal(vga.Time) {
			t.Errorf("unit %d: seq %d time %v", i, u.Seq, u.Time)
		}
		keys = append(keys, u.Key)
	}
	// GOP 4: key frames at 0 and 4.
	if want := []bool{true, false, false, false, true, false}; !slices.Equal(keys, want) {
		t.Errorf("key frames %v, want %v (GOP 4)", keys, want)
	}
	// A key frame asked for: vicodec has no control for it, so a reset.
	e.ForceKeyFrame()
	if u := enc(vga); !u.Key || e.Resets() != 1 {
		t.Errorf("forced: key %v after %d resets, want a key frame after one", u.Key, e.Resets())
	}
	if u := enc(vga); u.Key {
		t.Error("the frame after the forced one is a key frame too")
	}
	// GOP changed while streaming.
	if ok, err := e.SetGOP(2); !ok || err != nil {
		t.Fatalf("SetGOP(2): %v %v", ok, err)
	}
	keys = keys[:0]
	for range 4 {
		keys = append(keys, enc(vga).Key)
	}
	if n := count(keys); n != 2 {
		t.Errorf("key frames %v after GOP 2, want two in four", keys)
	}
	// A frame too short: an error, and the encoder goes on.
	if _, err := e.Encode(ctx, Frame{Format: YUYV, Width: 640, Height: 480, Data: make([]byte, 100)}); !errors.Is(err, ErrFrame) {
		t.Errorf("short frame: %v, want ErrFrame", err)
	}
	// A new size mid-stream: a new stream, its first frame a key frame.
	hd := Frame{Format: YUYV, Width: 1280, Height: 720, Data: yuyvBars(1280, 720, 2560)}
	if u := enc(hd); !u.Key || u.Width != 1280 {
		t.Errorf("first 1280x720 frame: key %v width %d", u.Key, u.Width)
	}
	enc(hd)
	// Another raw format, and back.
	i420 := Frame{Format: YUV420, Width: 640, Height: 480, Data: make([]byte, 640*480*3/2)}
	if u := enc(i420); !u.Key {
		t.Error("first I420 frame is not a key frame")
	}
	if u := enc(vga); !u.Key {
		t.Error("first YUYV frame after I420 is not a key frame")
	}
	if maps, fds := mappings(t, dev.Path); maps != 6 || fds != fds0+1 {
		t.Errorf("while open: %d mappings of %s (want 2 raw + 4 coded), %d files (want %d)", maps, dev.Path, fds, fds0+1)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := e.Encode(ctx, vga); !errors.Is(err, ErrClosed) {
		t.Errorf("Encode after Close: %v", err)
	}
	if maps, fds := mappings(t, dev.Path); maps != maps0 || fds != fds0 {
		t.Errorf("after Close: %d mappings, %d files of %s left (before: %d, %d)", maps, fds, dev.Path, maps0, fds0)
	}
}

// TestVicodecCloseWhileEncoding closes the encoder from another goroutine
// while frames go through it: every Encode ends, with a unit or
// ErrClosed.
func TestVicodecCloseWhileEncoding(t *testing.T) {
	dev := needVicodec(t)
	e, err := Open(Config{Device: dev.Path, Coded: FWHT, GOP: -1, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vga := Frame{Format: YUYV, Width: 640, Height: 480, Data: yuyvBars(640, 480, 1280)}
	done := make(chan error)
	go func() {
		for {
			if _, err := e.Encode(context.Background(), vga); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Encode across Close: %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Encode did not end after Close")
	}
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
