package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// VideoDevice is a V4L2 device node as sysfs describes it.
type VideoDevice struct {
	// Node is the device node on the machine: "/dev/video0".
	Node string `json:"node"`
	// Name is the device's name attribute: "unicam-image",
	// "rp1-cfe-csi2_ch0", or a USB dongle's product string.
	Name string `json:"name"`
	// Index tells a driver's nodes for one device apart: a UVC camera's
	// capture node is 0, its metadata node 1.
	Index int `json:"index"`
	// Driver is the bound driver: "unicam", "rp1-cfe", "uvcvideo",
	// "bcm2835-codec", ...; empty when sysfs does not link one.
	Driver string `json:"driver"`
}

// VideoDevices lists the V4L2 video nodes, in the order of their numbers.
// Without sysfs's video4linux class the error wraps fs.ErrNotExist.
func (f FS) VideoDevices() ([]VideoDevice, error) {
	const class = "sys/class/video4linux"
	dirs, err := f.Glob(class + "/video*")
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		if _, err := os.Stat(f.Path(class)); err != nil {
			return nil, fmt.Errorf("video4linux: %w", err)
		}
	}
	var devs []VideoDevice
	for _, d := range dirs {
		base := path.Base(d)
		if _, ok := videoNumber(base); !ok {
			continue
		}
		dev := VideoDevice{Node: "/dev/" + base}
		if dev.Name, err = f.readOptional(d + "/name"); err != nil {
			return nil, err
		}
		idx, err := f.readOptional(d + "/index")
		if err != nil {
			return nil, err
		}
		// Kernels have written index since 2.6.31; a node without one
		// is its device's only node.
		if idx != "" {
			if dev.Index, err = strconv.Atoi(idx); err != nil {
				return nil, fmt.Errorf("%s/index: %w", d, err)
			}
		}
		if drv, err := f.Readlink(d + "/device/driver"); err == nil {
			dev.Driver = drv
		} else if !Absent(err) {
			return nil, err
		}
		devs = append(devs, dev)
	}
	slices.SortFunc(devs, func(a, b VideoDevice) int {
		m, _ := videoNumber(path.Base(a.Node))
		n, _ := videoNumber(path.Base(b.Node))
		return m - n
	})
	return devs, nil
}

// videoNumber returns N of "videoN".
func videoNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "video")
	if !ok || s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// Drivers of HDMI capture: the Pi's CSI-2 receivers, fed by an
// HDMI-to-CSI bridge such as the TC358743, and USB capture dongles.
var (
	csiDrivers = []string{"unicam", "rp1-cfe"}
	usbDriver  = "uvcvideo"
)

// PickCapture returns the HDMI capture device among devs: the first node 0
// of a CSI-2 receiver, else the first node 0 of a USB video device. The
// other nodes of a Pi (the codec, ISP and camera-stack nodes of
// bcm2835-codec, bcm2835-isp, pispbe, ...) and the receivers' metadata
// nodes are not HDMI capture.
func PickCapture(devs []VideoDevice) (VideoDevice, bool) {
	for _, drivers := range [][]string{csiDrivers, {usbDriver}} {
		for _, d := range devs {
			if d.Index == 0 && slices.Contains(drivers, d.Driver) {
				return d, true
			}
		}
	}
	return VideoDevice{}, false
}

// V4L2 queries video capture devices. DeviceV4L2 asks the kernel;
// v4l2test.Fake stands in for it in tests and demos.
type V4L2 interface {
	// DVTimings returns the digital video timings the receiver detects
	// on its input (VIDIOC_QUERY_DV_TIMINGS), or ErrNoSignal, ErrNoLock,
	// ErrOutOfRange, ErrNotSupported.
	DVTimings(dev string) (Timings, error)
	// Format returns the current capture format (VIDIOC_G_FMT and
	// VIDIOC_G_PARM), or ErrNotSupported.
	Format(dev string) (Format, error)
}

// Timings are the detected timings of a digital video signal.
type Timings struct {
	Width, Height int
	// FPS is the refresh rate: frames per second, or fields per second
	// for an interlaced signal (the 60 of 1080i60).
	FPS float64
}

// Format is a capture device's current format.
type Format struct {
	Width, Height int
	// FPS is the configured frame rate, 0 when the driver does not say.
	FPS float64
	// PixelFormat is the FourCC: "UYVY", "MJPG", "YUYV", ...
	PixelFormat string
}

