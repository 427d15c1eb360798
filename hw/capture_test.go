package hw_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"testing"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
)

// captureTree unpacks hw/testdata/<name>.ttar (sources: testdata/SOURCES.md).
func captureTree(t *testing.T, name string) hw.FS {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("testdata", name+".ttar"), root); err != nil {
		t.Fatal(err)
	}
	return hw.New(root)
}

// Media graph object IDs carry their type in the top byte (media-entity.h
// media_gobj_gen_id): entities 0, pads 1, links 2, interfaces 3.
const (
	padID  = 1 << 24
	linkID = 2 << 24
	intfID = 3 << 24
	data   = hw.MediaLnkFlDataLink
	iface  = hw.MediaLnkFlInterfaceLink
	on     = hw.MediaLnkFlEnabled | hw.MediaLnkFlImmutable
)

// pi5Graph is rp1-cfe's graph with a TC358743 on CAM/DISP 1 (entity IDs
// and names from public media-ctl -p outputs: see SOURCES.md): the bridge
// feeds csi2's pad 0; csi2's pad 4 feeds rp1-cfe-csi2_ch0 and the PiSP
// front end through links that start disabled.
func pi5Graph() *hw.Topology {
	return &hw.Topology{
		Entities: []hw.MediaEntity{
			{ID: 1, Name: "csi2", Function: hw.MediaEntFVidIFBridge}, // CSI-2 receivers call themselves bridges too
			{ID: 10, Name: "pisp-fe", Function: hw.MediaEntFSubdevOther},
			{ID: 16, Name: "tc358743 11-000f", Function: hw.MediaEntFVidIFBridge},
			{ID: 18, Name: "rp1-cfe-csi2_ch0", Function: hw.MediaEntFIOV4L},
			{ID: 34, Name: "rp1-cfe-fe_image0", Function: hw.MediaEntFIOV4L},
		},
		Pads: []hw.MediaPad{
			{ID: padID | 2, Entity: 1, Flags: hw.MediaPadFlSink},   // csi2 pad0
			{ID: padID | 6, Entity: 1, Flags: hw.MediaPadFlSource}, // csi2 pad4
			{ID: padID | 11, Entity: 10, Flags: hw.MediaPadFlSink},
			{ID: padID | 13, Entity: 10, Flags: hw.MediaPadFlSource},
			{ID: padID | 17, Entity: 16, Flags: hw.MediaPadFlSource},
			{ID: padID | 19, Entity: 18, Flags: hw.MediaPadFlSink},
			{ID: padID | 35, Entity: 34, Flags: hw.MediaPadFlSink},
		},
		Interfaces: []hw.MediaInterface{
			{ID: intfID | 20, Type: hw.MediaIntfV4LVideo, Major: 81, Minor: 0},
			{ID: intfID | 36, Type: hw.MediaIntfV4LVideo, Major: 81, Minor: 4},
			{ID: intfID | 60, Type: hw.MediaIntfV4LSubdev, Major: 81, Minor: 8},
			{ID: intfID | 62, Type: hw.MediaIntfV4LSubdev, Major: 81, Minor: 9},
			{ID: intfID | 64, Type: hw.MediaIntfV4LSubdev, Major: 81, Minor: 10},
		},
		Links: []hw.MediaLink{
			{ID: linkID | 21, Source: intfID | 20, Sink: 18, Flags: iface | on},
			{ID: linkID | 37, Source: intfID | 36, Sink: 34, Flags: iface | on},
			{ID: linkID | 50, Source: padID | 17, Sink: padID | 2, Flags: data | on},
			{ID: linkID | 51, Source: padID | 6, Sink: padID | 19, Flags: data},
			{ID: linkID | 52, Source: padID | 6, Sink: padID | 11, Flags: data},
			{ID: linkID | 53, Source: padID | 13, Sink: padID | 35, Flags: data},
			{ID: linkID | 61, Source: intfID | 60, Sink: 1, Flags: iface | on},
			{ID: linkID | 63, Source: intfID | 62, Sink: 10, Flags: iface | on},
			{ID: linkID | 65, Source: intfID | 64, Sink: 16, Flags: iface | on},
		},
	}
}

