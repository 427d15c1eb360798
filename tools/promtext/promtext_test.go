package promtext

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"kvmd/auth"
	"kvmd/hid"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/metrics"
)

// oddPin is a GPIO pin name with every character the text format escapes
// in a label value.
const oddPin = "odd \"pin\" \\ with\nnewline"

// hardware is a machine with every value /api/info can have.
func hardware() info.Hardware {
	temp, mem, cpu, up := 48.5, 37.25, 3, int64(12345)
	total, avail := uint64(4<<30), uint64(3<<30)
	in, out := "in", "out"
	fps := 59.94
	var h info.Health
	h.Temp.CPU = &temp
	h.CPU.Percent = &cpu
	h.Mem = info.Mem{Total: &total, Available: &avail, Percent: &mem}
	h.Throttling = &info.Throttling{RawFlags: 0x50005, Source: hw.ThrottleMailbox, IgnorePast: true,
		ParsedFlags: map[string]info.NowPast{"undervoltage": {Now: true, Past: true}, "throttled": {Past: true}}}
	return info.Hardware{
		Health: h,
		USB:    &hw.USB{Status: hw.USBOK, Connected: true},
		Video:  &hw.Video{Status: hw.VideoOK, Signal: new(true), Resolution: &hw.Resolution{Width: 1920, Height: 1080}, FPS: &fps},
		GPIO: map[string]hw.PinState{
			"atx_power_led":    {GPIO: "GPIO24", Direction: &in, Level: new(true)},
			"atx_hdd_led":      {GPIO: "GPIO22", Direction: &in, Level: new(false)},
			"atx_power_switch": {GPIO: "GPIO23", Direction: &out, Level: new(false)},
			oddPin:             {GPIO: "GPIO5", Direction: &in, Level: new(true)},
		},
		Uptime: info.Uptime{Total: &up},
	}
}

// exposition is the daemon's full exposition: every source, the runtime
// and process families, both name sets.
func exposition(t *testing.T) []byte {
	t.Helper()
	e := metrics.New(metrics.Config{
		Version:  "v1.2.3-\"quoted\"",
		Hardware: hardware,
		AuthCounts: func() []auth.Count {
			return []auth.Count{{Method: auth.MethodBasic, Result: auth.ResultOK, N: 1234},
				{Method: auth.MethodLogin, Result: auth.ResultFailed, N: 3}}
		},
		Sessions:     func() int { return 2 },
		LogFollowers: func() int { return 1 },
		HID: func() hid.Counts {
			return hid.Counts{KeyboardWritten: 1 << 40, MouseWritten: 7, Dropped: map[string]uint64{"malformed": 1}}
		},
		HIDState: func() hid.State { return hid.State{} },
		Runtime:  true,
		Names:    metrics.Names{KVMD: true, PiKVM: true},
	})
	var b bytes.Buffer
	if err := e.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func parse(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("expfmt's text parser: %v\n%s", err, b)
	}
	return mfs
}

// counters are kvmd's counter families; every other kvmd_* and pikvm_*
// family is a gauge.
var counters = []string{"kvmd_auth_attempts_total", "kvmd_hid_input_dropped_total", "kvmd_hid_reports_total"}

// TestParses: expfmt's parser reads the whole exposition; every kvmd_* and
// pikvm_* family has its type and a HELP; the escaped label values read
// back as they were.
func TestParses(t *testing.T) {
	b := exposition(t)
	mfs := parse(t, b)
	var kvmd, pikvm int
	for name, mf := range mfs {
		switch {
		case strings.HasPrefix(name, "kvmd_"):
			kvmd++
		case strings.HasPrefix(name, "pikvm_"):
			pikvm++
		default:
			continue
		}
		want := dto.MetricType_GAUGE
		if slices.Contains(counters, name) {
			want = dto.MetricType_COUNTER
		}
		if mf.GetType() != want || mf.GetHelp() == "" || len(mf.Metric) == 0 {
			t.Errorf("%s: type %v, want %v; help %q; %d samples", name, mf.GetType(), want, mf.GetHelp(), len(mf.Metric))
		}
	}
	// Every kvmd family has a value on this machine; PiKVM's are 16 (metrics/testdata/pikvm-4.197.names) and
	// two per GPIO pin.
	if kvmd != 23 || pikvm != 16+2*4 {
		t.Errorf("%d kvmd_* families, want 23; %d pikvm_*, want 24:\n%s", kvmd, pikvm, b)
	}
	label := func(family, name string) []string {
		var out []string
		for _, m := range mfs[family].GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == name {
					out = append(out, l.GetValue())
				}
			}
		}
		return out
	}
	if got := label("kvmd_gpio_level", "pin"); !slices.Contains(got, oddPin) {
		t.Errorf("kvmd_gpio_level pins %q, want %q among them", got, oddPin)
	}
	if got := label("kvmd_build_info", "version"); !slices.Equal(got, []string{"v1.2.3-\"quoted\""}) {
		t.Errorf("kvmd_build_info version %q", got)
	}
	// Sorted by label values: keyboard dropped, keyboard written, ...
	if v := mfs["kvmd_hid_reports_total"].GetMetric(); len(v) != 4 || v[1].GetCounter().GetValue() != 1<<40 {
		t.Errorf("kvmd_hid_reports_total: %v", v)
	}
}

