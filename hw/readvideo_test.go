package hw_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
)

// videoRoot builds sysfs's video4linux class for nodes given as
// "videoN" → {name, index, driver}.
func videoRoot(t *testing.T, nodes map[string][3]string) hw.FS {
	t.Helper()
	root := t.TempDir()
	for node, n := range nodes {
		d := filepath.Join(root, "sys/class/video4linux", node)
		if err := os.MkdirAll(filepath.Join(d, "device"), 0o755); err != nil {
			t.Fatal(err)
		}
		for file, content := range map[string]string{"name": n[0], "index": n[1]} {
			if err := os.WriteFile(filepath.Join(d, file), []byte(content+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("../../../../bus/platform/drivers/"+n[2], filepath.Join(d, "device/driver")); err != nil {
			t.Fatal(err)
		}
	}
	return hw.New(root)
}

var (
	tc358743 = map[string][3]string{
		"video0":  {"unicam-image", "0", "unicam"},
		"video1":  {"unicam-embedded", "1", "unicam"},
		"video10": {"bcm2835-codec-decode", "0", "bcm2835-codec"},
	}
	dongle = map[string][3]string{
		"video0": {"USB Video: USB Video", "0", "uvcvideo"},
		"video1": {"USB Video: USB Video", "1", "uvcvideo"},
	}
)

func ref[T any](v T) *T { return &v }

// errMustNotAsk fails a test if ReadVideo queries DV timings of a USB device.
var errMustNotAsk = errors.New("DV timings must not be asked of uvcvideo")

func TestReadVideo(t *testing.T) {
	unicam := func(v hw.Video) hw.Video {
		v.Device, v.Driver, v.Card = ref("/dev/video0"), ref("unicam"), ref("unicam-image")
		if v.Status != "unknown" {
			v.Source = ref("/dev/video0")
		}
		return v
	}
	uvc := func(v hw.Video) hw.Video {
		v.Device, v.Driver, v.Card = ref("/dev/video0"), ref("uvcvideo"), ref("USB Video: USB Video")
		if v.Resolution != nil {
			v.Source = ref("/dev/video0")
		}
		return v
	}
	for _, tt := range []struct {
		name    string
		nodes   map[string][3]string
		dev     *v4l2test.Device // nil: no device node below the root
		want    hw.Video
		wantErr bool
	}{{
		name:  "1080p60",
		nodes: tc358743,
		dev:   &v4l2test.Device{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}},
		want:  unicam(hw.Video{Signal: ref(true), Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(60.0), Status: "ok"}),
	}, {
		name:  "fps rounded",
		nodes: tc358743,
		dev:   &v4l2test.Device{Timings: hw.Timings{Width: 1280, Height: 720, FPS: 60 * 1000.0 / 1001}},
		want:  unicam(hw.Video{Signal: ref(true), Resolution: &hw.Resolution{Width: 1280, Height: 720}, FPS: ref(59.94), Status: "ok"}),
	}, {
		name:  "no fps",
		nodes: tc358743,
		dev:   &v4l2test.Device{Timings: hw.Timings{Width: 640, Height: 480}},
		want:  unicam(hw.Video{Signal: ref(true), Resolution: &hw.Resolution{Width: 640, Height: 480}, Status: "ok"}),
	}, {
		name:  "no signal",
		nodes: tc358743,
		dev:   &v4l2test.Device{Err: hw.ErrNoSignal},
		want:  unicam(hw.Video{Signal: ref(false), Status: "no_signal"}),
	}, {
		name:  "empty timings",
		nodes: tc358743,
		dev:   &v4l2test.Device{},
		want:  unicam(hw.Video{Signal: ref(false), Status: "no_signal"}),
	}, {
		name:  "no lock",
		nodes: tc358743,
		dev:   &v4l2test.Device{Err: fmt.Errorf("DV timings of /dev/video0: %w", hw.ErrNoLock)},
		want:  unicam(hw.Video{Signal: ref(true), Status: "no_lock"}),
	}, {
		name:  "out of range",
		nodes: tc358743,
		dev:   &v4l2test.Device{Err: hw.ErrOutOfRange},
		want:  unicam(hw.Video{Signal: ref(true), Status: "out_of_range"}),
	}, {
		name:  "fixture tree without a node",
		nodes: tc358743,
		want:  unicam(hw.Video{Status: "unknown"}),
	}, {
		name:    "query fails",
		nodes:   tc358743,
		dev:     &v4l2test.Device{Err: errors.New("ioctl: input/output error")},
		want:    unicam(hw.Video{Status: "unknown"}),
		wantErr: true,
	}, {
		name:  "csi camera sensor: no DV timings, the format",
		nodes: tc358743,
		dev: &v4l2test.Device{Err: hw.ErrNotSupported,
			Fmt: hw.Format{Width: 1640, Height: 1232, FPS: 30, PixelFormat: "pBAA"}},
		want: unicam(hw.Video{Resolution: &hw.Resolution{Width: 1640, Height: 1232}, FPS: ref(30.0), Status: "no_detection"}),
	}, {
		name:  "usb dongle",
		nodes: dongle,
		dev: &v4l2test.Device{Err: errMustNotAsk,
			Fmt: hw.Format{Width: 1920, Height: 1080, FPS: 30, PixelFormat: "MJPG"}},
		want: uvc(hw.Video{Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: ref(30.0), Status: "no_detection"}),
	}, {
		name:  "usb dongle without a frame rate",
		nodes: dongle,
		dev:   &v4l2test.Device{Err: errMustNotAsk, Fmt: hw.Format{Width: 1280, Height: 720, PixelFormat: "YUYV"}},
		want:  uvc(hw.Video{Resolution: &hw.Resolution{Width: 1280, Height: 720}, Status: "no_detection"}),
	}, {
		name:  "usb dongle: no format",
		nodes: dongle,
		dev:   &v4l2test.Device{Err: errMustNotAsk, FmtErr: hw.ErrNotSupported},
		want:  uvc(hw.Video{Status: "no_detection"}),
	}, {
		name:    "usb dongle: format fails",
		nodes:   dongle,
		dev:     &v4l2test.Device{Err: errMustNotAsk, FmtErr: errors.New("ioctl: device busy")},
		want:    uvc(hw.Video{Status: "unknown"}),
		wantErr: true,
	}, {
		name:  "usb dongle on a fixture tree",
		nodes: dongle,
		want:  uvc(hw.Video{Status: "unknown"}),
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := videoRoot(t, tt.nodes)
			fake := &v4l2test.Fake{}
			if tt.dev != nil {
				// Keyed by the host path ReadVideo must ask about.
				fake.Set(f.Path("dev/video0"), *tt.dev)
			}
			got, err := hw.ReadVideo(f, fake)
			if (err != nil) != tt.wantErr || errors.Is(err, errMustNotAsk) || hw.Absent(err) {
				t.Errorf("ReadVideo() error %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadVideo():\n got %s\nwant %s", jsonString(t, got), jsonString(t, tt.want))
			}
		})
	}
}

func TestReadVideoRealDeviceOnFixture(t *testing.T) {
	// The real V4L2 on a fixture tree: no node below the root, unknown.
	got, err := hw.ReadVideo(videoRoot(t, tc358743), hw.DeviceV4L2{})
	want := hw.Video{Device: ref("/dev/video0"), Driver: ref("unicam"), Card: ref("unicam-image"), Status: "unknown"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadVideo() = %s, %v; want %s", jsonString(t, got), err, jsonString(t, want))
	}
}

func TestReadVideoAbsent(t *testing.T) {
	for name, f := range map[string]hw.FS{
		"no video4linux": hw.New(t.TempDir()),
		"no capture":     videoRoot(t, map[string][3]string{"video10": {"bcm2835-codec-decode", "0", "bcm2835-codec"}}),
		"metadata only":  videoRoot(t, map[string][3]string{"video1": {"unicam-embedded", "1", "unicam"}}),
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := hw.ReadVideo(f, &v4l2test.Fake{}); !hw.Absent(err) || got != (hw.Video{}) {
				t.Errorf("ReadVideo() = %+v, %v; want zero and fs.ErrNotExist", got, err)
			}
		})
	}
}

