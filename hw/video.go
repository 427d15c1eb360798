package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	// Dev is the device number, "81:0", which names the node in a media
	// graph.
	Dev string `json:"dev"`
	// USBPort is, for a USB video device (uvcvideo), the USB interface
	// the node belongs to as the kernel names it, "1-1.4:1.0": bus 1,
	// hub port 1, its port 4, configuration 1, interface 0. It says which
	// port the device is plugged into. Empty for other nodes.
	USBPort string `json:"usb_port,omitempty"`
}

// The kinds of HDMI capture, as Kind reports them.
const (
	// CaptureCSI is an HDMI-to-CSI bridge on a Pi's camera port, which
	// PiKVM calls video "hdmi".
	CaptureCSI = "csi"
	// CaptureUSB is a USB capture dongle (MS2109, MS2130: uvcvideo),
	// PiKVM's video "hdmiusb".
	CaptureUSB = "usb"
	// CaptureVivid is the kernel's virtual video test driver, vivid, with an
	// HDMI input (node_types=0x1 input_types=0x3: its DV timings and "no
	// signal" controls behave as a bridge's do). No appliance has one; the
	// booted-system test and a developer's machine do, so the streamer can
	// be tried without capture hardware.
	CaptureVivid = "vivid"
)

// Kind says what kind of HDMI capture d is: CaptureCSI, CaptureUSB, or ""
// for a node that is neither (a codec, an ISP).
func (d VideoDevice) Kind() string {
	switch {
	case slices.Contains(csiDrivers, d.Driver):
		return CaptureCSI
	case d.Driver == usbDriver:
		return CaptureUSB
	case d.Driver == vividDriver:
		return CaptureVivid
	}
	return ""
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
	known := videoCache.dir(f.Path(class))
	seen := make(map[string]cachedVideo, len(dirs))
	for _, d := range dirs {
		base := path.Base(d)
		if _, ok := videoNumber(base); !ok {
			continue
		}
		id, idOK := nodeIdentity(f.Path(d))
		if c, ok := known[base]; ok && idOK && c.id == id {
			devs = append(devs, c.dev)
			seen[base] = c
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
		if dev.Dev, err = f.readOptional(d + "/dev"); err != nil {
			return nil, err
		}
		if drv, err := f.LinkName(d + "/device/driver"); err == nil {
			dev.Driver = drv
		} else if !Absent(err) {
			return nil, err
		}
		if dev.Driver == usbDriver {
			// The node's device is the interface uvcvideo bound
			// (uvc_driver.c registers its v4l2_device on &intf->dev).
			if p, err := filepath.EvalSymlinks(f.Path(d + "/device")); err == nil {
				dev.USBPort = filepath.Base(p)
			}
		}
		devs = append(devs, dev)
		if idOK {
			seen[base] = cachedVideo{id: id, dev: dev}
		}
	}
	videoCache.set(f.Path(class), seen)
	slices.SortFunc(devs, func(a, b VideoDevice) int {
		m, _ := videoNumber(path.Base(a.Node))
		n, _ := videoNumber(path.Base(b.Node))
		return m - n
	})
	return devs, nil
}

// Every watcher asks for the video nodes twice a second (the streamer's
// capture, /api/info's hw.video), and a Pi 4 has some twenty of them
// (its codec's and ISP's besides the capture): reading each one's
// attributes anew was most of an idle daemon's CPU time. What sysfs says
// of a node does not change while the node exists, so it is kept from one
// listing to the next, by the identity of its entry in the class
// directory: its inode number and change time, which a node removed and
// made again (a dongle unplugged, another plugged in) does not keep.
var videoCache = &videoNodes{dirs: map[string]map[string]cachedVideo{}}

type videoNodes struct {
	mu   sync.Mutex
	dirs map[string]map[string]cachedVideo // class directory → entry name → node
}

type cachedVideo struct {
	id  nodeID
	dev VideoDevice
}

type nodeID struct {
	ino   uint64
	ctime int64
}

// dir returns the nodes of the last listing of dir. The map is never
// changed once set: it is read without the lock.
func (v *videoNodes) dir(dir string) map[string]cachedVideo {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dirs[dir]
}

// set keeps the nodes of the last listing of dir, and only those.
func (v *videoNodes) set(dir string, nodes map[string]cachedVideo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.dirs[dir] = nodes
}

// nodeIdentity returns the identity of the directory entry at p (not what
// it links to).
func nodeIdentity(p string) (nodeID, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nodeID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nodeID{}, false
	}
	return nodeID{ino: uint64(st.Ino), ctime: st.Ctim.Nano()}, true
}