// pi4Graph is unicam's graph with a TC358743 (object IDs from a public
// v4l2-ctl --all: SOURCES.md): the bridge's pad feeds unicam-image
// directly; the sub-device interface is the one media-controller mode
// gives the bridge.
func pi4Graph() *hw.Topology {
	return &hw.Topology{
		Entities: []hw.MediaEntity{
			{ID: 1, Name: "tc358743 10-000f", Function: hw.MediaEntFVidIFBridge},
			{ID: 3, Name: "unicam-image", Function: hw.MediaEntFIOV4L},
			{ID: 8, Name: "unicam-embedded", Function: hw.MediaEntFIOV4L},
		},
		Pads: []hw.MediaPad{
			{ID: padID | 2, Entity: 1, Flags: hw.MediaPadFlSource},
			{ID: padID | 4, Entity: 3, Flags: hw.MediaPadFlSink},
			{ID: padID | 9, Entity: 8, Flags: hw.MediaPadFlSink},
		},
		Interfaces: []hw.MediaInterface{
			{ID: intfID | 5, Type: hw.MediaIntfV4LVideo, Major: 81, Minor: 0},
			{ID: intfID | 10, Type: hw.MediaIntfV4LVideo, Major: 81, Minor: 1},
			{ID: intfID | 12, Type: hw.MediaIntfV4LSubdev, Major: 81, Minor: 2},
		},
		Links: []hw.MediaLink{
			{ID: linkID | 6, Source: intfID | 5, Sink: 3, Flags: iface | on},
			{ID: linkID | 7, Source: padID | 2, Sink: padID | 4, Flags: data | on},
			{ID: linkID | 11, Source: intfID | 10, Sink: 8, Flags: iface | on},
			{ID: linkID | 13, Source: intfID | 12, Sink: 1, Flags: iface | on},
		},
	}
}

// Answers of the real drivers, as the fake gives them.
var (
	// errNotTTY is a video node in media-controller mode: rp1-cfe's and
	// unicam's MC ioctl tables have no DV timings.
	errNotTTY = fmt.Errorf("DV timings of /dev/video0: %w", hw.ErrNotSupported)
	// hd60 is a 1080p60 source (raspberrypi/linux issue 7523).
	hd60 = hw.Timings{Width: 1920, Height: 1080, FPS: 60}
	// eacces is a node the daemon may not open.
	eacces = &fs.PathError{Op: "open", Path: "/dev/v4l-subdev0", Err: fs.ErrPermission}
)

func entity(node, name string) *hw.VideoEntity {
	e := &hw.VideoEntity{Name: name}
	if node != "" {
		e.Node = ref(node)
	}
	return e
}

