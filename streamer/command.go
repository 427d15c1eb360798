package streamer

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"kvmd/hw"
)

// Program is the ustreamer found on this machine: its version and the
// features it was built with, which decide the options it takes.
type Program struct {
	// Version is what --version prints: "4.9" (Debian 12), "6.52"
	// (Buildroot 2026.02).
	Version      string
	Major, Minor int
	// Features are the build options --features lists, on ("+") or off
	// ("-"): WITH_SETPROCTITLE, HAS_PDEATHSIG, WITH_GPIO, ...
	Features map[string]bool
}

// parseProgram reads the output of ustreamer --version and --features.
func parseProgram(version, features string) (Program, error) {
	v := strings.TrimSpace(version)
	maj, min, ok := strings.Cut(v, ".")
	p := Program{Version: v, Features: map[string]bool{}}
	var err1, err2 error
	p.Major, err1 = strconv.Atoi(maj)
	if ok {
		// "6.52" or a development build's "6.52-1-g0a1b2c3".
		min, _, _ = strings.Cut(min, "-")
		p.Minor, err2 = strconv.Atoi(min)
	}
	if v == "" || err1 != nil || err2 != nil || strings.ContainsAny(v, " \n") {
		return Program{}, fmt.Errorf("streamer: not a ustreamer version: %q", firstLine(version))
	}
	sc := bufio.NewScanner(strings.NewReader(features))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "+ "); ok {
			p.Features[strings.TrimSpace(name)] = true
		} else if name, ok := strings.CutPrefix(line, "- "); ok {
			p.Features[strings.TrimSpace(name)] = false
		}
	}
	return p, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// atLeast says whether p is version major.minor or later.
func (p Program) atLeast(major, minor int) bool {
	return p.Major > major || p.Major == major && p.Minor >= minor
}

// Capture is the capture device ustreamer reads, with what decides its
// options.
type Capture struct {
	// Device is the video node, "/dev/video0".
	Device string
	// Kind is hw.CaptureCSI, hw.CaptureUSB or hw.CaptureVivid.
	Kind string
	// Driver is the node's driver: "unicam", "rp1-cfe", "uvcvideo", "vivid".
	Driver string
	// JPEGEncoder is the node of the Raspberry Pi's hardware JPEG encoder
	// (bcm2835-codec's encode_image, /dev/video31), "" without one.
	JPEGEncoder string
}

// ErrNoCapture means there is no capture device to stream from.
var ErrNoCapture = errors.New("streamer: no video capture device")

// jpegEncoderName is the sysfs name of the Pi's M2M JPEG encoder node
// (bcm2835-codec, board/testdata/rpi4.ttar: video31).
const jpegEncoderName = "bcm2835-codec-encode_image"

// FindCapture picks the capture device below f as package hw does, and
// the Pi's hardware JPEG encoder when there is one. Without a capture
// device the error wraps ErrNoCapture.
func FindCapture(f hw.FS) (Capture, error) {
	devs, err := f.VideoDevices()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Capture{}, err
	}
	dt, _ := f.DeviceTree() // the model decides a dongle's port, as for hw.ReadVideo
	d, ok := hw.PickCapture(devs, dt.Model)
	if !ok {
		return Capture{}, fmt.Errorf("%w among %d video devices", ErrNoCapture, len(devs))
	}
	c := Capture{Device: d.Node, Kind: d.Kind(), Driver: d.Driver}
	if i := slices.IndexFunc(devs, func(v hw.VideoDevice) bool { return v.Name == jpegEncoderName }); i >= 0 {
		c.JPEGEncoder = devs[i].Node
	}
	return c, nil
}

// Args returns ustreamer's command line (without the program) for capture
// c at params, listening on the unix socket sock, followed by extra (the
// operator's own options, last so that they win).
//
// The options follow kvmd's configurations for each kind of capture
// (configs/kvmd/main/*.yaml in github.com/pikvm/kvmd):
//   - a TC358743 on a CSI-2 receiver (v2-hdmi-rpi4): DV timings, UYVY,
//     six buffers, three workers, the Pi's M2M JPEG encoder where
//     ustreamer has it (5.x and later: M2M-IMAGE) and the node exists,
//     else the CPU; identical frames dropped (up to 30 in a row);
//   - a USB dongle (v2-hdmiusb-rpi4): the dongle's own MJPEG at a chosen
//     resolution, passed through (encoder HW), no DV timings;
//   - vivid: DV timings, YUYV (its native format), the CPU encoder, as the
//     booted-system test runs it.
//
// Every kind gets --persistent (a lost signal keeps the device open, as
// kvmd has it), the socket options, and the process name prefix and
// parent-death exit when the program was built with them.
func Args(p Program, c Capture, params Params, sock string, extra []string) []string {
	a := []string{
		"--device=" + c.Device,
		"--persistent",
	}
	switch c.Kind {
	case hw.CaptureUSB:
		a = append(a, "--format=MJPEG", "--encoder=HW", "--resolution="+params.Resolution,
			"--drop-same-frames=30")
	case hw.CaptureVivid:
		a = append(a, "--dv-timings", "--format=YUYV", "--encoder=CPU", "--quality="+strconv.Itoa(params.Quality))
	default:
		a = append(a, "--dv-timings", "--format=UYVY", "--buffers=6", "--workers=3")
		if c.JPEGEncoder != "" && p.atLeast(5, 0) {
			a = append(a, "--encoder=M2M-IMAGE", "--m2m-device="+c.JPEGEncoder)
		} else {
			a = append(a, "--encoder=CPU")
		}
		a = append(a, "--quality="+strconv.Itoa(params.Quality), "--drop-same-frames=30")
	}
	a = append(a,
		"--desired-fps="+strconv.Itoa(params.DesiredFPS),
		"--unix="+sock, "--unix-rm", "--unix-mode=0660",
		"--no-log-colors",
	)
	if p.Features["HAS_PDEATHSIG"] {
		a = append(a, "--exit-on-parent-death")
	}
	if p.Features["WITH_SETPROCTITLE"] {
		a = append(a, "--process-name-prefix=kvmd/streamer")
	}
	return append(a, extra...)
}
