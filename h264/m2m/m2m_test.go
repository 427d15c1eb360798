package m2m

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"kvmd/h264"
	"kvmd/hw"
	"kvmd/hw/v4l2m2m"
)

// TestOpener: the formats are the device's raw ones package h264 has,
// in h264's order of preference (a Pi's bcm2835-codec lists YU12 first);
// a device gone, or none on the machine, is h264.ErrUnavailable, which
// no retry mends; a format the device does not take is refused before
// the device is opened.
func TestOpener(t *testing.T) {
	o := &Opener{Device: v4l2m2m.Device{
		Path: filepath.Join(t.TempDir(), "video11"), Card: "bcm2835-codec-encode",
		Raw: []v4l2m2m.PixelFormat{v4l2m2m.YUV420, v4l2m2m.RGB24, v4l2m2m.NV12, v4l2m2m.YUYV},
	}}
	if got, want := o.Formats(), []h264.Format{h264.YUYV, h264.NV12, h264.I420}; !slices.Equal(got, want) {
		t.Errorf("Formats() = %v, want %v", got, want)
	}
	if !o.Hardware() || o.Name() != "bcm2835-codec-encode ("+o.Device.Path+")" {
		t.Errorf("Hardware %v, Name %q", o.Hardware(), o.Name())
	}
	if err := o.Check(t.Context()); !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Check with the node gone: %v", err)
	}
	s := h264.Settings{Width: 640, Height: 480, Format: h264.YUYV, Bitrate: 5000, GOP: 60, FPS: 30}
	if _, err := o.Open(t.Context(), s); !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Open with the node gone: %v", err)
	}
	s.Format = h264.UYVY
	if _, err := o.Open(t.Context(), s); !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Open for UYVY, which the device does not take: %v", err)
	}
	if _, err := Detect(hw.New(t.TempDir()), nil); !errors.Is(err, h264.ErrUnavailable) {
		t.Errorf("Detect on a machine without video devices: %v", err)
	}
}