func TestReadVideoCapture(t *testing.T) {
	pi5 := func(v hw.Video) hw.Video {
		v.Device, v.Driver, v.Card = ref("/dev/video0"), ref("rp1-cfe"), ref("rp1-cfe-csi2_ch0")
		v.Media = ref("/dev/media0")
		if v.Bridge == nil {
			v.Receiver = entity("/dev/v4l-subdev0", "csi2")
			v.Bridge = entity("/dev/v4l-subdev2", "tc358743 11-000f")
		}
		return v
	}
	pi4 := func(v hw.Video) hw.Video {
		v.Device, v.Driver, v.Card = ref("/dev/video0"), ref("unicam"), ref("unicam-image")
		v.Media = ref("/dev/media3")
		v.Bridge = entity("/dev/v4l-subdev0", "tc358743 10-000f")
		return v
	}
	usb := func(v hw.Video) hw.Video {
		v.Device, v.Driver, v.Card = ref("/dev/video0"), ref("uvcvideo"), ref("USB Video: USB Video")
		return v
	}
	for _, tt := range []struct {
		name    string
		tree    string
		nodes   map[string]v4l2test.Device // nil: the real ioctls (no node below a fixture root)
		want    hw.Video
		wantErr bool
	}{{
		name: "pi5 1080p60 from the bridge",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {Topology: pi5Graph()}, "v4l-subdev2": {Timings: hd60},
		},
		want: pi5(hw.Video{Source: ref("/dev/v4l-subdev2"), Signal: ref(true),
			Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(60.0), Status: "ok"}),
	}, {
		name: "pi5 no signal",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {Topology: pi5Graph()}, "v4l-subdev2": {Err: hw.ErrNoSignal},
		},
		want: pi5(hw.Video{Source: ref("/dev/v4l-subdev2"), Signal: ref(false), Status: "no_signal"}),
	}, {
		name: "pi5 no lock",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {Topology: pi5Graph()}, "v4l-subdev2": {Err: hw.ErrNoLock},
		},
		want: pi5(hw.Video{Source: ref("/dev/v4l-subdev2"), Signal: ref(true), Status: "no_lock"}),
	}, {
		name: "pi5 out of range",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {Topology: pi5Graph()}, "v4l-subdev2": {Err: hw.ErrOutOfRange},
		},
		want: pi5(hw.Video{Source: ref("/dev/v4l-subdev2"), Signal: ref(true), Status: "out_of_range"}),
	}, {
		name: "pi5 without a readable graph: the bridge by its sysfs name",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {}, "v4l-subdev2": {Timings: hd60},
		},
		want: pi5(hw.Video{Bridge: entity("/dev/v4l-subdev2", "tc358743 11-000f"), Source: ref("/dev/v4l-subdev2"),
			Signal: ref(true), Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(60.0), Status: "ok"}),
	}, {
		name: "pi5 graph fails: logged, the bridge by its sysfs name",
		tree: "pi5-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media0": {TopoErr: errors.New("ioctl: input/output error")}, "v4l-subdev2": {Err: hw.ErrNoSignal},
		},
		want: pi5(hw.Video{Bridge: entity("/dev/v4l-subdev2", "tc358743 11-000f"), Source: ref("/dev/v4l-subdev2"),
			Signal: ref(false), Status: "no_signal"}),
		wantErr: true,
	}, {
		name: "pi5 fixture tree",
		tree: "pi5-tc358743",
		want: pi5(hw.Video{Bridge: entity("/dev/v4l-subdev2", "tc358743 11-000f"), Status: "unknown"}),
	}, {
		name: "pi4 unicam legacy: the video node answers",
		tree: "pi4-unicam-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Timings: hd60}, "media3": {Topology: pi4Graph()},
			"v4l-subdev0": {Err: errors.New("the bridge must not be asked when the node answers")},
		},
		want: pi4(hw.Video{Source: ref("/dev/video0"), Signal: ref(true),
			Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(60.0), Status: "ok"}),
	}, {
		name: "pi4 unicam legacy: no signal, no sync lock",
		tree: "pi4-unicam-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: hw.ErrNoSignal}, "media3": {Topology: pi4Graph()},
		},
		want: pi4(hw.Video{Source: ref("/dev/video0"), Signal: ref(false), Status: "no_signal"}),
	}, {
		name: "pi4 unicam media-controller mode: the bridge answers",
		tree: "pi4-unicam-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media3": {Topology: pi4Graph()}, "v4l-subdev0": {Timings: hd60},
		},
		want: pi4(hw.Video{Source: ref("/dev/v4l-subdev0"), Signal: ref(true),
			Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(60.0), Status: "ok"}),
	}, {
		name: "pi4 unicam media-controller mode: no access to the bridge",
		tree: "pi4-unicam-tc358743",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errNotTTY}, "media3": {Topology: pi4Graph()}, "v4l-subdev0": {Err: eacces},
		},
		want:    pi4(hw.Video{Status: "no_access"}),
		wantErr: true,
	}, {
		name: "pi4 usb dongle: the capture format, signal unknown",
		tree: "pi4-usb-ms2109",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errMustNotAsk, Fmt: hw.Format{Width: 1920, Height: 1080, PixelFormat: "MJPG"}},
		},
		want: usb(hw.Video{Source: ref("/dev/video0"), Resolution: &hw.Resolution{Width: 1920, Height: 1080},
			Status: "no_detection"}),
	}, {
		name: "pi4 usb dongle: no access",
		tree: "pi4-usb-ms2109",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errMustNotAsk, FmtErr: eacces},
		},
		want:    usb(hw.Video{Status: "no_access"}),
		wantErr: true,
	}, {
		name: "pi4 usb dongle fixture tree",
		tree: "pi4-usb-ms2109",
		want: usb(hw.Video{Status: "unknown"}),
	}, {
		// A webcam on USB port 1 got video0 before the dongle on port 4,
		// the port PiKVM's rules take the dongle from on this model: the
		// dongle is the capture, and only it is asked.
		name: "pi4 webcam beside the dongle",
		tree: "pi4-usb-webcam-ms2109",
		nodes: map[string]v4l2test.Device{
			"video0": {Err: errMustNotAsk, FmtErr: errMustNotAsk},
			"video2": {Err: errMustNotAsk, Fmt: hw.Format{Width: 1920, Height: 1080, PixelFormat: "MJPG"}},
		},
		want: func() hw.Video {
			v := usb(hw.Video{Source: ref("/dev/video2"), Resolution: &hw.Resolution{Width: 1920, Height: 1080}, Status: "no_detection"})
			v.Device = ref("/dev/video2")
			return v
		}(),
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := captureTree(t, tt.tree)
			var v hw.V4L2 = hw.DeviceV4L2{}
			if tt.nodes != nil {
				v = v4l2test.New(tt.nodes)
			}
			got, err := hw.ReadVideo(f, v)
			if (err != nil) != tt.wantErr || errors.Is(err, errMustNotAsk) || hw.Absent(err) {
				t.Errorf("ReadVideo() error %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadVideo():\n got %s\nwant %s", jsonString(t, got), jsonString(t, tt.want))
			}
		})
	}
}

