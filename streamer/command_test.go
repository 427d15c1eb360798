package streamer

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kvmd/hw"
	"kvmd/internal/fixture"
)

// TestParseProgram reads what ustreamer prints: Debian 12's 4.9 (this
// host's /usr/bin/ustreamer --version and --features, verbatim) and a
// 6.x.
func TestParseProgram(t *testing.T) {
	debian := "- WITH_OMX\n- WITH_GPIO\n+ WITH_PTHREAD_NP\n+ WITH_SETPROCTITLE\n+ HAS_PDEATHSIG\n"
	p, err := parseProgram("4.9\n", debian)
	if err != nil {
		t.Fatal(err)
	}
	want := Program{Version: "4.9", Major: 4, Minor: 9, Features: map[string]bool{"WITH_OMX": false, "WITH_GPIO": false,
		"WITH_PTHREAD_NP": true, "WITH_SETPROCTITLE": true, "HAS_PDEATHSIG": true}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v, want %+v", p, want)
	}
	if p, err := parseProgram("6.52-3-gabcdef\n", ""); err != nil || p.Major != 6 || p.Minor != 52 || !p.atLeast(5, 0) || p.atLeast(6, 53) {
		t.Errorf("6.52-3-gabcdef: %+v %v", p, err)
	}
	if p.atLeast(5, 0) {
		t.Error("4.9 is at least 5.0")
	}
	for _, bad := range []string{"", "uStreamer", "ustreamer: unrecognized option '--version'\nusage", "x.9"} {
		if _, err := parseProgram(bad, ""); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestFindCapture finds the capture device and the Pi's JPEG encoder in
// trees read from real boards (board/testdata, hw/testdata SOURCES.md).
func TestFindCapture(t *testing.T) {
	for _, tt := range []struct {
		tree string
		want Capture
	}{
		{"../board/testdata/rpi4.ttar", Capture{Device: "/dev/video0", Kind: hw.CaptureCSI, Driver: "unicam", JPEGEncoder: "/dev/video31"}},
		{"../board/testdata/rpi4-usb.ttar", Capture{Device: "/dev/video0", Kind: hw.CaptureUSB, Driver: "uvcvideo", JPEGEncoder: "/dev/video31"}},
		{"../hw/testdata/pi5-tc358743.ttar", Capture{Device: "/dev/video0", Kind: hw.CaptureCSI, Driver: "rp1-cfe"}},
	} {
		t.Run(filepath.Base(tt.tree), func(t *testing.T) {
			root := t.TempDir()
			if err := fixture.UnpackFile(tt.tree, root); err != nil {
				t.Fatal(err)
			}
			got, err := FindCapture(hw.New(root))
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := FindCapture(hw.New(t.TempDir())); !errors.Is(err, ErrNoCapture) {
		t.Errorf("an empty tree: %v, want ErrNoCapture", err)
	}
}

func TestArgs(t *testing.T) {
	v49 := Program{Version: "4.9", Major: 4, Minor: 9, Features: map[string]bool{"WITH_SETPROCTITLE": true, "HAS_PDEATHSIG": true}}
	v652 := Program{Version: "6.52", Major: 6, Minor: 52, Features: map[string]bool{}}
	p := Params{Quality: 75, DesiredFPS: 25, Resolution: "1280x720"}
	tail := " --desired-fps=25 --unix=/run/s.sock --unix-rm --unix-mode=0660 --no-log-colors"
	for _, tt := range []struct {
		name string
		prog Program
		c    Capture
		want string
	}{
		{"tc358743 on a pi 4, ustreamer 6: the M2M JPEG encoder (kvmd v2-hdmi-rpi4)", v652,
			Capture{Device: "/dev/video0", Kind: hw.CaptureCSI, JPEGEncoder: "/dev/video31"},
			"--device=/dev/video0 --persistent --dv-timings --format=UYVY --buffers=6 --workers=3 --encoder=M2M-IMAGE --m2m-device=/dev/video31 --quality=75 --drop-same-frames=30" + tail},
		{"tc358743, ustreamer 4.9 has no M2M encoder: the CPU", v49,
			Capture{Device: "/dev/video0", Kind: hw.CaptureCSI, JPEGEncoder: "/dev/video31"},
			"--device=/dev/video0 --persistent --dv-timings --format=UYVY --buffers=6 --workers=3 --encoder=CPU --quality=75 --drop-same-frames=30" + tail +
				" --exit-on-parent-death --process-name-prefix=kvmd/streamer"},
		{"tc358743 on a pi 5: no JPEG encoder", v652,
			Capture{Device: "/dev/video0", Kind: hw.CaptureCSI},
			"--device=/dev/video0 --persistent --dv-timings --format=UYVY --buffers=6 --workers=3 --encoder=CPU --quality=75 --drop-same-frames=30" + tail},
		{"usb dongle (kvmd v2-hdmiusb-rpi4)", v652,
			Capture{Device: "/dev/video2", Kind: hw.CaptureUSB},
			"--device=/dev/video2 --persistent --format=MJPEG --encoder=HW --resolution=1280x720 --drop-same-frames=30" + tail},
		{"vivid", v49,
			Capture{Device: "/dev/video0", Kind: hw.CaptureVivid},
			"--device=/dev/video0 --persistent --dv-timings --format=YUYV --encoder=CPU --quality=75" + tail +
				" --exit-on-parent-death --process-name-prefix=kvmd/streamer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(Args(tt.prog, tt.c, p, "/run/s.sock", nil), " ")
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	got := Args(v652, Capture{Device: "/dev/video0", Kind: hw.CaptureCSI}, p, "/s", []string{"--slowdown"})
	if got[len(got)-1] != "--slowdown" {
		t.Errorf("the extra options are not last: %q", got)
	}
}
