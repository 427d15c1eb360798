package v4l2test

import (
	"errors"
	"testing"

	"kvmd/hw"
)

func TestFake(t *testing.T) {
	f := Fake{
		"/root/dev/video0": {Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}},
		"video1":           {Err: hw.ErrNoSignal, Fmt: hw.Format{Width: 640, Height: 480, PixelFormat: "YUYV"}},
		"video2":           nil,
	}
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
	}

	f.Set("video3", Device{FmtErr: hw.ErrNotSupported})
	if _, err := f.Format("/dev/video3"); !errors.Is(err, hw.ErrNotSupported) {
		t.Errorf("Format after Set: %v, want ErrNotSupported", err)
	}
	f.Remove("video1")
	if _, err := f.DVTimings("/dev/video1"); !hw.Absent(err) {
		t.Errorf("DVTimings after Remove: %v, want fs.ErrNotExist", err)
	}
}