// TestVideoDevicesUSBPort: a USB video node's port is the USB interface
// its device link leads to, as the kernel names it (udev's %b in PiKVM's
// rules); other nodes have none.
func TestVideoDevicesUSBPort(t *testing.T) {
	devs, err := captureTree(t, "pi4-usb-webcam-ms2109").VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range devs {
		got[d.Node] = d.USBPort
	}
	want := map[string]string{"/dev/video0": "1-1.1:1.0", "/dev/video1": "1-1.1:1.0", "/dev/video2": "1-1.4:1.0", "/dev/video3": "1-1.4:1.0",
		"/dev/video10": "", "/dev/video11": "", "/dev/video12": "", "/dev/video13": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("USB ports %v, want %v", got, want)
	}
}

func TestFindPipeline(t *testing.T) {
	f := captureTree(t, "pi5-tc358743")
	devs, err := f.VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	v := v4l2test.New(map[string]v4l2test.Device{"media0": {Topology: pi5Graph()}, "media1": {Topology: &hw.Topology{}}})
	byNode := map[string]hw.VideoDevice{}
	for _, d := range devs {
		byNode[d.Node] = d
	}
	for _, tt := range []struct {
		node         string
		media        string
		recv, bridge string
	}{
		{"/dev/video0", "/dev/media0", "csi2", "tc358743 11-000f"},
		// The front end's output comes from the bridge too, through csi2
		// and pisp-fe: csi2 is the receiver, the entity the bridge feeds.
		{"/dev/video4", "/dev/media0", "csi2", "tc358743 11-000f"},
		// The PiSP back end's graph holds no bridge.
		{"/dev/video20", "/dev/media1", "", ""},
	} {
		p, err := hw.FindPipeline(f, v, byNode[tt.node])
		if err != nil {
			t.Errorf("FindPipeline(%s) error %v", tt.node, err)
		}
		name := func(s *hw.SubDevice) string {
			if s == nil {
				return ""
			}
			return s.Name
		}
		if p.Media != tt.media || name(p.Receiver) != tt.recv || name(p.Bridge) != tt.bridge {
			t.Errorf("FindPipeline(%s) = %s, %q, %q; want %s, %q, %q", tt.node,
				p.Media, name(p.Receiver), name(p.Bridge), tt.media, tt.recv, tt.bridge)
		}
	}
}

func TestSubAndMediaDevices(t *testing.T) {
	f := captureTree(t, "pi5-tc358743")
	subs, err := f.SubDevices()
	if err != nil {
		t.Fatal(err)
	}
	wantSubs := []hw.SubDevice{
		{Node: "/dev/v4l-subdev0", Name: "csi2", Driver: "rp1-cfe", Dev: "81:8"},
		{Node: "/dev/v4l-subdev1", Name: "pisp-fe", Driver: "rp1-cfe", Dev: "81:9"},
		{Node: "/dev/v4l-subdev2", Name: "tc358743 11-000f", Driver: "tc358743", Dev: "81:10"},
	}
	if !reflect.DeepEqual(subs, wantSubs) {
		t.Errorf("SubDevices():\n got %+v\nwant %+v", subs, wantSubs)
	}
	media, err := f.MediaDevices()
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, m := range media {
		models = append(models, m.Node+" "+m.Model)
	}
	if want := []string{"/dev/media0 rp1-cfe", "/dev/media1 pispbe"}; !reflect.DeepEqual(models, want) {
		t.Errorf("MediaDevices() = %q, want %q", models, want)
	}

	empty := hw.New(t.TempDir())
	if s, err := empty.SubDevices(); err != nil || len(s) != 0 {
		t.Errorf("SubDevices() without sysfs = %v, %v", s, err)
	}
	if m, err := empty.MediaDevices(); err != nil || len(m) != 0 {
		t.Errorf("MediaDevices() without sysfs = %v, %v", m, err)
	}
}

func TestCaptureKind(t *testing.T) {
	for tree, want := range map[string]string{
		"pi5-tc358743":        hw.CaptureCSI,
		"pi4-unicam-tc358743": hw.CaptureCSI,
		"pi4-usb-ms2109":      hw.CaptureUSB,
	} {
		devs, err := captureTree(t, tree).VideoDevices()
		if err != nil {
			t.Fatal(err)
		}
		d, ok := hw.PickCapture(devs, "")
		if !ok || d.Kind() != want {
			t.Errorf("%s: PickCapture() = %+v, %v; Kind() want %q", tree, d, ok, want)
		}
	}
	if k := (hw.VideoDevice{Driver: "bcm2835-codec"}).Kind(); k != "" {
		t.Errorf("Kind() of a codec = %q, want empty", k)
	}
	// vivid's platform device is bound to the driver "vivid" (the booted
	// test's /sys/class/video4linux/video0/device/driver).
	if k := (hw.VideoDevice{Driver: "vivid"}).Kind(); k != hw.CaptureVivid {
		t.Errorf("Kind() of vivid = %q, want %q", k, hw.CaptureVivid)
	}
}
