package h264_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"kvmd/h264"
	"kvmd/internal/testutil"
)

// TestSinkSource reads the raw sink of Debian's ustreamer run without a
// capture device, as the daemon's hardware encoder would: Open holds the
// streamer and waits until ustreamer has made its sink; the "NO SIGNAL"
// JPEG it puts there once a second is no picture for the board's encoder
// and is skipped (Next gives nothing in 2.5 s); Close ends a waiting Next
// and lets the streamer go. A sink that never comes is an error after
// Wait, and the streamer let go; the streamer's own failure is Open's.
// The booted test codes vivid's frames from such a sink (h264/m2m's
// TestVicodecSink).
func TestSinkSource(t *testing.T) {
	path := testutil.NeedTool(t, "ustreamer", "ustreamer")
	name := fmt.Sprintf("kvmd-h264-sink-test-%d", os.Getpid())
	var held atomic.Int32
	src := h264.SinkSource{Name: name, Wait: 20 * time.Second, Hold: func(context.Context) (func(), error) {
		held.Add(1)
		return func() { held.Add(-1) }, nil
	}}

	// Open first: it waits for ustreamer, started after it.
	type opened struct {
		p   h264.Pictures
		err error
	}
	oc := make(chan opened, 1)
	go func() {
		p, err := src.Open(t.Context())
		oc <- opened{p, err}
	}()
	time.Sleep(300 * time.Millisecond)
	// Cleanups run last first: the sink removed after ustreamer ended.
	t.Cleanup(func() { os.Remove("/dev/shm/" + name) })
	out := testutil.Start(t, exec.Command(path, "--device=/dev/kvmd-h264-sink-test-none", "--raw-sink="+name, "--raw-sink-rm",
		"--unix="+filepath.Join(t.TempDir(), "s"), "--unix-rm", "--no-log-colors"), syscall.SIGTERM)
	o := <-oc
	if o.err != nil {
		t.Fatalf("Open: %v\n%s", o.err, out.String())
	}
	if held.Load() != 1 {
		t.Errorf("the streamer held %d times while the sink is open, want 1", held.Load())
	}
	type next struct {
		f   h264.Frame
		err error
	}
	nc := make(chan next, 1)
	go func() {
		f, err := o.p.Next()
		nc <- next{f, err}
	}()
	select {
	case n := <-nc:
		t.Fatalf("Next gave %v %dx%d online %v, %v: want nothing from ustreamer's placeholder", n.f.Format, n.f.Width, n.f.Height, n.f.Online, n.err)
	case <-time.After(2500 * time.Millisecond):
	}
	o.p.Close()
	select {
	case n := <-nc:
		if n.err == nil {
			t.Errorf("Next after Close: %v %dx%d, no error", n.f.Format, n.f.Width, n.f.Height)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next still waits after Close")
	}
	if held.Load() != 0 {
		t.Errorf("the streamer still held after Close (%d)", held.Load())
	}

	// No sink: an error once Wait has passed, the streamer let go.
	missing := src
	missing.Name, missing.Wait = name+"-none", 300*time.Millisecond
	if p, err := missing.Open(t.Context()); err == nil || errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("a sink that never comes: %v, %v; want an error a retry may mend", p, err)
	}
	if held.Load() != 0 {
		t.Errorf("the streamer still held after a failed Open (%d)", held.Load())
	}
	// The streamer's failure is Open's.
	fail := src
	fail.Hold = func(context.Context) (func(), error) { return nil, h264.ErrUnavailable }
	if _, err := fail.Open(t.Context()); !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Open with the streamer failing: %v", err)
	}
}
