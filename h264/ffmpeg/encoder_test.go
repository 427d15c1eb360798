package ffmpeg

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/h264"
	"kvmd/h264/h264test"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
)

// pics are the test's pictures: the colour bars and a moving square.
var pics = h264test.NewSource(0, 0)

func picture(_ testing.TB, w, h, n int) []byte { return pics.Picture(w, h, n) }

func newOpener(t *testing.T) *Opener {
	t.Helper()
	testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	return NewOpener("ffmpeg", testutil.Logger(t))
}

// ffprobe lists each frame of an H.264 stream as "key,type,width,height":
// "1,I,320,240".
func ffprobe(t *testing.T, stream []byte) []string {
	t.Helper()
	probe := testutil.NeedTool(t, "ffmpeg", "ffprobe")
	f := filepath.Join(t.TempDir(), "out.h264")
	if err := os.WriteFile(f, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(probe, "-v", "error", "-f", "h264", "-show_entries", "frame=key_frame,pict_type,width,height",
		"-of", "compact=p=0", f).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var frames []string
	for _, line := range strings.Fields(string(out)) {
		kv := map[string]string{}
		for _, f := range strings.Split(line, "|") {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		frames = append(frames, strings.Join([]string{kv["key_frame"], kv["pict_type"], kv["width"], kv["height"]}, ","))
	}
	return frames
}

// TestEncode gives ffmpeg 30 pictures, asks for a key frame before the
// 12th, and decodes what came out: 30 pictures of the colour bars at the
// size given, key frames (IDR, with SPS and PPS) at the first and the
// 12th only (ffprobe's reading), each unit carrying its picture's time.
func TestEncode(t *testing.T) {
	o := newOpener(t)
	const w, h, n = 320, 240, 30
	enc, err := o.Open(context.Background(), h264.Settings{Width: w, Height: h, Format: h264.JPEG, Bitrate: 1000, GOP: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	go func() {
		for i := range n {
			if i == 11 {
				enc.ForceKey()
			}
			if err := enc.Encode(h264.Frame{Format: h264.JPEG, Width: w, Height: h, Data: picture(t, w, h, i),
				Time: base.Add(time.Duration(i) * time.Second), Online: true}); err != nil {
				t.Errorf("Encode %d: %v", i, err)
				return
			}
		}
	}()
	var stream []byte
	for i := range n {
		select {
		case u, ok := <-enc.Units():
			if !ok {
				t.Fatalf("units ended after %d: %v", i, enc.Err())
			}
			if want := i == 0 || i == 11; u.Key != want {
				t.Errorf("unit %d: key %v, want %v", i, u.Key, want)
			}
			if u.Key && !(h264.HasType(u.Data, h264.NALSPS) && h264.HasType(u.Data, h264.NALPPS) && h264.HasType(u.Data, h264.NALIDR)) {
				t.Errorf("key unit %d has no SPS, PPS and IDR slice", i)
			}
			if want := base.Add(time.Duration(i) * time.Second); !u.Time.Equal(want) {
				t.Errorf("unit %d: time %v, want %v", i, u.Time, want)
			}
			if u.Seq != uint64(i+1) || u.Width != w || u.Height != h {
				t.Errorf("unit %d: seq %d, %dx%d", i, u.Seq, u.Width, u.Height)
			}
			stream = append(stream, u.Data...)
		case <-time.After(20 * time.Second):
			t.Fatalf("no unit %d within 20 s", i)
		}
	}
	decoded, err := h264test.Decode("ffmpeg", stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded) != n {
		t.Errorf("decoded %d pictures, want %d", len(decoded), n)
	}
	for i, img := range decoded {
		if _, err := colorbars.Check(img, [4]float64{0, 0, w, h}, 0.3); err != nil {
			t.Errorf("picture %d: %v", i, err)
		}
	}
	frames := ffprobe(t, stream)
	if len(frames) != n {
		t.Fatalf("ffprobe found %d frames, want %d: %v", len(frames), n, frames)
	}
	for i, f := range frames {
		want := "0,P,320,240"
		if i == 0 || i == 11 {
			want = "1,I,320,240"
		}
		if got := f; got != want {
			t.Errorf("frame %d: %s, want %s", i, got, want)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := enc.Err(); err != nil {
		t.Errorf("Err after Close: %v", err)
	}
}

// TestGOP has libx264 put a key frame every 10 pictures by itself.
func TestGOP(t *testing.T) {
	o := newOpener(t)
	enc, err := o.Open(context.Background(), h264.Settings{Width: 160, Height: 120, Format: h264.JPEG, Bitrate: 500, GOP: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	go func() {
		for i := range 25 {
			enc.Encode(h264.Frame{Format: h264.JPEG, Width: 160, Height: 120, Data: picture(t, 160, 120, i)})
		}
	}()
	for i := range 25 {
		u := <-enc.Units()
		if want := i%10 == 0; u.Key != want {
			t.Errorf("unit %d: key %v, want %v", i, u.Key, want)
		}
	}
}

// TestKilled kills ffmpeg as a crash would: the units end, Err says how,
// Encode then fails, and Close returns at once.
func TestKilled(t *testing.T) {
	o := newOpener(t)
	enc, err := o.Open(context.Background(), h264.Settings{Width: 160, Height: 120, Format: h264.JPEG, Bitrate: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if err := enc.Encode(h264.Frame{Format: h264.JPEG, Width: 160, Height: 120, Data: picture(t, 160, 120, 0)}); err != nil {
		t.Fatal(err)
	}
	<-enc.Units()
	pid := enc.(*encoder).Pid()
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case _, ok := <-enc.Units():
		if ok {
			t.Fatal("a unit after the kill")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the units did not end within 10 s of the kill")
	}
	if err := enc.Err(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Err = %v, want the kill", err)
	}
	if err := enc.Encode(h264.Frame{Format: h264.JPEG, Width: 160, Height: 120, Data: picture(t, 160, 120, 1)}); !errors.Is(err, ErrEnded) {
		t.Errorf("Encode after the end: %v, want ErrEnded", err)
	}
	start := time.Now()
	enc.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("ffmpeg %d is still there", pid)
	}
}

// TestCloseEnds closes an encoder with pictures still in it: ffmpeg ends
// (no process left behind) and Close returns within stopWait.
func TestCloseEnds(t *testing.T) {
	o := newOpener(t)
	enc, err := o.Open(context.Background(), h264.Settings{Width: 160, Height: 120, Format: h264.JPEG, Bitrate: 500})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := enc.Encode(h264.Frame{Format: h264.JPEG, Width: 160, Height: 120, Data: picture(t, 160, 120, i)}); err != nil {
			t.Fatal(err)
		}
	}
	pid := enc.(*encoder).Pid()
	start := time.Now()
	enc.Close()
	if d := time.Since(start); d > stopWait+time.Second {
		t.Errorf("Close took %v", d)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("ffmpeg %d is still there after Close", pid)
	}
	if _, ok := <-enc.Units(); ok {
		// Drained by Close: nothing is left to read.
		t.Error("a unit after Close")
	}
}

// TestWrongPicture refuses a picture of another size than the encoder's.
func TestWrongPicture(t *testing.T) {
	o := newOpener(t)
	enc, err := o.Open(context.Background(), h264.Settings{Width: 160, Height: 120, Format: h264.JPEG, Bitrate: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if err := enc.Encode(h264.Frame{Format: h264.JPEG, Width: 320, Height: 240, Data: picture(t, 320, 240, 0)}); err == nil {
		t.Error("a picture of another size was taken")
	}
}

// TestNotInstalled: no ffmpeg is h264.ErrUnavailable, which the pipeline
// does not retry.
func TestNotInstalled(t *testing.T) {
	o := NewOpener(filepath.Join(t.TempDir(), "no-ffmpeg"), nil)
	_, err := o.Open(context.Background(), h264.Settings{Width: 160, Height: 120, Format: h264.JPEG, Bitrate: 500})
	if !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Open: %v, want ErrUnavailable", err)
	}
}

// TestProbeAsksAgain: ffmpeg not asked in time (here a context already
// over; in the booted test, a slow start of ffmpeg under emulation) is
// no answer: the next Probe asks again and finds libx264, where a kept
// failure left the daemon without H.264 until restarted. Its answer is
// kept.
func TestProbeAsksAgain(t *testing.T) {
	o := newOpener(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := o.Probe(ctx); err == nil || errors.Is(err, h264.ErrUnavailable) {
		t.Fatalf("Probe with its context over: %v, want a failure to ask", err)
	}
	path, err := o.Probe(context.Background())
	if err != nil || path == "" {
		t.Fatalf("Probe again: %q, %v; want ffmpeg", path, err)
	}
	if again, err := o.Probe(ctx); err != nil || again != path {
		t.Errorf("the answer not kept: %q, %v", again, err)
	}
}
