package hw

import (
	"strings"
	"testing"
)

// statPi4 is proc/stat from a Raspberry Pi 4 (4 cores, Linux 6.6).
const statPi4 = `cpu  138243 1071 55710 13822190 9321 0 2254 0 0 0
cpu0 36133 270 14620 3448187 2465 0 1301 0 0 0
cpu1 33588 261 13628 3458880 2268 0 322 0 0 0
cpu2 34270 273 13838 3457227 2313 0 344 0 0 0
cpu3 34250 265 13622 3457895 2274 0 286 0 0 0
intr 89127834 0 14375651 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 160829432
btime 1718012345
processes 96735
procs_running 1
procs_blocked 0
softirq 23468716 3 6215374 1296 491452 0 0 6312104 5887652 5 4560830
`

// statX86 is proc/stat from an x86 virtual machine, with steal time.
const statX86 = `cpu  131880 0 40726 147695 1399 0 6372 135 0 0
cpu0 65198 0 20089 75453 184 0 3111 68 0 0
cpu1 66682 0 20637 72242 1215 0 3260 66 0 0
intr 6140385 35 0 0 0
ctxt 11294732
btime 1718000000
`

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CPUTimes
		wantErr bool
	}{
		{"pi 4", statPi4, CPUTimes{User: 138243, Nice: 1071, System: 55710, Idle: 13822190, IOWait: 9321, SoftIRQ: 2254}, false},
		{"x86 with steal", statX86, CPUTimes{User: 131880, System: 40726, Idle: 147695, IOWait: 1399, SoftIRQ: 6372, Steal: 135}, false},
		{"guests", "cpu  100 20 30 400 5 6 7 8 50 10\n", CPUTimes{100, 20, 30, 400, 5, 6, 7, 8, 50, 10}, false},
		{"linux 2.6.18, seven columns", "cpu  2255 34 2290 22625563 6290 127 456\ncpu0 2255 34 2290 22625563 6290 127 456\n", CPUTimes{User: 2255, Nice: 34, System: 2290, Idle: 22625563, IOWait: 6290, IRQ: 127, SoftIRQ: 456}, false},
		{"linux 2.4, four columns", "cpu  1139 0 3051 115263\n", CPUTimes{User: 1139, System: 3051, Idle: 115263}, false},
		{"future columns ignored", "cpu  1 2 3 4 5 6 7 8 9 10 11 12\n", CPUTimes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, false},
		{"no trailing newline", "cpu 1 2 3 4", CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}, false},
		{"cpu line not first", "intr 1 2\ncpu  1 2 3 4\n", CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}, false},
		{"empty", "", CPUTimes{}, true},
		{"garbage", "not a stat file\n", CPUTimes{}, true},
		{"per-cpu lines only", "cpu0 1 2 3 4\ncpu1 1 2 3 4\n", CPUTimes{}, true},
		{"truncated", "cpu  138243 1071 55710\n", CPUTimes{}, true},
		{"cut mid-number", "cpu  138243 1071 55710 1382x", CPUTimes{}, true},
		{"huge", "cpu  18446744073709551616 0 0 0\n", CPUTimes{}, true},
		{"negative", "cpu  -1 0 0 0\n", CPUTimes{}, true},
		{"float", "cpu  1.5 0 0 0\n", CPUTimes{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat() error = %v, want error %v", err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestCPUPercent(t *testing.T) {
	base := CPUTimes{User: 1000, Nice: 100, System: 500, Idle: 90000, IOWait: 50, IRQ: 10, SoftIRQ: 20, Steal: 5}
	add := func(c CPUTimes, f func(*CPUTimes)) CPUTimes { f(&c); return c }
	tests := []struct {
		name      string
		prev, cur CPUTimes
		want      int
		wantOK    bool
	}{
		{"quarter busy", base, add(base, func(c *CPUTimes) { c.User += 25; c.Idle += 75 }), 25, true},
		{"iowait is idle", base, add(base, func(c *CPUTimes) { c.User += 10; c.System += 10; c.Idle += 70; c.IOWait += 10 }), 20, true},
		{"irq, softirq and steal are busy", base, add(base, func(c *CPUTimes) { c.IRQ += 5; c.SoftIRQ += 5; c.Steal += 10; c.Idle += 80 }), 20, true},
		{"nice is busy", base, add(base, func(c *CPUTimes) { c.Nice += 50; c.Idle += 50 }), 50, true},
		{"a third, truncated", base, add(base, func(c *CPUTimes) { c.User += 1; c.Idle += 2 }), 33, true},
		{"two thirds, truncated", base, add(base, func(c *CPUTimes) { c.User += 2; c.Idle += 1 }), 66, true},
		{"all busy", base, add(base, func(c *CPUTimes) { c.System += 400 }), 100, true},
		{"all idle", base, add(base, func(c *CPUTimes) { c.Idle += 400 }), 0, true},
		{"less than a second", base, add(base, func(c *CPUTimes) { c.User += 3; c.Idle += 1 }), 75, true},
		// Values where computing in ticks instead of psutil's seconds
		// gives 99 (cross-checked against psutil's and kvmd's code).
		{"float order matters", CPUTimes{8808827, 2614526, 9002370, 803080, 7396366, 5351439, 8552340, 1375006, 688229, 7204161},
			CPUTimes{8810677, 2616707, 9002370, 803080, 7396366, 5352675, 8552340, 1377739, 688229, 7204161}, 100, true},
		{"counter went backwards", base, add(base, func(c *CPUTimes) { c.User += 10; c.Idle -= 50 }), 100, true},
		// kvmd adds guest time twice; the result stays a percentage.
		{"guest", base, add(base, func(c *CPUTimes) { c.User += 50; c.Guest += 50; c.Idle += 50 }), 100, true},
		{"no time passed", base, base, 0, false},
		{"only guest counters moved", base, add(base, func(c *CPUTimes) { c.Guest += 5 }), 0, false},
		{"swapped samples", add(base, func(c *CPUTimes) { c.User += 25 }), base, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CPUPercent(tt.prev, tt.cur)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("CPUPercent() = %d, %v, want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSinceBoot(t *testing.T) {
	pi4, err := parseStat([]byte(statPi4))
	if err != nil {
		t.Fatal(err)
	}
	// (138243 + 1071 + 55710 + 2254) / 14028789 ticks: 1.4%.
	if got, ok := pi4.SinceBoot(); got != 1 || !ok {
		t.Errorf("SinceBoot() = %d, %v, want 1, true", got, ok)
	}
	if got, ok := (CPUTimes{}).SinceBoot(); ok {
		t.Errorf("SinceBoot() of zero times = %d, true, want false", got)
	}
}

func TestCPUTimesFS(t *testing.T) {
	got, err := writeSysTree(t, map[string]string{"proc/stat": statX86}).CPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if got.User != 131880 || got.Steal != 135 {
		t.Errorf("CPUTimes() = %+v, want the x86 sample", got)
	}
}

func TestParseLoadAvg(t *testing.T) {
	tests := []struct {
		name, in string
		want     [3]float64
		wantErr  bool
	}{
		{"pi 4", "0.57 1.97 2.19 1/87 10840\n", [3]float64{0.57, 1.97, 2.19}, false},
		{"idle", "0.00 0.00 0.00 1/151 2401\n", [3]float64{}, false},
		{"busy", "12.08 9.43 4.10 9/312 31337\n", [3]float64{12.08, 9.43, 4.10}, false},
		{"three fields only", "1 2 3", [3]float64{1, 2, 3}, false},
		{"empty", "", [3]float64{}, true},
		{"truncated", "0.57 1.97", [3]float64{}, true},
		{"garbage", "a b c d e", [3]float64{}, true},
		{"negative", "-1.00 0.00 0.00 1/1 1", [3]float64{}, true},
		{"inf", "inf 0 0 1/1 1", [3]float64{}, true},
		{"nan", "NaN 0 0 1/1 1", [3]float64{}, true},
		{"exponent", "1e3 0 0 1/1 1", [3]float64{}, true},
		{"huge", "1" + strings.Repeat("0", 400) + " 0 0 1/1 1", [3]float64{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLoadAvg([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseLoadAvg(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{statPi4, statX86, "cpu  1 2 3 4\n", "cpu  -1 0 0 0", "", "cpu \n", "cpu  18446744073709551615 0 0 0 0 0 0 0 18446744073709551615 0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseStat(b)
		if err != nil {
			return
		}
		if p, ok := c.SinceBoot(); ok && (p < 0 || p > 100) {
			t.Errorf("SinceBoot() of %q = %d, not a percentage", b, p)
		}
		if p, ok := CPUPercent(c, c); ok {
			t.Errorf("CPUPercent() of a sample with itself = %d, true", p)
		}
	})
}
