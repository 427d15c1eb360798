package hw

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

func TestParseThrottled(t *testing.T) {
	tests := []struct {
		name, in string
		want     uint32
		wantErr  bool
	}{
		{"sysfs", "50005\n", 0x50005, false},
		{"sysfs zero", "0\n", 0, false},
		{"0x prefix", "0x50005", 0x50005, false},
		{"upper case", "0X5000F\n", 0x5000f, false},
		{"vcgencmd", "throttled=0x50000\n", 0x50000, false},
		{"all bits", "ffffffff", 0xffffffff, false},
		{"empty", "", 0, true},
		{"blank", " \n", 0, true},
		{"garbage", "hot\n", 0, true},
		{"prefix only", "0x", 0, true},
		{"too large", "100000000\n", 0, true},
		{"huge", "ffffffffffffffffffffffff", 0, true},
		{"negative", "-1\n", 0, true},
		{"signed hex", "0x-5", 0, true},
		{"plus", "+5", 0, true},
		{"underscore", "5_0005", 0, true},
		{"two numbers", "5 5", 0, true},
		{"truncated vcgencmd", "throttled=", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseThrottled([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseThrottled(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestParseAlarm(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{"0\n", false, false},
		{"1\n", true, false},
		{"", false, true},
		{"2\n", false, true},
		{"yes", false, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := parseAlarm([]byte(tt.in))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("parseAlarm(%q) = %v, %v, want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		raw  uint32
		want Flags
	}{
		{"none", 0, Flags{}},
		{"under-voltage and throttled now and past", 0x50005, Flags{
			Undervoltage: Flag{Now: true, Past: true},
			Throttled:    Flag{Now: true, Past: true},
		}},
		{"past only", 0x20000, Flags{FreqCapped: Flag{Past: true}}},
		{"soft limit now", 0x8, Flags{SoftTempLimit: Flag{Now: true}}},
		{"all", 0xf000f, Flags{Flag{true, true}, Flag{true, true}, Flag{true, true}, Flag{true, true}}},
		{"unknown bits ignored", 0xfff0fff0, Flags{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := diffSys(tt.want, Throttling{Raw: tt.raw}.Flags()); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestThrottled(t *testing.T) {
	const pi4 = "sys/devices/platform/soc/soc:firmware/get_throttled"
	tests := []struct {
		name    string
		files   map[string]string
		want    Throttling
		wantErr bool
	}{
		{"pi 4", map[string]string{pi4: "50005\n"}, Throttling{0x50005, ThrottleSysfs}, false},
		{"depth 1", map[string]string{"sys/devices/platform/rpi-firmware/get_throttled": "0\n"}, Throttling{0, ThrottleSysfs}, false},
		{"depth 3", map[string]string{"sys/devices/platform/axi/axi:soc/axi:soc:firmware/get_throttled": "20002\n"}, Throttling{0x20002, ThrottleSysfs}, false},
		{"hwmon alarm", map[string]string{
			"sys/class/hwmon/hwmon0/name":            "cpu_thermal\n",
			"sys/class/hwmon/hwmon0/in0_lcrit_alarm": "0\n",
			"sys/class/hwmon/hwmon1/name":            "rpi_volt\n",
			"sys/class/hwmon/hwmon1/in0_lcrit_alarm": "1\n",
		}, Throttling{1, ThrottleHwmon}, false},
		{"hwmon quiet", map[string]string{
			"sys/class/hwmon/hwmon0/name":            "rpi_volt\n",
			"sys/class/hwmon/hwmon0/in0_lcrit_alarm": "0\n",
		}, Throttling{0, ThrottleHwmon}, false},
		{"firmware before hwmon", map[string]string{
			pi4:                                      "0\n",
			"sys/class/hwmon/hwmon0/name":            "rpi_volt\n",
			"sys/class/hwmon/hwmon0/in0_lcrit_alarm": "1\n",
		}, Throttling{0, ThrottleSysfs}, false},
		{"bad alarm", map[string]string{
			"sys/class/hwmon/hwmon0/name":            "rpi_volt\n",
			"sys/class/hwmon/hwmon0/in0_lcrit_alarm": "2\n",
		}, Throttling{}, true},
		{"unreadable firmware", map[string]string{pi4 + "/": ""}, Throttling{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := writeSysTree(t, tt.files).Throttled(nil)
			if (err != nil) != tt.wantErr || Absent(err) {
				t.Fatalf("Throttled() error = %v, want error %v", err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}

	absent := []struct {
		name  string
		files map[string]string
	}{
		{"x86", map[string]string{"sys/devices/platform/serial8250/driver_override": "(null)\n", "sys/class/hwmon/hwmon0/name": "coretemp\n"}},
		{"rpi_volt without alarm", map[string]string{"sys/class/hwmon/hwmon0/name": "rpi_volt\n"}},
		{"too deep", map[string]string{"sys/devices/platform/a/b/c/firmware/get_throttled": "0\n"}},
		{"empty root", map[string]string{}},
	}
	for _, tt := range absent {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := writeSysTree(t, tt.files).Throttled(nil); !Absent(err) {
				t.Errorf("Throttled() error = %v, want absent", err)
			}
		})
	}

	t.Run("hwmon through a symlink", func(t *testing.T) {
		// sysfs class directories are symlinks into the device tree.
		f := writeSysTree(t, map[string]string{
			"sys/devices/platform/rpi-volt/hwmon/hwmon2/name":            "rpi_volt\n",
			"sys/devices/platform/rpi-volt/hwmon/hwmon2/in0_lcrit_alarm": "1\n",
			"sys/class/hwmon/": "",
		})
		if err := os.Symlink("../../devices/platform/rpi-volt/hwmon/hwmon2", f.Path("sys/class/hwmon/hwmon2")); err != nil {
			t.Fatal(err)
		}
		got, err := f.Throttled(nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffSys(Throttling{1, ThrottleHwmon}, got); d != "" {
			t.Error(d)
		}
	})
}

func TestPastTracker(t *testing.T) {
	var p PastTracker
	steps := []struct {
		in, want Throttling
	}{
		{Throttling{0, ThrottleHwmon}, Throttling{0, ThrottleHwmon}},
		{Throttling{0x1, ThrottleHwmon}, Throttling{0x10001, ThrottleHwmon}},
		{Throttling{0, ThrottleHwmon}, Throttling{0x10000, ThrottleHwmon}},
		// Firmware past bits are kept and new now bits join the memory.
		{Throttling{0x40004, ThrottleSysfs}, Throttling{0x50004, ThrottleSysfs}},
		{Throttling{0x8, ThrottleSysfs}, Throttling{0xd0008, ThrottleSysfs}},
		// Bits that are not now bits are not remembered.
		{Throttling{0xfff0, ThrottleSysfs}, Throttling{0xd0000 | 0xfff0, ThrottleSysfs}},
	}
	for i, s := range steps {
		if d := diffSys(s.want, p.Track(s.in)); d != "" {
			t.Errorf("step %d: %s", i, d)
		}
	}

	t.Run("concurrent", func(t *testing.T) {
		var p PastTracker
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() { p.Track(Throttling{Raw: 1 << i}) })
		}
		wg.Wait()
		if got := p.Track(Throttling{}).Raw; got != 0xf0000 {
			t.Errorf("after each now bit once: Raw = %#x, want 0xf0000", got)
		}
	})
}

func FuzzParseThrottled(f *testing.F) {
	for _, s := range []string{"50005\n", "0x50005", "throttled=0x0\n", "", "ffffffff", "100000000", "-1", "0x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseThrottled(b)
		if err != nil {
			return
		}
		// What parses must read back the same when printed as sysfs does.
		m, err := parseThrottled(fmt.Appendf(nil, "%x\n", n))
		if err != nil || m != n {
			t.Errorf("parseThrottled(%q) = %#x, which does not round-trip: %#x, %v", b, n, m, err)
		}
		_ = Throttling{Raw: n}.Flags()
	})
}
