package board

import (
	"path/filepath"
	"testing"

	"kvmd/hw"
	"kvmd/internal/fixture"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		dt   hw.DeviceTree
		want string
	}{
		{"pi4 by compatible", hw.DeviceTree{Compatible: []string{"raspberrypi,4-model-b", "brcm,bcm2711"}}, "rpi4"},
		{"pi400", hw.DeviceTree{Compatible: []string{"raspberrypi,400", "brcm,bcm2711"}}, "rpi4"},
		{"pi5", hw.DeviceTree{Compatible: []string{"raspberrypi,5-model-b", "brcm,bcm2712"}}, "rpi5"},
		{"zero 2 w", hw.DeviceTree{Compatible: []string{"raspberrypi,model-zero-2-w", "brcm,bcm2837"}}, "zero2w"},
		{"cm4", hw.DeviceTree{Compatible: []string{"raspberrypi,4-compute-module", "brcm,bcm2711"}}, "cm4"},
		{"zero w", hw.DeviceTree{Compatible: []string{"raspberrypi,model-zero-w", "brcm,bcm2835"}}, "zerow"},
		{"model only", hw.DeviceTree{Model: "Raspberry Pi 4 Model B Rev 1.4"}, "rpi4"},
		{"model zero 2", hw.DeviceTree{Model: "Raspberry Pi Zero 2 W Rev 1.0"}, "zero2w"},
		{"unknown pi", hw.DeviceTree{Model: "Raspberry Pi 9 Model Z"}, "rpi"},
		{"other board", hw.DeviceTree{Model: "Radxa ROCK 5B", Compatible: []string{"radxa,rock-5b"}}, "generic"},
		{"no device tree", hw.DeviceTree{}, "generic"},
	}
	for _, tt := range tests {
		if got := Detect(tt.dt).Board; got != tt.want {
			t.Errorf("%s: Detect = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestFixtures detects the board of every bundled fixture tree.
func TestFixtures(t *testing.T) {
	want := map[string]string{"rpi4": "rpi4", "rpi5": "rpi5", "zero2w": "zero2w", "x86": "generic"}
	for name, board := range want {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if err := fixture.UnpackFile(filepath.Join("testdata", name+".ttar"), root); err != nil {
				t.Fatal(err)
			}
			dt, err := hw.New(root).DeviceTree()
			if board != "generic" && err != nil {
				t.Fatal(err)
			}
			p := Detect(dt)
			if p.Board != board {
				t.Errorf("board %q, want %q", p.Board, board)
			}
			if board != "generic" && len(p.Pins) == 0 {
				t.Error("a Pi profile without pins")
			}
		})
	}
}

func TestDemoArchive(t *testing.T) {
	if len(DemoArchive) == 0 {
		t.Fatal("the demo archive is not embedded")
	}
}
