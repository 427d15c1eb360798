package board

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kvmd/hw"
	"kvmd/internal/fixture"
)

// dt is a device tree with a model and a compatible list.
func dt(model string, compatible ...string) hw.DeviceTree {
	return hw.DeviceTree{Model: model, Compatible: compatible}
}

// pinNames returns "name=GPIOn" for each pin, "!" marking active-low.
func pinNames(pins []hw.PinSpec) []string {
	var out []string
	for _, p := range pins {
		s := p.Name + "=" + p.GPIO
		if p.ActiveLow {
			s += "!"
		}
		out = append(out, s)
	}
	return out
}

var (
	atxDIY    = []string{"atx_power_led=GPIO24", "atx_hdd_led=GPIO22", "atx_power_switch=GPIO23", "atx_reset_switch=GPIO27"}
	wantATXV4 = []string{"atx_power_led=GPIO4", "atx_hdd_led=GPIO5", "atx_power_switch=GPIO23", "atx_reset_switch=GPIO27"}
	v4        = append(slices.Clone(wantATXV4), "v3_usb_breaker=GPIO22", "v4_locator=GPIO12", "v4_const1=GPIO6")
)

func TestIdentify(t *testing.T) {
	pi4 := dt("Raspberry Pi 4 Model B Rev 1.5", "raspberrypi,4-model-b", "brcm,bcm2711")
	cm4 := dt("Raspberry Pi Compute Module 4 Rev 1.1", "raspberrypi,4-compute-module", "brcm,bcm2711")
	v4plus := &Platform{Model: "v4plus", Video: "hdmi", Board: "rpi4"}
	tests := []struct {
		name                string
		facts               Facts
		typ                 string
		model, video, board string
		pins                []string
		ignorePast          bool
	}{
		// Detection alone.
		{name: "pi 4 b, csi bridge: v2 or v3", facts: Facts{DeviceTree: pi4, Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "rpi4", pins: atxDIY},
		{name: "pi 4 b, usb dongle: only v2-hdmiusb", facts: Facts{DeviceTree: pi4, Capture: "hdmiusb"},
			typ: "rpi", model: "v2", video: "hdmiusb", board: "rpi4", pins: atxDIY},
		{name: "pi 4 b, no capture", facts: Facts{DeviceTree: pi4},
			typ: "rpi", board: "rpi4", pins: atxDIY},
		{name: "bare cm4: V4 or another carrier, no pins", facts: Facts{DeviceTree: cm4, Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "rpi4"},
		{name: "cm4s", facts: Facts{DeviceTree: dt("Raspberry Pi Compute Module 4S Rev 1.0", "raspberrypi,4-compute-module-s", "brcm,bcm2711")},
			typ: "rpi", board: "rpi4", pins: atxDIY},
		{name: "pi 400", facts: Facts{DeviceTree: dt("Raspberry Pi 400 Rev 1.0", "raspberrypi,400", "brcm,bcm2711"), Capture: "hdmiusb"},
			typ: "rpi", video: "hdmiusb", board: "rpi4", pins: atxDIY},
		{name: "pi 2 b: v0 or v1, HID pins differ", facts: Facts{DeviceTree: dt("Raspberry Pi 2 Model B Rev 1.1", "raspberrypi,2-model-b", "brcm,bcm2836"), Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "rpi2", pins: atxDIY},
		{name: "pi 2 b v1.2", facts: Facts{DeviceTree: dt("Raspberry Pi 2 Model B Rev 1.2", "raspberrypi,2-model-b-rev2", "brcm,bcm2837")},
			typ: "rpi", board: "rpi2", pins: atxDIY},
		{name: "pi 3 b+", facts: Facts{DeviceTree: dt("Raspberry Pi 3 Model B Plus Rev 1.3", "raspberrypi,3-model-b-plus", "brcm,bcm2837")},
			typ: "rpi", board: "rpi3", pins: atxDIY},
		{name: "pi 3 b", facts: Facts{DeviceTree: dt("Raspberry Pi 3 Model B Rev 1.2", "raspberrypi,3-model-b", "brcm,bcm2837")},
			typ: "rpi", board: "rpi3", pins: atxDIY},
		{name: "zero 2 w", facts: Facts{DeviceTree: dt("Raspberry Pi Zero 2 W Rev 1.0", "raspberrypi,model-zero-2-w", "brcm,bcm2837"), Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "zero2w", pins: atxDIY},
		{name: "zero w, csi: v0 or v2", facts: Facts{DeviceTree: dt("Raspberry Pi Zero W Rev 1.1", "raspberrypi,model-zero-w", "brcm,bcm2835"), Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "zerow", pins: atxDIY},
		{name: "zero w, usb: only v0-hdmiusb", facts: Facts{DeviceTree: dt("Raspberry Pi Zero W Rev 1.1", "raspberrypi,model-zero-w", "brcm,bcm2835"), Capture: "hdmiusb"},
			typ: "rpi", model: "v0", video: "hdmiusb", board: "zerow", pins: append(slices.Clone(atxDIY), "hid_reset=GPIO4")},
		{name: "pi 5", facts: Facts{DeviceTree: dt("Raspberry Pi 5 Model B Rev 1.0", "raspberrypi,5-model-b", "brcm,bcm2712"), Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "rpi5", pins: atxDIY},
		{name: "pi 500", facts: Facts{DeviceTree: dt("Raspberry Pi 500 Rev 1.0", "raspberrypi,500", "brcm,bcm2712")},
			typ: "rpi", board: "rpi5", pins: atxDIY},
		{name: "cm5", facts: Facts{DeviceTree: dt("Raspberry Pi Compute Module 5 Rev 1.0", "raspberrypi,5-compute-module", "brcm,bcm2712")},
			typ: "rpi", board: "rpi5", pins: atxDIY},
		{name: "model only", facts: Facts{DeviceTree: dt("Raspberry Pi 500 Rev 1.0")},
			typ: "rpi", board: "rpi5", pins: atxDIY},
		{name: "unknown pi", facts: Facts{DeviceTree: dt("Raspberry Pi 9 Model Z Rev 1.0", "raspberrypi,9-model-z", "brcm,bcm2799"), Capture: "hdmi"},
			typ: "rpi", video: "hdmi"},
		{name: "pi 1", facts: Facts{DeviceTree: dt("Raspberry Pi Model B Plus Rev 1.2", "raspberrypi,model-b-plus", "brcm,bcm2835")},
			typ: "rpi"},
		{name: "other board", facts: Facts{DeviceTree: dt("Radxa ROCK 5B", "radxa,rock-5b", "rockchip,rk3588"), Capture: "hdmiusb"},
			typ: "generic"},
		{name: "no device tree", facts: Facts{}, typ: "generic"},

		// The platform file wins.
		{name: "V4 Plus", facts: Facts{DeviceTree: cm4, Platform: v4plus, Capture: "hdmi"},
			typ: "rpi", model: "v4plus", video: "hdmi", board: "rpi4", pins: v4, ignorePast: true},
		{name: "V4 Mini", facts: Facts{DeviceTree: cm4, Platform: &Platform{Model: "v4mini", Video: "hdmi", Board: "rpi4"}},
			typ: "rpi", model: "v4mini", video: "hdmi", board: "rpi4", pins: v4, ignorePast: true},
		{name: "v3 on a pi 4 b", facts: Facts{DeviceTree: pi4, Platform: &Platform{Model: "v3", Video: "hdmi", Board: "rpi4"}, Capture: "hdmi"},
			typ: "rpi", model: "v3", video: "hdmi", board: "rpi4", pins: append(slices.Clone(atxDIY), "v3_usb_breaker=GPIO5")},
		{name: "v1 on a pi 2", facts: Facts{DeviceTree: dt("Raspberry Pi 2 Model B Rev 1.1", "raspberrypi,2-model-b"), Platform: &Platform{Model: "v1", Video: "hdmiusb", Board: "rpi2"}},
			typ: "rpi", model: "v1", video: "hdmiusb", board: "rpi2",
			pins: append(slices.Clone(atxDIY), "hid_spi_cs=GPIO7!", "hid_reset=GPIO25!", "hid_power_detect=GPIO16")},
		{name: "file over detection", facts: Facts{DeviceTree: pi4, Platform: &Platform{Model: "v2", Video: "hdmiusb", Board: "rpi4"}, Capture: "hdmi"},
			typ: "rpi", model: "v2", video: "hdmiusb", board: "rpi4", pins: atxDIY},
		{name: "file without a model", facts: Facts{DeviceTree: cm4, Platform: &Platform{Board: "rpi4"}, Capture: "hdmi"},
			typ: "rpi", video: "hdmi", board: "rpi4"},
		{name: "unknown model in the file: no pins", facts: Facts{DeviceTree: pi4, Platform: &Platform{Model: "test_model", Video: "test_video", Board: "test_board"}},
			typ: "rpi", model: "test_model", video: "test_video", board: "test_board"},
		{name: "file on a machine without device tree", facts: Facts{Platform: v4plus},
			typ: "rpi", model: "v4plus", video: "hdmi", board: "rpi4", pins: v4, ignorePast: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Identify(tt.facts)
			got := []any{p.Type, p.Model, p.Video, p.Board, pinNames(p.Pins), p.IgnorePast, p.FromFile}
			want := []any{tt.typ, tt.model, tt.video, tt.board, tt.pins, tt.ignorePast, tt.facts.Platform != nil}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Identify: type, model, video, board, pins, ignore_past, from file\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestV4Pins checks the issue this package exists for: on a V4, GPIO22 is
// not an ATX LED.
func TestV4Pins(t *testing.T) {
	p := Identify(Facts{DeviceTree: dt("Raspberry Pi Compute Module 4 Rev 1.1", "raspberrypi,4-compute-module"),
		Platform: &Platform{Model: "v4plus", Video: "hdmi", Board: "rpi4"}})
	for _, pin := range p.Pins {
		if strings.HasPrefix(pin.Name, "atx_") && (pin.GPIO == "GPIO22" || pin.GPIO == "GPIO24") {
			t.Errorf("V4 Plus reads %s on %s, a DIY pin", pin.Name, pin.GPIO)
		}
	}
}

// TestPinMaps checks the maps themselves: unique names and GPIOs within a
// model, and the hdmi and hdmiusb builds of a model share a map.
func TestPinMaps(t *testing.T) {
	for model, groups := range modelGroups {
		names, gpios := map[string]bool{}, map[string]bool{}
		for _, g := range groups {
			for _, p := range g.pins {
				if names[p.Name] || gpios[p.GPIO] {
					t.Errorf("%s: %s on %s is not unique", model, p.Name, p.GPIO)
				}
				names[p.Name], gpios[p.GPIO] = true, true
			}
		}
		if !names["atx_power_led"] || !names["atx_reset_switch"] {
			t.Errorf("%s has no ATX pins", model)
		}
	}
	for _, h := range hardwares {
		for _, b := range h.builds {
			if _, ok := groupsOf(b.model); !ok {
				t.Errorf("%s: build %s has no pin map", h.model, b.model)
			}
		}
	}
}

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		name, in string
		want     Platform
		wantErr  bool
	}{
		{"as PKGBUILD writes it", "PIKVM_MODEL=v4plus\nPIKVM_VIDEO=hdmi\nPIKVM_BOARD=rpi4\n", Platform{"v4plus", "hdmi", "rpi4"}, false},
		{"kvmd's test file", "PIKVM_MODEL=test_model\nPIKVM_VIDEO=test_video\nPIKVM_BOARD=test_board\n", Platform{"test_model", "test_video", "test_board"}, false},
		{"spaces, crlf, no final newline", "  PIKVM_MODEL = v2 \r\nPIKVM_VIDEO=hdmiusb\r\nPIKVM_BOARD=rpi4", Platform{"v2", "hdmiusb", "rpi4"}, false},
		{"shell quotes", "PIKVM_MODEL=\"v3\"\nPIKVM_BOARD='rpi4'\n", Platform{Model: "v3", Board: "rpi4"}, false},
		{"value with =", "PIKVM_MODEL=a=b\n", Platform{Model: "a=b"}, false},
		{"comments and other keys", "# PiKVM\nOTHER=1\nPIKVM_BOARD=zero2w\nnot a line\n", Platform{Board: "zero2w"}, false},
		{"last wins", "PIKVM_MODEL=v2\nPIKVM_MODEL=v3\n", Platform{Model: "v3"}, false},
		{"empty value", "PIKVM_MODEL=\nPIKVM_BOARD=rpi4\n", Platform{Board: "rpi4"}, false},
		{"empty", "", Platform{}, true},
		{"garbage", "\x00\xff\xfe", Platform{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePlatform([]byte(tt.in))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParsePlatform(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParsePlatform(f *testing.F) {
	f.Add([]byte("PIKVM_MODEL=v4plus\nPIKVM_VIDEO=hdmi\nPIKVM_BOARD=rpi4\n"))
	f.Add([]byte("PIKVM_MODEL=\"v3\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePlatform(b)
		if err == nil && p == (Platform{}) && !strings.Contains(string(b), "=") {
			t.Errorf("ParsePlatform(%q) found keys in a file without =", b)
		}
	})
}

func TestRead(t *testing.T) {
	write := func(t *testing.T, files map[string]string) hw.FS {
		root := t.TempDir()
		for rel, content := range files {
			p := filepath.Join(root, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return hw.New(root)
	}
	cm4 := map[string]string{
		"proc/device-tree/model":      "Raspberry Pi Compute Module 4 Rev 1.1\x00",
		"proc/device-tree/compatible": "raspberrypi,4-compute-module\x00brcm,bcm2711\x00",
	}
	t.Run("no platform file", func(t *testing.T) {
		f, err := Read(write(t, cm4))
		if err != nil || f.Platform != nil || f.DeviceTree.Model != "Raspberry Pi Compute Module 4 Rev 1.1" || f.Capture != "" {
			t.Errorf("Read = %+v, %v", f, err)
		}
	})
	t.Run("platform file", func(t *testing.T) {
		files := map[string]string{PlatformPath: "PIKVM_MODEL=v4plus\nPIKVM_VIDEO=hdmi\nPIKVM_BOARD=rpi4\n"}
		for k, v := range cm4 {
			files[k] = v
		}
		f, err := Read(write(t, files))
		if err != nil || f.Platform == nil || *f.Platform != (Platform{"v4plus", "hdmi", "rpi4"}) {
			t.Errorf("Read = %+v, %v", f, err)
		}
	})
	t.Run("broken platform file", func(t *testing.T) {
		f, err := Read(write(t, map[string]string{PlatformPath: "nothing here\n"}))
		if !errors.Is(err, errNoKeys) || f.Platform != nil {
			t.Errorf("Read = %+v, %v; want %v", f, err, errNoKeys)
		}
	})
	t.Run("empty root", func(t *testing.T) {
		f, err := Read(hw.New(t.TempDir()))
		if err != nil || fmt.Sprint(f) != fmt.Sprint(Facts{}) {
			t.Errorf("Read = %+v, %v", f, err)
		}
	})
}

func TestCaptureVideo(t *testing.T) {
	for _, tt := range []struct {
		devs []hw.VideoDevice
		want string
	}{
		{nil, ""},
		{[]hw.VideoDevice{{Node: "/dev/video10", Name: "bcm2835-codec-decode", Driver: "bcm2835-codec"}}, ""},
		{[]hw.VideoDevice{{Node: "/dev/video0", Name: "unicam-image", Driver: "unicam"}}, "hdmi"},
		{[]hw.VideoDevice{{Node: "/dev/video0", Name: "rp1-cfe-csi2_ch0", Driver: "rp1-cfe"}}, "hdmi"},
		{[]hw.VideoDevice{{Node: "/dev/video0", Name: "USB Video: USB Video", Driver: "uvcvideo"}}, "hdmiusb"},
	} {
		if got := CaptureVideo(tt.devs, ""); got != tt.want {
			t.Errorf("CaptureVideo(%v) = %q, want %q", tt.devs, got, tt.want)
		}
	}
}

func TestDemoArchive(t *testing.T) {
	if len(DemoArchive) == 0 {
		t.Fatal("the demo archive is not embedded")
	}
}

// TestFixtures identifies the machine of every bundled tree, reading it as
// the daemon does (board.Read), and checks what hw.platform will say.
func TestFixtures(t *testing.T) {
	want := map[string]struct {
		typ, model, video, board string
		pins                     []string
	}{
		"rpi4":       {"rpi", "", "hdmi", "rpi4", atxDIY},
		"rpi4-612":   {"rpi", "", "", "rpi4", atxDIY},
		"rpi4-usb":   {"rpi", "v2", "hdmiusb", "rpi4", atxDIY},
		"rpi5":       {"rpi", "", "hdmi", "rpi5", atxDIY},
		"cm4-v4plus": {"rpi", "v4plus", "hdmi", "rpi4", v4},
		"cm5":        {"rpi", "", "", "rpi5", atxDIY},
		"rpi2":       {"rpi", "", "hdmi", "rpi2", atxDIY},
		"zero2w":     {"rpi", "", "hdmi", "zero2w", atxDIY},
		"zerow":      {"rpi", "", "hdmi", "zerow", atxDIY},
		"x86":        {"generic", "", "", "", nil},
	}
	archives, err := filepath.Glob(filepath.Join("testdata", "*.ttar"))
	if err != nil || len(archives) == 0 {
		t.Fatalf("no trees: %v", err)
	}
	for _, a := range archives {
		name := strings.TrimSuffix(filepath.Base(a), ".ttar")
		t.Run(name, func(t *testing.T) {
			w, ok := want[name]
			if !ok {
				t.Fatalf("%s has no expectations here", a)
			}
			root := t.TempDir()
			if err := fixture.UnpackFile(a, root); err != nil {
				t.Fatal(err)
			}
			f, err := Read(hw.New(root))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			p := Identify(f)
			got := []any{p.Type, p.Model, p.Video, p.Board, pinNames(p.Pins)}
			if exp := []any{w.typ, w.model, w.video, w.board, w.pins}; !reflect.DeepEqual(got, exp) {
				t.Errorf("type, model, video, board, pins\n got %q\nwant %q", got, exp)
			}
		})
	}
}
