package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1, 1000, 11}, 10},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := median(in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median(%v) reordered its argument to %v", tt.in, in)
		}
	}
	if got := median(nil); !math.IsNaN(got) {
		t.Errorf("median(nil) = %v, want NaN", got)
	}
	if got := medianInt([]time.Duration{3, 1, 2, 10}); got != 3 { // (2+3)/2 = 2.5, rounded
		t.Errorf("medianInt = %v, want 3ns", got)
	}
	if got := medianInt([]int64{46 << 20, 45 << 20, 47 << 20}); got != 46<<20 {
		t.Errorf("medianInt of byte counts = %d, want %d", got, 46<<20)
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b, want float64
	}{
		{50, 100, 0.5},
		{100, 100, 1},
		{150, 100, 1.5},
		{1, 0, math.NaN()},
		{math.NaN(), 100, math.NaN()},
		{100, math.NaN(), math.NaN()},
	}
	for _, tt := range tests {
		got := ratio(tt.a, tt.b)
		if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("ratio(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestRotate(t *testing.T) {
	xs := []string{"a", "b", "c", "d"}
	tests := []struct {
		k    int
		want string
	}{{0, "abcd"}, {1, "bcda"}, {3, "dabc"}, {4, "abcd"}, {5, "bcda"}}
	for _, tt := range tests {
		if got := strings.Join(rotate(xs, tt.k), ""); got != tt.want {
			t.Errorf("rotate(abcd, %d) = %s, want %s", tt.k, got, tt.want)
		}
	}
	if strings.Join(xs, "") != "abcd" {
		t.Errorf("rotate modified its input: %v", xs)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	// 1..1000 µs, one sample each.
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}, {0.001, time.Microsecond}}
	for _, tt := range tests {
		got := h.quantile(tt.q)
		if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 1.0/64 {
			t.Errorf("quantile(%v) = %v, want %v within 1/64", tt.q, got, tt.want)
		}
	}
	var empty histogram
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty quantile = %v, want 0", got)
	}
	// Bucket boundaries are continuous and every value maps inside its bucket.
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1e6, 1e9, 1<<62 + 12345, math.MaxInt64} {
		i := histBucket(v)
		if i < 0 || i >= len(h.counts) {
			t.Fatalf("histBucket(%d) = %d, out of range", v, i)
		}
		if mid := histValue(i); math.Abs(float64(mid)-float64(v)) > float64(v)/64+1 {
			t.Errorf("histValue(histBucket(%d)) = %d, too far", v, mid)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tkvmd\nVmPeak:\t  1000 kB\nVmRSS:\t    9216 kB\nThreads:\t5\n"
	got, err := parseVmRSS(strings.NewReader(status))
	if err != nil || got != 9216<<10 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 9216<<10)
	}
	for _, bad := range []string{"Name:\tkvmd\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := parseVmRSS(strings.NewReader(bad)); err == nil {
			t.Errorf("parseVmRSS(%q) succeeded", bad)
		}
	}
}

func TestParseCPUModel(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"x86", "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"},
		{"pi", "processor\t: 0\nCPU part\t: 0xd08\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"none", "processor\t: 0\n", ""},
	}
	for _, tt := range tests {
		if got := parseCPUModel(strings.NewReader(tt.in)); got != tt.want {
			t.Errorf("%s: parseCPUModel = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{fmtRPS(0), "0"},
		{fmtRPS(999.4), "999"},
		{fmtRPS(1234), "1,234"},
		{fmtRPS(1234567.8), "1,234,568"},
		{fmtRPS(math.NaN()), "—"},
		{fmtRatio(0.456), "0.46x"},
		{fmtLatency(85 * time.Microsecond), "85 µs"},
		{fmtLatency(12300 * time.Microsecond), "12.3 ms"},
		{fmtMiB(9 << 20), "9 MiB"},
		{fmtMiB(9<<20 + 100<<10), "9.1 MiB"},
		{fmtLatency(250 * time.Millisecond), "250 ms"},
		{shellJoin([]string{"bin/kvmbench", "run", "--out", "BENCH MARKS.md", "it's"}), `bin/kvmbench run --out 'BENCH MARKS.md' 'it'\''s'`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(ds, tt.q); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}

func TestCountLines(t *testing.T) {
	long := strings.Repeat("x", 300<<10)
	for _, tt := range []struct {
		in   string
		want int
	}{{"", 0}, {"a\r\n", 1}, {"a\nb\n", 2}, {"a\nb", 1}, {long + "\n" + long + "\n", 2}} {
		if n, err := countLines(strings.NewReader(tt.in)); err != nil || n != tt.want {
			t.Errorf("countLines(%.20q) = %d, %v; want %d", tt.in, n, err, tt.want)
		}
	}
}

// TestSeekRatio: the log seek's ratio pairs each round's two runs, so a
// slow spell on one side of one round does not move it much.
func TestSeekRatio(t *testing.T) {
	s := func(xs ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x*float64(time.Second)))
		}
		return ds
	}
	// The separate medians (4.4 s / 3.7 s) would say 1.19x.
	l := &logResult{kvmd: s(5.2, 4.4, 3.4, 4.4, 3.4), jctl: s(4.7, 5.1, 3.7, 3.7, 3.6)}
	if got := seekRatio(l); math.Abs(got-3.4/3.6) > 1e-9 {
		t.Errorf("seekRatio = %v, want %v (the middle of the five rounds' ratios)", got, 3.4/3.6)
	}
	if got := seekRatio(&logResult{}); !math.IsNaN(got) {
		t.Errorf("seekRatio of nothing = %v, want NaN", got)
	}
}