// Errors of V4L2, from the kernel's answers to VIDIOC_QUERY_DV_TIMINGS.
var (
	// ErrNoSignal means nothing drives the input (ENOLINK).
	ErrNoSignal = errors.New("hw: no video signal")
	// ErrNoLock means a signal is there but the receiver cannot lock on
	// it: it is unstable, or changing mode (ENOLCK).
	ErrNoLock = errors.New("hw: video signal unstable")
	// ErrOutOfRange means the signal's timings are beyond what the
	// receiver handles (ERANGE).
	ErrOutOfRange = errors.New("hw: video timings out of range")
	// ErrNotSupported means the device has no such query: no DV timings
	// on a UVC device or camera sensor (ENOTTY, EINVAL, ENODATA), or no
	// V4L2 on this operating system.
	ErrNotSupported = errors.New("hw: not supported by the video device")
)

// Video is the state of the HDMI capture.
type Video struct {
	// Device is the capture node, "/dev/video0".
	Device *string `json:"device"`
	// Driver is its kernel driver, "unicam", "rp1-cfe" or "uvcvideo".
	Driver *string `json:"driver"`
	// Card is the device's name as sysfs gives it.
	Card *string `json:"card"`
	// Signal reports whether a source drives the input: false with
	// status "no_signal", true with "ok", "no_lock" and "out_of_range";
	// nil when the device cannot tell (a USB dongle shows its own "no
	// signal" picture in a fixed format) or cannot be asked.
	Signal *bool `json:"signal"`
	// Resolution is the signal's (or for a USB dongle the capture's)
	// size; nil when unknown.
	Resolution *Resolution `json:"resolution"`
	// FPS is the refresh rate, rounded to hundredths; nil when unknown.
	FPS *float64 `json:"fps"`
	// Status is "ok", "no_signal", "no_lock", "out_of_range", or
	// "unknown" when the device cannot detect a signal (USB dongles,
	// camera sensors) or cannot be asked (no device node, as on a fixture
	// tree, or an error).
	Status string `json:"status"`
}

// Resolution is a picture size in pixels.
type Resolution struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// The values of Video.Status.
const (
	VideoOK         = "ok"
	VideoNoSignal   = "no_signal"
	VideoNoLock     = "no_lock"
	VideoOutOfRange = "out_of_range"
	VideoUnknown    = "unknown"
)

// ReadVideo finds the HDMI capture device below f and asks v about its
// signal. The device node is opened below f's root too, so on a fixture
// tree, which has none, the signal is simply unknown.
//
// Without a capture device (or video4linux) the error wraps
// fs.ErrNotExist and the Video is zero. Any other error comes with a
// usable Video (status "unknown"): it is worth logging, not failing on.
func ReadVideo(f FS, v V4L2) (Video, error) {
	devs, err := f.VideoDevices()
	if err != nil {
		return Video{}, err
	}
	d, ok := PickCapture(devs)
	if !ok {
		return Video{}, fmt.Errorf("no HDMI capture among %d video devices: %w", len(devs), fs.ErrNotExist)
	}
	out := Video{Device: refOf(d.Node), Status: VideoUnknown}
	if d.Driver != "" {
		out.Driver = refOf(d.Driver)
	}
	if d.Name != "" {
		out.Card = refOf(d.Name)
	}
	node := f.Path(strings.TrimPrefix(d.Node, "/"))

	if d.Driver != usbDriver {
		t, err := v.DVTimings(node)
		if !errors.Is(err, ErrNotSupported) {
			return videoFromTimings(out, t, err)
		}
	}
	fm, err := v.Format(node)
	switch {
	case err == nil:
		if fm.Width > 0 && fm.Height > 0 {
			out.Resolution = &Resolution{fm.Width, fm.Height}
		}
		out.FPS = roundFPS(fm.FPS)
	case Absent(err), errors.Is(err, ErrNotSupported):
	default:
		return out, fmt.Errorf("video format of %s: %w", d.Node, err)
	}
	return out, nil
}

// videoFromTimings fills in out from the answer to a DV timings query.
func videoFromTimings(out Video, t Timings, err error) (Video, error) {
	if err == nil && (t.Width <= 0 || t.Height <= 0) {
		// A receiver that answers with an empty frame sees nothing.
		err = ErrNoSignal
	}
	switch {
	case err == nil:
		out.Status = VideoOK
		out.Signal = refOf(true)
		out.Resolution = &Resolution{t.Width, t.Height}
		out.FPS = roundFPS(t.FPS)
	case errors.Is(err, ErrNoSignal):
		out.Status = VideoNoSignal
		out.Signal = refOf(false)
	case errors.Is(err, ErrNoLock):
		out.Status = VideoNoLock
		out.Signal = refOf(true)
	case errors.Is(err, ErrOutOfRange):
		out.Status = VideoOutOfRange
		out.Signal = refOf(true)
	case Absent(err):
	default:
		return out, fmt.Errorf("video timings of %s: %w", *out.Device, err)
	}
	return out, nil
}

func roundFPS(fps float64) *float64 {
	if !(fps > 0) || math.IsInf(fps, 0) {
		return nil
	}
	r := math.Round(fps*100) / 100
	return &r
}

func refOf[T any](v T) *T { return &v }