func TestVideoJSON(t *testing.T) {
	f := videoRoot(t, tc358743)
	fake := v4l2test.New(map[string]v4l2test.Device{"video0": {Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}}})
	got, err := hw.ReadVideo(f, fake)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"device":"/dev/video0","driver":"unicam","card":"unicam-image","media":null,"receiver":null,` +
		`"bridge":null,"source":"/dev/video0","signal":true,` +
		`"resolution":{"width":1920,"height":1080},"fps":60,"status":"ok"}`
	if j := jsonString(t, got); j != want {
		t.Errorf("JSON\n got %s\nwant %s", j, want)
	}
	fake.Set("video0", v4l2test.Device{Err: hw.ErrNoSignal})
	got, err = hw.ReadVideo(f, fake)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"device":"/dev/video0","driver":"unicam","card":"unicam-image","media":null,"receiver":null,` +
		`"bridge":null,"source":"/dev/video0","signal":false,` +
		`"resolution":null,"fps":null,"status":"no_signal"}`
	if j := jsonString(t, got); j != want {
		t.Errorf("JSON\n got %s\nwant %s", j, want)
	}
}

// TestReadVideoWhileSignalChanges reads while the fake's signal comes and
// goes, as a demo daemon does (run with -race).
func TestReadVideoWhileSignalChanges(t *testing.T) {
	f := videoRoot(t, tc358743)
	fake := &v4l2test.Fake{}
	states := []v4l2test.Device{
		{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}},
		{Err: hw.ErrNoSignal},
		{Err: hw.ErrNoLock},
		{Timings: hw.Timings{Width: 1280, Height: 720, FPS: 50}},
	}
	allowed := map[string]bool{"ok": true, "no_signal": true, "no_lock": true, "unknown": true}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%5 == 4 {
				fake.Remove("video0")
				continue
			}
			fake.Set("video0", states[i%len(states)])
		}
	}()
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 200 {
				v, err := hw.ReadVideo(f, fake)
				if err != nil || !allowed[v.Status] {
					t.Errorf("ReadVideo() = %+v, %v", v, err)
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	wg.Wait()
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
