package hw

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// v4l2Node adds /dev/videoN's sysfs entry to files and links.
func v4l2Node(files, links map[string]string, n int, name string, index int, driver string) {
	d := "sys/class/video4linux/video" + strconv.Itoa(n) + "/"
	files[d+"name"] = name + "\n"
	files[d+"index"] = strconv.Itoa(index) + "\n"
	files[d+"dev"] = "81:" + strconv.Itoa(n) + "\n"
	if driver != "" {
		links[d+"device/driver"] = "../../../../bus/platform/drivers/" + driver
	}
}

// pi4Video is a Pi 4 with a TC358743 on the CSI port: unicam's image and
// embedded-data nodes, and the VideoCore codec and ISP nodes.
func pi4Video() (files, links map[string]string) {
	files, links = map[string]string{}, map[string]string{}
	v4l2Node(files, links, 0, "unicam-image", 0, "unicam")
	v4l2Node(files, links, 1, "unicam-embedded", 1, "unicam")
	v4l2Node(files, links, 10, "bcm2835-codec-decode", 0, "bcm2835-codec")
	v4l2Node(files, links, 11, "bcm2835-codec-encode", 1, "bcm2835-codec")
	v4l2Node(files, links, 12, "bcm2835-codec-isp", 2, "bcm2835-codec")
	v4l2Node(files, links, 13, "bcm2835-isp0-output0", 0, "bcm2835-isp")
	v4l2Node(files, links, 2, "unknown-node", 0, "")
	return files, links
}