// videoNumber returns N of "videoN".
func videoNumber(name string) (int, bool) { return nodeNumber(name, "video") }

// Drivers of HDMI capture: the Pi's CSI-2 receivers, fed by an
// HDMI-to-CSI bridge such as the TC358743, and USB capture dongles.
var (
	csiDrivers = []string{"unicam", "rp1-cfe"}
	usbDriver  = "uvcvideo"
	// vividDriver is the kernel's virtual capture driver
	// (drivers/media/test-drivers/vivid), taken only when there is no real
	// capture device.
	vividDriver = "vivid"
)

// hdmiUSBPorts are the USB interfaces PiKVM takes the HDMI-USB dongle
// from, by the board's device-tree model: pikvm/kvmd at f14596e8,
// configs/os/udev/v{0,1}-hdmiusb-rpi{2,3}.rules and
// v2-hdmiusb-rpi4.rules link /dev/kvmd-video to a USB video node with
// index 0 only when scripts/kvmd-udev-hdmiusb-check accepts the kernel
// name of its USB interface (udev's %b, the device ATTRS{bInterfaceNumber}
// matched). The script knows these models; on any other model of those
// boards it accepts every port, and the zero2w rules take video0.
var hdmiUSBPorts = map[string][]string{
	"Raspberry Pi 2 Model B Rev 1.1":      {"1-1.5:1.0"},
	"Raspberry Pi 3 Model B Rev 1.2":      {"1-1.5:1.0"},
	"Raspberry Pi 3 Model B Plus Rev 1.3": {"1-1.2:1.0"},
	"Raspberry Pi 4 Model B Rev 1.1":      {"1-1.4:1.0", "2-1:1.0"},
	"Raspberry Pi 4 Model B Rev 1.2":      {"1-1.4:1.0", "2-1:1.0"},
	"Raspberry Pi 4 Model B Rev 1.4":      {"1-1.4:1.0", "2-1:1.0"},
	"Raspberry Pi 4 Model B Rev 1.5":      {"1-1.4:1.0", "2-1:1.0"},
}

