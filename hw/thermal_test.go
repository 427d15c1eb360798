package hw

import (
	"os"
	"strings"
	"testing"
)

func TestParseThermalTemp(t *testing.T) {
	tests := []struct {
		name, in string
		want     float64
		wantErr  bool
	}{
		{"pi 4", "45277\n", 45.277, false},
		{"x86", "38000\n", 38, false},
		{"below freezing", "-5000\n", -5, false},
		{"zero", "0", 0, false},
		{"empty", "", 0, true},
		{"garbage", "hot\n", 0, true},
		{"decimal", "45.2\n", 0, true},
		{"overflow", "99999999999999999999\n", 0, true},
		{"out of range", "4294967295\n", 0, true},
		{"two values", "45277 45000\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseThermalTemp([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseThermalTemp(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestThermalZoneNumber(t *testing.T) {
	tests := []struct {
		in     string
		want   int
		wantOK bool
	}{
		{"thermal_zone0", 0, true},
		{"thermal_zone10", 10, true},
		{"thermal_zone", 0, false},
		{"thermal_zoneX", 0, false},
		{"thermal_zone-1", 0, false},
		{"thermal_zone99999999999999999999", 0, false},
		{"cooling_device0", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := thermalZoneNumber(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("thermalZoneNumber(%q) = %d, %v, want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestThermalZones(t *testing.T) {
	const d = "sys/class/thermal/"
	f := writeSysTree(t, map[string]string{
		d + "thermal_zone0/type":  "acpitz\n",
		d + "thermal_zone0/temp":  "27800\n",
		d + "thermal_zone10/type": "x86_pkg_temp\n",
		d + "thermal_zone10/temp": "52000\n",
		d + "thermal_zone2/type":  "INT3400 Thermal\n",
		d + "thermal_zone2/temp":  "20000\n",
		// A zone without temp, one whose temp cannot be read (EISDIR
		// standing in for EIO) and a stray name: all skipped.
		d + "thermal_zone1/type":   "iwlwifi_1\n",
		d + "thermal_zone3/type":   "pch_cannonlake\n",
		d + "thermal_zone3/temp/":  "",
		d + "thermal_zoneX/type":   "bogus\n",
		d + "thermal_zoneX/temp":   "1000\n",
		d + "cooling_device0/type": "Processor\n",
	})
	got, err := f.ThermalZones()
	if err != nil {
		t.Fatal(err)
	}
	want := []ThermalZone{
		{Zone: 0, Type: "acpitz", Temp: 27.8},
		{Zone: 2, Type: "INT3400 Thermal", Temp: 20},
		{Zone: 10, Type: "x86_pkg_temp", Temp: 52},
	}
	if d := diffSys(want, got); d != "" {
		t.Error(d)
	}
	if temp, ok := CPUTemp(got); temp != 52 || !ok {
		t.Errorf("CPUTemp() = %v, %v, want 52, true", temp, ok)
	}

	t.Run("garbage keeps the good zones", func(t *testing.T) {
		if err := os.WriteFile(f.Path(d+"thermal_zone2/temp"), []byte("N/A\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := f.ThermalZones()
		if err == nil || Absent(err) || !strings.Contains(err.Error(), "thermal_zone2/temp") {
			t.Errorf("ThermalZones() error = %v, want a parse error for thermal_zone2", err)
		}
		if len(got) != 2 {
			t.Errorf("ThermalZones() = %+v, want zones 0 and 10", got)
		}
	})
	t.Run("no thermal class", func(t *testing.T) {
		_, err := writeSysTree(t, map[string]string{"sys/": ""}).ThermalZones()
		if !Absent(err) {
			t.Errorf("ThermalZones() error = %v, want absent", err)
		}
	})
	t.Run("only unreadable zones", func(t *testing.T) {
		_, err := writeSysTree(t, map[string]string{d + "thermal_zone0/type": "cpu-thermal\n"}).ThermalZones()
		if !Absent(err) {
			t.Errorf("ThermalZones() error = %v, want absent", err)
		}
	})
}

func TestCPUTemp(t *testing.T) {
	tests := []struct {
		name   string
		zones  []ThermalZone
		want   float64
		wantOK bool
	}{
		{"pi", []ThermalZone{{0, "cpu-thermal", 45.277}}, 45.277, true},
		{"pi 5 with more zones", []ThermalZone{{0, "cpu-thermal", 51.2}, {1, "rp1_adc", 40}}, 51.2, true},
		{"cpu-thermal beats x86_pkg_temp", []ThermalZone{{0, "x86_pkg_temp", 60}, {1, "cpu-thermal", 50}}, 50, true},
		{"x86", []ThermalZone{{0, "acpitz", 27.8}, {5, "x86_pkg_temp", 52}}, 52, true},
		{"rockchip", []ThermalZone{{0, "soc_thermal", 41.1}, {1, "gpu_thermal", 40}}, 41.1, true},
		{"zone 0 otherwise", []ThermalZone{{0, "acpitz", 27.8}, {1, "pch", 40}}, 27.8, true},
		{"no zone 0", []ThermalZone{{1, "acpitz", 27.8}}, 0, false},
		{"none", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CPUTemp(tt.zones)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("CPUTemp() = %v, %v, want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