func TestVideoDevices(t *testing.T) {
	files, links := pi4Video()
	got, err := hwTree(t, files, links).VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	want := []VideoDevice{
		{Node: "/dev/video0", Name: "unicam-image", Index: 0, Driver: "unicam", Dev: "81:0"},
		{Node: "/dev/video1", Name: "unicam-embedded", Index: 1, Driver: "unicam", Dev: "81:1"},
		{Node: "/dev/video2", Name: "unknown-node", Index: 0, Dev: "81:2"},
		{Node: "/dev/video10", Name: "bcm2835-codec-decode", Index: 0, Driver: "bcm2835-codec", Dev: "81:10"},
		{Node: "/dev/video11", Name: "bcm2835-codec-encode", Index: 1, Driver: "bcm2835-codec", Dev: "81:11"},
		{Node: "/dev/video12", Name: "bcm2835-codec-isp", Index: 2, Driver: "bcm2835-codec", Dev: "81:12"},
		{Node: "/dev/video13", Name: "bcm2835-isp0-output0", Index: 0, Driver: "bcm2835-isp", Dev: "81:13"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("VideoDevices():\n got %+v\nwant %+v", got, want)
	}
}

// TestVideoDevicesKept: a node's attributes are read once while its entry
// stays; one replaced (a dongle unplugged, another plugged in as the same
// videoN) or removed is seen at the next listing.
func TestVideoDevicesKept(t *testing.T) {
	files, links := pi4Video()
	f := hwTree(t, files, links)
	first, err := f.VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	// An attribute rewritten in place is not read again (sysfs never
	// does this; it shows the listing came from what was kept).
	if err := os.WriteFile(f.Path("sys/class/video4linux/video10/name"), []byte("rewritten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// video0 replaced by a USB dongle's node: made aside first, so that it
	// cannot get the old entry's inode.
	nf, nl := map[string]string{}, map[string]string{}
	v4l2Node(nf, nl, 0, "USB3 Video", 0, "uvcvideo")
	const dir, aside = "sys/class/video4linux/video0/", "sys/class/video4linux/video0.new/"
	if err := os.MkdirAll(f.Path(aside+"device"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, c := range nf {
		if err := os.WriteFile(f.Path(aside+p[len(dir):]), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(nl[dir+"device/driver"], f.Path(aside+"device/driver")); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		os.RemoveAll(f.Path("sys/class/video4linux/video0")),
		os.Rename(f.Path("sys/class/video4linux/video0.new"), f.Path("sys/class/video4linux/video0")),
		os.RemoveAll(f.Path("sys/class/video4linux/video1")),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	got, err := f.VideoDevices()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(first)
	// USBPort is the device directory's name: here not a link into a USB
	// interface's.
	want[0] = VideoDevice{Node: "/dev/video0", Name: "USB3 Video", Index: 0, Driver: "uvcvideo", Dev: "81:0", USBPort: "device"}
	want = slices.Delete(want, 1, 2)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the changes:\n got %+v\nwant %+v", got, want)
	}
}

func TestVideoDevicesEdges(t *testing.T) {
	t.Run("no video4linux", func(t *testing.T) {
		f := hwTree(t, map[string]string{"sys/class/udc/": ""}, nil)
		if got, err := f.VideoDevices(); !Absent(err) {
			t.Errorf("VideoDevices() = %v, %v; want an error wrapping fs.ErrNotExist", got, err)
		}
	})
	t.Run("empty class", func(t *testing.T) {
		f := hwTree(t, map[string]string{"sys/class/video4linux/": ""}, nil)
		if got, err := f.VideoDevices(); err != nil || len(got) != 0 {
			t.Errorf("VideoDevices() = %v, %v; want none", got, err)
		}
	})
	t.Run("index missing, odd names skipped", func(t *testing.T) {
		f := hwTree(t, map[string]string{
			"sys/class/video4linux/video3/name":  "old\n",
			"sys/class/video4linux/video03/name": "not a node name\n",
			"sys/class/video4linux/videox/name":  "not a node name\n",
			"sys/class/video4linux/video/name":   "not a node name\n",
		}, nil)
		got, err := f.VideoDevices()
		want := []VideoDevice{{Node: "/dev/video3", Name: "old"}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("VideoDevices() = %+v, %v; want %+v", got, err, want)
		}
	})
	t.Run("index malformed", func(t *testing.T) {
		f := hwTree(t, map[string]string{"sys/class/video4linux/video0/index": "zero\n"}, nil)
		if got, err := f.VideoDevices(); err == nil || Absent(err) {
			t.Errorf("VideoDevices() = %v, %v; want a malformed-value error", got, err)
		}
	})
}

func TestPickCapture(t *testing.T) {
	dev := func(n int, name string, index int, driver string) VideoDevice {
		return VideoDevice{Node: "/dev/video" + strconv.Itoa(n), Name: name, Index: index, Driver: driver}
	}
	unicam := dev(0, "unicam-image", 0, "unicam")
	unicamMeta := dev(1, "unicam-embedded", 1, "unicam")
	cfe := dev(0, "rp1-cfe-csi2_ch0", 0, "rp1-cfe")
	uvc := dev(0, "USB Video: USB Video", 0, "uvcvideo")
	uvcMeta := dev(1, "USB Video: USB Video", 1, "uvcvideo")
	uvc2 := dev(2, "USB3.0 Capture", 0, "uvcvideo")
	codec := dev(10, "bcm2835-codec-decode", 0, "bcm2835-codec")
	isp := dev(13, "bcm2835-isp0-output0", 0, "bcm2835-isp")
	pisp := dev(20, "pispbe-input", 0, "pispbe")
	hevc := dev(19, "rpivid", 0, "rpivid")
	// A webcam at video0 on USB port 1 of a Pi 4, and the dongle at
	// video2 on port 4, the port PiKVM's rules take it from (SOURCES.md:
	// pi4-usb-webcam-ms2109).
	port := func(d VideoDevice, p string) VideoDevice { d.USBPort = p; return d }
	webcam := port(dev(0, "USB 2.0 Camera: USB Camera", 0, "uvcvideo"), "1-1.1:1.0")
	webcamMeta := port(dev(1, "USB 2.0 Camera: USB Camera", 1, "uvcvideo"), "1-1.1:1.0")
	dongle := port(dev(2, "USB Video: USB Video", 0, "uvcvideo"), "1-1.4:1.0")
	dongleMeta := port(dev(3, "USB Video: USB Video", 1, "uvcvideo"), "1-1.4:1.0")
	dongleUSB3 := port(dev(2, "USB3.0 Capture", 0, "uvcvideo"), "2-1:1.0")
	pi4, pi3p := "Raspberry Pi 4 Model B Rev 1.1", "Raspberry Pi 3 Model B Plus Rev 1.3"
	vivid := dev(3, "vivid-000-vid-cap", 0, "vivid")
	for _, tt := range []struct {
		name  string
		devs  []VideoDevice
		model string
		want  VideoDevice
		ok    bool
	}{
		{"pi4 webcam before the dongle in PiKVM's port", []VideoDevice{webcam, webcamMeta, dongle, dongleMeta, codec}, pi4, dongle, true},
		{"pi4 Rev 1.5, the dongle in the USB 3 port", []VideoDevice{webcam, webcamMeta, dongleUSB3}, "Raspberry Pi 4 Model B Rev 1.5", dongleUSB3, true},
		{"pi4 the dongle's metadata node in the port is no capture", []VideoDevice{webcam, webcamMeta, dongleMeta}, pi4, webcam, true},
		{"pi3 b+ port 1-1.2", []VideoDevice{webcam, port(dev(2, "USB Video: USB Video", 0, "uvcvideo"), "1-1.2:1.0")}, pi3p,
			port(dev(2, "USB Video: USB Video", 0, "uvcvideo"), "1-1.2:1.0"), true},
		{"pi3 b+ does not take the pi4's port", []VideoDevice{webcam, dongle}, pi3p, webcam, true},
		{"nothing in PiKVM's port: the first", []VideoDevice{webcam, port(dev(2, "USB Video: USB Video", 0, "uvcvideo"), "1-1.3:1.0")}, pi4, webcam, true},
		{"a model PiKVM's check does not know: the first", []VideoDevice{webcam, dongle}, "Raspberry Pi 4 Model B Rev 1.3", webcam, true},
		{"no device tree: the first", []VideoDevice{webcam, dongle}, "", webcam, true},
		{"csi before a dongle in PiKVM's port", []VideoDevice{dongle, dev(4, "unicam-image", 0, "unicam")}, pi4, dev(4, "unicam-image", 0, "unicam"), true},
		{"pi4 tc358743", []VideoDevice{unicam, unicamMeta, codec, isp}, "", unicam, true},
		{"pi5 tc358743", []VideoDevice{cfe, dev(1, "rp1-cfe-csi2_ch1", 1, "rp1-cfe"), dev(4, "rp1-cfe-fe_image0", 4, "rp1-cfe"), hevc, pisp}, "", cfe, true},
		{"usb dongle", []VideoDevice{uvc, uvcMeta, codec, isp}, "", uvc, true},
		{"csi before a usb dongle with a lower node", []VideoDevice{uvc, uvcMeta, dev(2, "unicam-image", 0, "unicam")}, "", dev(2, "unicam-image", 0, "unicam"), true},
		{"first of two dongles", []VideoDevice{uvc, uvcMeta, uvc2}, "", uvc, true},
		{"vivid, a test machine's capture", []VideoDevice{codec, vivid}, "", vivid, true},
		{"a real dongle before vivid", []VideoDevice{vivid, uvc2}, "", uvc2, true},
		{"codec and isp only", []VideoDevice{codec, isp, pisp, hevc}, "", VideoDevice{}, false},
		{"metadata node only", []VideoDevice{unicamMeta, uvcMeta}, "", VideoDevice{}, false},
		{"none", nil, "", VideoDevice{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PickCapture(tt.devs, tt.model)
			if ok != tt.ok || got != tt.want {
				t.Errorf("PickCapture() = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestVideoNumber(t *testing.T) {
	for in, want := range map[string]int{"video0": 0, "video10": 10, "video255": 255} {
		if n, ok := videoNumber(in); !ok || n != want {
			t.Errorf("videoNumber(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, in := range []string{"video", "video-1", "video01", "videox", "vbi0", "video+1", "video 1"} {
		if n, ok := videoNumber(in); ok {
			t.Errorf("videoNumber(%q) = %d, true; want not a node", in, n)
		}
	}
}
