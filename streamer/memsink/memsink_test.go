package memsink

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bytes gcc 12 stores for a long double (Debian 12's gcc on x86-64,
// aarch64-linux-gnu-gcc run under qemu-aarch64): of a double converted
// ("(double)x", what put must write) and of the value at the format's own
// precision (what get must round to the double).
var longDoubles = []struct {
	v           float64
	x87, quad   string // of the double converted
	x87F, quadF string // at full precision, "" when the same
}{
	{1,
		"00 00 00 00 00 00 00 80 ff 3f 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 00 00 00 00 00 00 00 ff 3f", "", ""},
	{4711.5,
		"00 00 00 00 00 00 3c 93 0b 40 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 00 00 00 00 00 78 26 0b 40", "", ""},
	{1e9,
		"00 00 00 00 00 28 6b ee 1c 40 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 00 00 00 00 50 d6 dc 1c 40", "", ""},
	{12345.678,
		"00 c0 ca a1 45 b6 e6 c0 0c 40 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 80 95 43 8b 6c cd 81 0c 40",
		"83 c0 ca a1 45 b6 e6 c0 0c 40 00 00 00 00 00 00",
		"be 9f 1a 2f dd 24 06 81 95 43 8b 6c cd 81 0c 40"},
	{0.001,
		"00 e0 4f 8d 97 6e 12 83 f5 3f 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 c0 9f 1a 2f dd 24 06 f5 3f",
		"3b df 4f 8d 97 6e 12 83 f5 3f 00 00 00 00 00 00",
		"62 10 58 39 b4 c8 76 be 9f 1a 2f dd 24 06 f5 3f"},
	{98765.4321,
		"00 50 84 0d 4f b7 e6 c0 0f 40 00 00 00 00 00 00",
		"00 00 00 00 00 00 00 a0 08 1b 9e 6e cd 81 0f 40", "", ""},
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLongDouble(t *testing.T) {
	for _, c := range longDoubles {
		for _, f := range []struct {
			name     string
			put      func([]byte, float64)
			get      func([]byte) float64
			conv, at string
		}{
			{"x87", putX87, getX87, c.x87, c.x87F},
			{"binary128", putQuad, getQuad, c.quad, c.quadF},
		} {
			b := bytes.Repeat([]byte{0xaa}, 16)
			f.put(b, c.v)
			if want := unhex(t, f.conv); !bytes.Equal(b, want) {
				t.Errorf("%s of %g: % x, want % x", f.name, c.v, b, want)
			}
			if got := f.get(b); got != c.v {
				t.Errorf("%s of %g read back as %g", f.name, c.v, got)
			}
			if f.at != "" {
				if got := f.get(unhex(t, f.at)); got != c.v {
					t.Errorf("%s: gcc's %g read as %.17g", f.name, c.v, got)
				}
			}
		}
		b := make([]byte, 8)
		putDouble(b, c.v)
		if binary.LittleEndian.Uint64(b) != math.Float64bits(c.v) || getDouble(b) != c.v {
			t.Errorf("double of %g: % x", c.v, b)
		}
	}
}

// headerBytes writes a memsink_shared_s header laid out as l says.
func headerBytes(l layout, id uint64, used int, w, h, format, stride uint32, online bool, grab float64) []byte {
	b := make([]byte, l.data)
	ne := binary.LittleEndian
	ne.PutUint64(b, magic)
	ne.PutUint32(b[8:], version)
	ne.PutUint64(b[l.id:], id)
	if l.usedSize == 8 {
		ne.PutUint64(b[l.used:], uint64(used))
	} else {
		ne.PutUint32(b[l.used:], uint32(used))
	}
	ne.PutUint32(b[l.width:], w)
	ne.PutUint32(b[l.height:], h)
	ne.PutUint32(b[l.format:], format)
	ne.PutUint32(b[l.stride:], stride)
	if online {
		b[l.online] = 1
	}
	l.putLongDouble(b[l.grab:], grab)
	return b
}

func TestParse(t *testing.T) {
	yuyv := binary.LittleEndian.Uint32([]byte("YUYV"))
	for _, l := range []layout{layoutX8664, layoutAArch64, layoutARM} {
		b := headerBytes(l, 0x1234567890, 1843200, 1280, 720, yuyv, 2560, true, 3130.748)
		h := l.parse(b)
		want := header2(0x1234567890, 1843200, 1280, 720, yuyv, 2560, true, 3130.748)
		if h != want {
			t.Errorf("%s: %+v, want %+v", l.name, h, want)
		}
	}
}

func header2(id, used uint64, w, h, format, stride uint32, online bool, grab float64) header {
	return header{magic: magic, version: version, id: id, used: used, width: w, height: h, format: format,
		stride: stride, online: online, grab: grab}
}

// sink writes a sink object as ustreamer would, in this machine's layout.
func sink(t *testing.T, dir, name string, hdr []byte, data []byte, size int) {
	t.Helper()
	b := make([]byte, size)
	copy(b, hdr)
	copy(b[native.data:], data)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReader(t *testing.T) {
	if native.data == 0 {
		t.Skip("no layout for this machine")
	}
	dir := t.TempDir()
	yuyv := binary.LittleEndian.Uint32([]byte("YUYV"))
	pic := bytes.Repeat([]byte{1, 2, 3, 4}, 8)
	sink(t, dir, "raw", headerBytes(native, 7, len(pic), 4, 4, yuyv, 8, true, monoRaw()-0.5), pic, native.data+64)
	r, err := Open("/raw", Options{Dir: dir, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	buf := make([]byte, 0, 64)
	f, err := r.Next(ctx, buf)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != 7 || f.FourCC() != "YUYV" || f.Width != 4 || f.Height != 4 || f.Stride != 8 || !f.Online || !bytes.Equal(f.Data, pic) {
		t.Errorf("frame %+v", f)
	}
	if &f.Data[0] != &buf[:1][0] {
		t.Error("the frame's data is not in the buffer given")
	}
	if age := time.Since(f.Grab); age < 400*time.Millisecond || age > 5*time.Second {
		t.Errorf("grabbed %v ago, want about 0.5 s", age)
	}
	// The reader said it read: last_client_ts is now on CLOCK_MONOTONIC_RAW.
	b, _ := os.ReadFile(filepath.Join(dir, "raw"))
	if ts := native.getLongDouble(b[native.lastClient:]); math.Abs(ts-monoRaw()) > 5 {
		t.Errorf("last_client_ts %g, the clock %g", ts, monoRaw())
	}
	// The same id again is not a new frame: Next waits, and ends with ctx.
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := r.Next(short, buf); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no new frame: %v, want the deadline", err)
	}
	// A frame bigger than the object: an error, no read past it; another
	// version.
	v3 := headerBytes(native, 9, 4, 4, 4, yuyv, 8, true, 0)
	binary.LittleEndian.PutUint32(v3[8:], 3)
	for _, c := range []struct {
		name string
		hdr  []byte
		want error
	}{
		{"a 1000-byte frame in 64 bytes", headerBytes(native, 8, 1000, 4, 4, yuyv, 8, true, 0), ErrCorrupt},
		{"version 3", v3, ErrVersion},
	} {
		sink(t, dir, "bad", c.hdr, nil, native.data+64)
		rb, err := Open("bad", Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rb.Next(ctx, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		rb.Close()
	}
	// Close ends a waiting Next.
	go func() { time.Sleep(20 * time.Millisecond); r.Close() }()
	if _, err := r.Next(ctx, buf); !errors.Is(err, ErrClosed) {
		t.Errorf("Next across Close: %v, want ErrClosed", err)
	}
	// Names shm_open would refuse, a missing sink.
	for _, n := range []string{"", "/", "a/b", "..", "x\x00y"} {
		if _, err := Open(n, Options{Dir: dir}); !errors.Is(err, ErrName) {
			t.Errorf("name %q: %v, want ErrName", n, err)
		}
	}
	if _, err := Open("none", Options{Dir: dir}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing sink: %v, want fs.ErrNotExist", err)
	}
}

// FuzzLook reads arbitrary bytes as a sink: an error or a frame within
// the object, never a panic or a read past it.
func FuzzLook(f *testing.F) {
	if native.data == 0 {
		f.Skip("no layout for this machine")
	}
	yuyv := binary.LittleEndian.Uint32([]byte("YUYV"))
	f.Add(append(headerBytes(native, 1, 8, 2, 2, yuyv, 4, true, 1), make([]byte, 8)...))
	f.Add(headerBytes(native, 1, 1<<30, 2, 2, yuyv, 4, true, 1))
	f.Add([]byte{0xbe, 0xba, 0xfe, 0xca})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "s"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open("s", Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		fr, ok, err := r.look(nil)
		if ok && (err != nil || native.data+len(fr.Data) > len(b)) {
			t.Errorf("a frame of %d bytes from an object of %d (%v)", len(fr.Data), len(b), err)
		}
	})
}
