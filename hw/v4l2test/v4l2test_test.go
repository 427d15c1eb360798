package v4l2test

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	"kvmd/hw"
)

func TestFake(t *testing.T) {
	f := New(map[string]Device{
		"/root/dev/video0": {Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}},
		"video1":           {Err: hw.ErrNoSignal, Fmt: hw.Format{Width: 640, Height: 480, PixelFormat: "YUYV"}},
	})
	if got, err := f.DVTimings("/root/dev/video0"); err != nil || got.Width != 1920 {
		t.Errorf("DVTimings(exact path) = %+v, %v", got, err)
	}
	if got, err := f.DVTimings("/elsewhere/dev/video1"); !errors.Is(err, hw.ErrNoSignal) {
		t.Errorf("DVTimings(by base name) = %+v, %v; want ErrNoSignal", got, err)
	}
	if got, err := f.Format("/elsewhere/dev/video1"); err != nil || got.PixelFormat != "YUYV" {
		t.Errorf("Format(by base name) = %+v, %v", got, err)
	}
	for _, dev := range []string{"/other/dev/video0", "video2", "/dev/video3"} {
		if _, err := f.DVTimings(dev); !hw.Absent(err) {
			t.Errorf("DVTimings(%s) error %v, want fs.ErrNotExist", dev, err)
		}
		if _, err := f.Format(dev); !hw.Absent(err) {
			t.Errorf("Format(%s) error %v, want fs.ErrNotExist", dev, err)
		}
		if _, err := f.Topology(dev); !hw.Absent(err) {
			t.Errorf("Topology(%s) error %v, want fs.ErrNotExist", dev, err)
		}
	}

	f.Set("video3", Device{FmtErr: hw.ErrNotSupported})
	if _, err := f.Format("/dev/video3"); !errors.Is(err, hw.ErrNotSupported) {
		t.Errorf("Format after Set: %v, want ErrNotSupported", err)
	}
	f.Remove("video1")
	if _, err := f.DVTimings("/dev/video1"); !hw.Absent(err) {
		t.Errorf("DVTimings after Remove: %v, want fs.ErrNotExist", err)
	}

	var zero Fake
	if _, err := zero.DVTimings("video0"); !hw.Absent(err) {
		t.Errorf("zero Fake: DVTimings error %v, want fs.ErrNotExist", err)
	}
	zero.Set("video0", Device{})
	if _, err := zero.DVTimings("video0"); err != nil {
		t.Errorf("zero Fake after Set: %v", err)
	}
}

func TestFakeTopology(t *testing.T) {
	graph := &hw.Topology{
		Entities: []hw.MediaEntity{{ID: 1, Name: "csi2"}},
		Pads:     []hw.MediaPad{{ID: 2, Entity: 1, Flags: hw.MediaPadFlSink}},
	}
	f := New(map[string]Device{
		"media0": {Topology: graph},
		"media1": {TopoErr: errors.New("ioctl: input/output error")},
		"video0": {},
	})
	got, err := f.Topology("/root/dev/media0")
	if err != nil || !reflect.DeepEqual(got, *graph) {
		t.Fatalf("Topology() = %+v, %v; want %+v", got, err, *graph)
	}
	got.Entities[0].Name = "changed" // the caller's own copy
	if again, _ := f.Topology("media0"); again.Entities[0].Name != "csi2" {
		t.Errorf("changing a returned graph changed the fake's: %q", again.Entities[0].Name)
	}
	if _, err := f.Topology("media1"); err == nil || hw.Absent(err) {
		t.Errorf("Topology(failing) error %v, want the set error", err)
	}
	if _, err := f.Topology("video0"); !errors.Is(err, hw.ErrNotSupported) {
		t.Errorf("Topology(a node without a graph) error %v, want ErrNotSupported", err)
	}
}

// TestFakeConcurrent changes and reads two fakes at once (run with -race).
func TestFakeConcurrent(t *testing.T) {
	a, b := &Fake{}, &Fake{}
	var wg sync.WaitGroup
	for _, f := range []*Fake{a, b} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 500 {
				f.Set("video0", Device{Timings: hw.Timings{Width: i}})
				if i%7 == 0 {
					f.Remove("video0")
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 500 {
				if _, err := f.DVTimings("/dev/video0"); err != nil && !hw.Absent(err) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