// PickCapture returns the HDMI capture device among devs, on a board
// whose device-tree model is model ("" when there is none): the first
// node 0 of a CSI-2 receiver, else a node 0 of a USB video device, else
// the first node 0 of vivid (a test machine's stand-in). Among
// USB video devices (a dongle, and perhaps a webcam beside it) the one on
// the port PiKVM's udev rules take the dongle from on this model
// (hdmiUSBPorts) goes first, so a webcam with a lower node number is not
// taken for the capture; without one there, the first. (PiKVM would then
// have no capture at all; this daemon still shows a dongle plugged into
// another port.) The other nodes of a Pi (the codec, ISP and camera-stack
// nodes of bcm2835-codec, bcm2835-isp, pispbe, ...) and the receivers'
// and dongles' metadata nodes are not HDMI capture.
func PickCapture(devs []VideoDevice, model string) (VideoDevice, bool) {
	ports := hdmiUSBPorts[model]
	for _, take := range []func(VideoDevice) bool{
		func(d VideoDevice) bool { return slices.Contains(csiDrivers, d.Driver) },
		func(d VideoDevice) bool { return d.Driver == usbDriver && slices.Contains(ports, d.USBPort) },
		func(d VideoDevice) bool { return d.Driver == usbDriver },
		func(d VideoDevice) bool { return d.Driver == vividDriver },
	} {
		for _, d := range devs {
			if d.Index == 0 && take(d) {
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
	// on its input, or ErrNoSignal, ErrNoLock, ErrOutOfRange,
	// ErrNotSupported. dev is a video node (VIDIOC_QUERY_DV_TIMINGS) or a
	// sub-device node (VIDIOC_SUBDEV_QUERY_DV_TIMINGS: the same request
	// number and structure).
	DVTimings(dev string) (Timings, error)
	// Format returns the current capture format of a video node
	// (VIDIOC_G_FMT and VIDIOC_G_PARM), or ErrNotSupported.
	Format(dev string) (Format, error)
	// Topology returns the graph of a media device node
	// (MEDIA_IOC_G_TOPOLOGY), or ErrNotSupported.
	Topology(media string) (Topology, error)
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
// The TC358743 driver (drivers/media/i2c/tc358743.c) answers ENOLINK when
// it sees no TMDS signal, ENOLCK when the signal has no stable sync, and
// ERANGE when the timings are beyond its capabilities (640-1920 x 350-1200,
// 13-165 MHz, progressive only).
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
	// on a UVC device, a camera sensor or a video node in
	// media-controller mode (ENOTTY, EINVAL, ENODATA), or no V4L2 on this
	// operating system.
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
	// Media is the media controller node of the capture, "/dev/media0";
	// nil when there is none.
	Media *string `json:"media"`
	// Receiver is the CSI-2 receiver sub-device between the bridge and
	// the video node ("csi2" of rp1-cfe); nil when there is none (unicam)
	// or it cannot be known.
	Receiver *VideoEntity `json:"receiver"`
	// Bridge is the HDMI bridge sub-device ("tc358743 11-000f"); nil when
	// none is found.
	Bridge *VideoEntity `json:"bridge"`
	// Source is the node whose answer Signal, Resolution and FPS come
	// from: the video node (unicam outside media-controller mode, a USB
	// dongle's format) or the bridge's sub-device node (rp1-cfe, unicam
	// in media-controller mode); nil when no node answered.
	Source *string `json:"source"`
	// Signal reports whether a source drives the input: false with
	// status "no_signal", true with "ok", "no_lock" and "out_of_range";
	// nil otherwise.
	Signal *bool `json:"signal"`
	// Resolution is the signal's (or for a USB dongle the capture's)
	// size; nil when unknown.
	Resolution *Resolution `json:"resolution"`
	// FPS is the refresh rate, rounded to hundredths; nil when unknown.
	FPS *float64 `json:"fps"`
	// Status is one of the Video* constants.
	Status string `json:"status"`
}

// VideoEntity is a sub-device of the capture pipeline.
type VideoEntity struct {
	// Node is its device node, "/dev/v4l-subdev2"; nil when it has none.
	Node *string `json:"node"`
	// Name is its name in the media graph, "tc358743 11-000f".
	Name string `json:"name"`
}

// Resolution is a picture size in pixels.
type Resolution struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// The values of Video.Status.
const (
	// VideoOK: a signal the receiver locked on; resolution and fps are
	// the signal's.
	VideoOK = "ok"
	// VideoNoSignal: nothing drives the input (cable out, source off or
	// asleep).
	VideoNoSignal = "no_signal"
	// VideoNoLock: a signal without stable sync (changing mode, a bad
	// cable).
	VideoNoLock = "no_lock"
	// VideoOutOfRange: a signal the receiver cannot take (the TC358743
	// stops at 1920x1200, 165 MHz, and takes no interlaced signal).
	VideoOutOfRange = "out_of_range"
	// VideoNoDetection: the capture device cannot detect a signal at all:
	// a USB dongle, which shows its own "no signal" picture in a fixed
	// format, or a camera sensor. Resolution and fps are the capture
	// format's.
	VideoNoDetection = "no_detection"
	// VideoNoAccess: a node exists but the daemon may not open it (it is
	// not in the group owning /dev/video*, /dev/v4l-subdev*, /dev/media*:
	// "video" on Debian).
	VideoNoAccess = "no_access"
	// VideoUnknown: no node could be asked (no device node below the
	// root, as on a fixture tree) or a query failed.
	VideoUnknown = "unknown"
)

// ReadVideo finds the HDMI capture device below f and asks v about its
// signal. The device nodes are opened below f's root too, so on a fixture
// tree, which has none, the signal is simply unknown.
//
// For an HDMI-to-CSI bridge it asks the video node for the DV timings
// first; a node in media-controller mode cannot answer (rp1-cfe on the Pi
// 5, unicam with the media-controller overlay parameter), so then it asks
// the bridge's sub-device, found through the media graph. A USB dongle is
// asked for its current format only.
//
// Without a capture device (or video4linux) the error wraps
// fs.ErrNotExist and the Video is zero. Any other error comes with a
// usable Video: it is worth logging, not failing on.
func ReadVideo(f FS, v V4L2) (Video, error) {
	devs, err := f.VideoDevices()
	if err != nil {
		return Video{}, err
	}
	dt, _ := f.DeviceTree() // without one, no model: no port is PiKVM's
	d, ok := PickCapture(devs, dt.Model)
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
	if d.Kind() == CaptureUSB {
		return videoFromFormat(out, d.Node, v, node)
	}

	p, perr := FindPipeline(f, v, d)
	if p.Media != "" {
		out.Media = refOf(p.Media)
	}
	out.Receiver, out.Bridge = entityOf(p.Receiver), entityOf(p.Bridge)

	// The video node first: outside media-controller mode it passes the
	// query on to the bridge and is the node a streamer uses.
	t, err := v.DVTimings(node)
	source := d.Node
	if p.Bridge != nil && p.Bridge.Node != "" && (errors.Is(err, ErrNotSupported) || Absent(err)) {
		t, err = v.DVTimings(f.Path(strings.TrimPrefix(p.Bridge.Node, "/")))
		source = p.Bridge.Node
	}
	if errors.Is(err, ErrNotSupported) {
		// A camera sensor, or a receiver without a bridge it can ask.
		out, ferr := videoFromFormat(out, d.Node, v, node)
		return out, errors.Join(perr, ferr)
	}
	out, err = videoFromTimings(out, source, t, err)
	return out, errors.Join(perr, err)
}

func entityOf(s *SubDevice) *VideoEntity {
	if s == nil {
		return nil
	}
	e := &VideoEntity{Name: s.Name}
	if s.Node != "" {
		e.Node = refOf(s.Node)
	}
	return e
}

// videoFromFormat fills in out from the current format of the node dev
// (host path hostDev): a device that cannot detect a signal.
func videoFromFormat(out Video, dev string, v V4L2, hostDev string) (Video, error) {
	fm, err := v.Format(hostDev)
	switch {
	case err == nil:
		out.Status = VideoNoDetection
		out.Source = refOf(dev)
		if fm.Width > 0 && fm.Height > 0 {
			out.Resolution = &Resolution{fm.Width, fm.Height}
		}
		out.FPS = roundFPS(fm.FPS)
	case errors.Is(err, ErrNotSupported):
		out.Status = VideoNoDetection
	case errors.Is(err, fs.ErrPermission):
		out.Status = VideoNoAccess
		return out, fmt.Errorf("video format of %s: %w", dev, err)
	case Absent(err):
	default:
		return out, fmt.Errorf("video format of %s: %w", dev, err)
	}
	return out, nil
}

// videoFromTimings fills in out from the answer of the node source to a
// DV timings query.
func videoFromTimings(out Video, source string, t Timings, err error) (Video, error) {
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
	case errors.Is(err, fs.ErrPermission):
		out.Status = VideoNoAccess
		return out, fmt.Errorf("video timings of %s: %w", source, err)
	case Absent(err):
		return out, nil
	default:
		return out, fmt.Errorf("video timings of %s: %w", source, err)
	}
	out.Source = refOf(source)
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