// TestMatchesClientGolang: the go_* and process_* families are those
// client_golang's standard collectors write in this process, with their
// types and HELP texts, the same label names, and the same values where
// they do not move between two reads.
func TestMatchesClientGolang(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	theirs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ours := parse(t, exposition(t))
	// A second read by client_golang after ours: the values that move
	// (the heap grows while the test runs) are checked against the span of
	// its two reads.
	after, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	later := map[string]*dto.MetricFamily{}
	for _, mf := range after {
		later[mf.GetName()] = mf
	}
	want := map[string]*dto.MetricFamily{}
	for _, mf := range theirs {
		want[mf.GetName()] = mf
	}
	var got []string
	for name := range ours {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if names := slices.Sorted(maps.Keys(want)); !slices.Equal(got, names) {
		t.Errorf("families:\n ours   %q\n theirs %q", got, names)
	}
	for name, w := range want {
		g, ok := ours[name]
		if !ok {
			continue
		}
		if g.GetType() != w.GetType() || g.GetHelp() != w.GetHelp() {
			t.Errorf("%s: %v %q, client_golang %v %q", name, g.GetType(), g.GetHelp(), w.GetType(), w.GetHelp())
		}
		if len(g.Metric) != 1 || len(w.Metric) != 1 {
			t.Errorf("%s: %d samples, client_golang %d", name, len(g.Metric), len(w.Metric))
			continue
		}
		if labels(g.Metric[0]) != labels(w.Metric[0]) {
			t.Errorf("%s: labels %s, client_golang %s", name, labels(g.Metric[0]), labels(w.Metric[0]))
		}
		if w.GetType() == dto.MetricType_SUMMARY {
			var q []float64
			for _, x := range g.Metric[0].GetSummary().GetQuantile() {
				q = append(q, x.GetQuantile())
			}
			var wq []float64
			for _, x := range w.Metric[0].GetSummary().GetQuantile() {
				wq = append(wq, x.GetQuantile())
			}
			if !slices.Equal(q, wq) {
				t.Errorf("%s: quantiles %v, client_golang %v", name, q, wq)
			}
		}
	}
	// Values that do not move between the two reads.
	for _, name := range []string{"go_info", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes", "go_sched_gomaxprocs_threads",
		"process_max_fds", "process_virtual_memory_max_bytes", "process_start_time_seconds"} {
		g, w := value(ours[name]), value(want[name])
		if g != w && math.Abs(g-w) > 1e-9*math.Abs(w) {
			t.Errorf("%s = %v, client_golang %v", name, g, w)
		}
	}
	// Values that move: within the span of client_golang's reads before
	// and after ours, widened by half (the memory and the goroutines of
	// the reads, a parse apart; CI once saw the heap double between two).
	for _, name := range []string{"go_memstats_sys_bytes", "go_memstats_heap_sys_bytes", "process_resident_memory_bytes",
		"process_virtual_memory_bytes", "go_threads", "process_open_fds"} {
		g, w0, w1 := value(ours[name]), value(want[name]), value(later[name])
		lo, hi := min(w0, w1)/1.5, max(w0, w1)*1.5
		if w0 == 0 || !(g >= lo && g <= hi) {
			t.Errorf("%s = %v, client_golang %v before and %v after", name, g, w0, w1)
		}
	}
}

func labels(m *dto.Metric) string {
	var s []string
	for _, l := range m.Label {
		s = append(s, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(s, ",")
}

func value(mf *dto.MetricFamily) float64 {
	if mf == nil || len(mf.Metric) == 0 {
		return math.NaN()
	}
	m := mf.Metric[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}
