package hw

import "testing"

func TestParseDTString(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		wantErr  bool
	}{
		{"pi 4 model", "Raspberry Pi 4 Model B Rev 1.5\x00", "Raspberry Pi 4 Model B Rev 1.5", false},
		{"pi serial", "10000000a1b2c3d4\x00", "10000000a1b2c3d4", false},
		{"no nul", "Raspberry Pi Zero 2 W Rev 1.0", "Raspberry Pi Zero 2 W Rev 1.0", false},
		{"stops at first nul", "first\x00second\x00", "first", false},
		{"empty", "", "", true},
		{"only nul", "\x00", "", true},
		{"blank", " \n\x00", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDTString([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseDTString(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestParseDTStrings(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"pi 4", "raspberrypi,4-model-b\x00brcm,bcm2711\x00", []string{"raspberrypi,4-model-b", "brcm,bcm2711"}},
		{"no final nul", "raspberrypi,model-zero-2-w\x00brcm,bcm2837", []string{"raspberrypi,model-zero-2-w", "brcm,bcm2837"}},
		{"empty", "", nil},
		{"only nuls", "\x00\x00", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := diffSys(tt.want, parseDTStrings([]byte(tt.in))); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestDeviceTree(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    DeviceTree
		wantErr bool
	}{
		{
			name: "pi 4",
			files: map[string]string{
				"proc/device-tree/model":         "Raspberry Pi 4 Model B Rev 1.5\x00",
				"proc/device-tree/serial-number": "10000000a1b2c3d4\x00",
				"proc/device-tree/compatible":    "raspberrypi,4-model-b\x00brcm,bcm2711\x00",
			},
			want: DeviceTree{
				Model:      "Raspberry Pi 4 Model B Rev 1.5",
				Serial:     "10000000A1B2C3D4",
				Compatible: []string{"raspberrypi,4-model-b", "brcm,bcm2711"},
			},
		},
		{
			name: "sysfs only",
			files: map[string]string{
				"sys/firmware/devicetree/base/model":      "Raspberry Pi Zero W Rev 1.1\x00",
				"sys/firmware/devicetree/base/compatible": "raspberrypi,model-zero-w\x00brcm,bcm2835\x00",
			},
			want: DeviceTree{Model: "Raspberry Pi Zero W Rev 1.1", Compatible: []string{"raspberrypi,model-zero-w", "brcm,bcm2835"}},
		},
		{
			name: "procfs first",
			files: map[string]string{
				"proc/device-tree/model":             "Raspberry Pi 2 Model B Rev 1.1\x00",
				"sys/firmware/devicetree/base/model": "stale\x00",
			},
			want: DeviceTree{Model: "Raspberry Pi 2 Model B Rev 1.1"},
		},
		{
			name:  "model only",
			files: map[string]string{"proc/device-tree/model": "Generic DT board\x00"},
			want:  DeviceTree{Model: "Generic DT board"},
		},
		{
			name: "empty serial",
			files: map[string]string{
				"proc/device-tree/model":         "Raspberry Pi 4 Model B Rev 1.5\x00",
				"proc/device-tree/serial-number": "\x00",
			},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := writeSysTree(t, tt.files).DeviceTree()
			if (err != nil) != tt.wantErr || Absent(err) {
				t.Fatalf("DeviceTree() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
	t.Run("no device tree", func(t *testing.T) {
		_, err := writeSysTree(t, map[string]string{"proc/": ""}).DeviceTree()
		if !Absent(err) {
			t.Errorf("DeviceTree() error = %v, want absent", err)
		}
	})
}
