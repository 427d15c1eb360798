package info

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
)

func TestHardware(t *testing.T) {
	fs := hw.New(unpack(t, "rpi4"))
	fake := &v4l2test.Fake{}
	fake.Set(fs.Path("dev/video0"), v4l2test.Device{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}})
	now := time.Unix(1_800_000_000, 0)
	s := New(Config{FS: fs, V4L2: fake, Now: func() time.Time { return now }})
	h := s.Hardware()

	if got := h.Health.Temp.CPU; got == nil || *got != 62.322 {
		t.Errorf("CPU temperature %v, want 62.322", deref(got))
	}
	if got := h.Health.CPU.Percent; got == nil || *got != 1 { // busy 4274 of 294137 ticks since boot
		t.Errorf("CPU percent %v, want 1", deref(got))
	}
	m := h.Health.Mem
	if m.Total == nil || *m.Total != 3976179712 || m.Available == nil || *m.Available != 3494125568 || m.Percent == nil || *m.Percent != 12.1 {
		t.Errorf("memory %v %v %v, want 3976179712 3494125568 12.1", deref(m.Total), deref(m.Available), deref(m.Percent))
	}
	want := map[string]NowPast{"undervoltage": {}, "freq_capped": {}, "throttled": {}}
	if th := h.Health.Throttling; th == nil || !reflect.DeepEqual(th.ParsedFlags, want) {
		t.Errorf("throttling %+v, want flags %v", th, want)
	}
	if h.USB == nil || !h.USB.Connected {
		t.Errorf("USB %+v, want connected", h.USB)
	}
	if v := h.Video; v == nil || deref(v.Signal) != true || v.Resolution == nil || *v.Resolution != (hw.Resolution{Width: 1920, Height: 1080}) || deref(v.FPS) != 60.0 {
		t.Errorf("video %+v, want a 1920x1080 signal at 60 Hz", v)
	}
	if len(h.GPIO) != 4 {
		t.Errorf("GPIO %v, want the profile's 4 pins", h.GPIO)
	}
	if got := h.Uptime.Total; got == nil || *got != 2911 {
		t.Errorf("uptime %v, want 2911", deref(got))
	}

	// The values come from the same cache as the JSON: within the TTL a
	// change on disk shows in neither, after it in both.
	if err := os.WriteFile(fs.Path("proc/uptime"), []byte("5000.25 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uptimeJSON := func() any { return get(decode(t, s.Result([]string{"uptime"}, true)), "uptime", "total") }
	if got, js := deref(s.Hardware().Uptime.Total), uptimeJSON(); got != int64(2911) || js != 2911.0 {
		t.Errorf("within the TTL: uptime %v, JSON %v; want the cached 2911 in both", got, js)
	}
	now = now.Add(2 * time.Second)
	if got, js := deref(s.Hardware().Uptime.Total), uptimeJSON(); got != int64(5000) || js != 5000.0 {
		t.Errorf("after the TTL: uptime %v, JSON %v; want 5000 in both", got, js)
	}

	// A generic x86 VM: no thermal zone, firmware flags, gadget, capture
	// device or GPIO, but memory and uptime.
	g := New(Config{FS: hw.New(unpack(t, "x86")), V4L2: &v4l2test.Fake{}}).Hardware()
	if g.Health.Temp.CPU != nil || g.Health.Throttling != nil || g.Video != nil || len(g.GPIO) != 0 {
		t.Errorf("x86: temperature %v, throttling %v, video %v, GPIO %v; want none",
			deref(g.Health.Temp.CPU), g.Health.Throttling, g.Video, g.GPIO)
	}
	if g.USB == nil || g.USB.Status != hw.USBNoUDC || g.USB.Gadget != nil {
		t.Errorf("x86: USB %+v, want no device controller", g.USB)
	}
	if g.Health.Mem.Total == nil || g.Uptime.Total == nil {
		t.Errorf("x86: memory %v or uptime %v missing", deref(g.Health.Mem.Total), deref(g.Uptime.Total))
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// usbDongleRoot is the Raspberry Pi 4 tree with its CSI capture replaced by
// a USB capture dongle (hw/testdata/pi4-usb-ms2109.ttar).
func usbDongleRoot(t *testing.T) string {
	t.Helper()
	root := unpack(t, "rpi4")
	for _, d := range []string{"sys/class/video4linux", "sys/devices/platform/soc/fe801000.csi",
		"sys/devices/platform/soc/fe00b840.mailbox", "sys/devices/platform/scb/feb10000.codec"} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fixture.UnpackFile(filepath.Join("..", "hw", "testdata", "pi4-usb-ms2109.ttar"), root); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestPlatformVideo(t *testing.T) {
	for _, tt := range []struct {
		name string
		root string
		want any
	}{
		{"csi bridge", unpack(t, "rpi4"), "hdmi"},
		{"usb dongle", usbDongleRoot(t), "hdmiusb"},
		{"generic", unpack(t, "x86"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Config{FS: hw.New(tt.root), V4L2: &v4l2test.Fake{}})
			res := decode(t, s.Result([]string{"hw"}, true))
			if got := get(res, "hw", "platform", "video"); got != tt.want {
				t.Errorf("hw.platform.video = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestVideoUSBDongle(t *testing.T) {
	fake := v4l2test.New(map[string]v4l2test.Device{
		"video0": {Err: hw.ErrNoSignal, Fmt: hw.Format{Width: 1920, Height: 1080, PixelFormat: "MJPG"}},
	})
	s := New(Config{FS: hw.New(usbDongleRoot(t)), V4L2: fake})
	v := get(decode(t, s.Result([]string{"video"}, false)), "video")
	want := map[string]any{
		"device": "/dev/video0", "driver": "uvcvideo", "card": "USB Video: USB Video",
		"media": nil, "receiver": nil, "bridge": nil, "source": "/dev/video0",
		"signal": nil, "resolution": map[string]any{"width": 1920.0, "height": 1080.0}, "fps": nil,
		"status": "no_detection",
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("video = %v\nwant %v", v, want)
	}
}

// TestResultCache: within the TTL a set of categories gives the same
// bytes, made once (the cache is there), equal to a fresh assembly; each
// set and layout its own; a category rebuilt after the TTL gives new
// bytes.
func TestResultCache(t *testing.T) {
	fs := hw.New(unpack(t, "rpi4"))
	now := time.Unix(1_800_000_000, 0)
	s := New(Config{FS: fs, V4L2: &v4l2test.Fake{}, Now: func() time.Time { return now }})
	sets := map[string][]string{}
	for _, legacy := range []bool{true, false} {
		for _, arg := range []string{"", "hw", "uptime", "auth,uptime", "health"} {
			if legacy == false && arg == "hw" {
				continue
			}
			cats, err := ParseFields(arg, legacy)
			if err != nil {
				t.Fatal(err)
			}
			first, again := s.Result(cats, legacy), s.Result(cats, legacy)
			if &first[0] != &again[0] {
				t.Errorf("%q legacy=%v: made twice within the TTL", arg, legacy)
			}
			if want := s.assemble(cats, legacy); string(first) != string(want) {
				t.Errorf("%q legacy=%v: cached %s, assembled %s", arg, legacy, first, want)
			}
			sets[fmt.Sprint(arg, legacy)] = cats
		}
	}
	// Not in ParseFields' order: assembled each time, in the order asked.
	if b := s.Result([]string{"uptime", "auth"}, true); !strings.HasPrefix(string(b), `{"uptime":`) {
		t.Errorf("unsorted categories: %s", b)
	}

	cats := sets[fmt.Sprint("auth,uptime", true)]
	before := s.Result(cats, true)
	if err := os.WriteFile(fs.Path("proc/uptime"), []byte("5000.25 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	after := s.Result(cats, true)
	if string(before) == string(after) || get(decode(t, after), "uptime", "total") != 5000.0 {
		t.Errorf("after the TTL: %s, want uptime 5000 (before: %s)", after, before)
	}
}
