package metrics

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/auth"
	"kvmd/hid"
	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/info"
	"kvmd/internal/fixture"
	"kvmd/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

// boardSource returns an info.Source on a bundled board tree, with what
// the demo fakes: the profile's GPIO pins (power LED on, HDD LED off,
// switches as outputs, low) and a capture device with a 1080p60 signal.
func boardSource(t *testing.T, board string) *info.Source {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", board+".ttar"), root); err != nil {
		t.Fatal(err)
	}
	fs := hw.New(root)
	fake := &v4l2test.Fake{}
	if devs, err := fs.VideoDevices(); err == nil {
		dt, _ := fs.DeviceTree()
		if c, ok := hw.PickCapture(devs, dt.Model); ok {
			fake.Set(fs.Path(strings.TrimPrefix(c.Node, "/")), v4l2test.Device{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}})
		}
	}
	now := time.Unix(1_800_000_000, 0) // frozen: one reading, since boot
	src := info.New(info.Config{FS: fs, V4L2: fake, Now: func() time.Time { return now }})
	levels := map[string]gpio.Level{"atx_power_led": gpio.High}
	for _, p := range src.Profile().Pins {
		fn := "In/Low"
		if strings.HasSuffix(p.Name, "_switch") {
			fn = "Out/Low"
		}
		if err := gpioreg.Register(&gpiotest.Pin{N: p.GPIO, Fn: fn, L: levels[p.Name]}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gpioreg.Unregister(p.GPIO) })
	}
	return src
}

// fixedCounts are authentication counters with a few attempts.
func fixedCounts() []auth.Count {
	var out []auth.Count
	for _, m := range auth.Methods {
		for _, r := range []auth.Result{auth.ResultOK, auth.ResultFailed, auth.ResultBlocked} {
			var n uint64
			switch {
			case m == auth.MethodBasic && r == auth.ResultOK:
				n = 1234
			case m == auth.MethodLogin && r == auth.ResultFailed:
				n = 3
			}
			out = append(out, auth.Count{Method: m, Result: r, N: n})
		}
	}
	return out
}

// TestGolden writes the exposition of every bundled board tree and
// compares it with the golden files in testdata. Run with -update after a
// deliberate change and review the diff.
func TestGolden(t *testing.T) {
	for _, board := range []string{"rpi4", "rpi5", "zero2w", "x86"} {
		t.Run(board, func(t *testing.T) {
			src := boardSource(t, board)
			e := New(Config{
				Version: "v1.2.3", Hardware: src.Hardware, AuthCounts: fixedCounts, Names: Names{KVMD: true, PiKVM: true},
				Sessions: func() int { return 2 }, LogFollowers: func() int { return 1 },
			})
			var b bytes.Buffer
			if err := e.WriteMetrics(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", board+".prom")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("differs from %s (-want +got):\n%s", golden, lineDiff(string(want), got))
			}
			checkSyntax(t, b.String())
			promtoolCheck(t, b.Bytes())
		})
	}
}

// TestRPi4Values checks the values that matter against /api/info's, so the
// golden file cannot drift from them unnoticed.
func TestRPi4Values(t *testing.T) {
	src := boardSource(t, "rpi4")
	var b bytes.Buffer
	if err := New(Config{Hardware: src.Hardware}).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"kvmd_cpu_temperature_celsius 62.322",
		"kvmd_cpu_usage_percent 1",
		"kvmd_memory_total_bytes 3.976179712e+09",
		"kvmd_memory_available_bytes 3.494125568e+09",
		"kvmd_memory_used_percent 12.1",
		`kvmd_throttling_flag{flag="undervoltage",when="now"} 0`,
		`kvmd_throttling_flag{flag="throttled",when="past"} 0`,
		"kvmd_usb_connected 1",
		"kvmd_hdmi_signal 1",
		"kvmd_hdmi_width_pixels 1920",
		"kvmd_hdmi_height_pixels 1080",
		"kvmd_hdmi_refresh_rate_hertz 60",
		`kvmd_gpio_level{pin="atx_power_led"} 1`,
		`kvmd_gpio_level{pin="atx_hdd_led"} 0`,
		"kvmd_system_uptime_seconds 2911",
	} {
		if !strings.Contains(b.String(), "\n"+line+"\n") {
			t.Errorf("no line %q in:\n%s", line, b.String())
		}
	}
	for _, absent := range []string{"kvmd_auth_", "kvmd_sessions_", "kvmd_log_", "go_", "process_"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("%s* written without its source", absent)
		}
	}
}

// TestAbsent checks that a value the machine lacks leaves its sample out,
// and its family with it when that was the only one: a GPIO pin that
// cannot be read, a capture device that cannot tell whether a signal is
// there (only its status is written), or a board without either.
func TestAbsent(t *testing.T) {
	up := int64(10)
	unknown := hw.Video{Status: hw.VideoUnknown}
	h := info.Hardware{
		GPIO: map[string]hw.PinState{
			"atx_power_led":    {GPIO: "GPIO24", Level: new(true)},
			"atx_power_switch": {GPIO: "GPIO23"},
		},
		Video:  &unknown,
		Uptime: info.Uptime{Total: &up},
	}
	var b bytes.Buffer
	if err := New(Config{Hardware: func() info.Hardware { return h }}).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP kvmd_build_info The daemon's version, as a label; the value is always 1.
# TYPE kvmd_build_info gauge
kvmd_build_info{version=""} 1
# HELP kvmd_gpio_level Logical level of the board's named GPIO pins (active-low applied): 1 when the pin's function is on.
# TYPE kvmd_gpio_level gauge
kvmd_gpio_level{pin="atx_power_led"} 1
# HELP kvmd_hdmi_status The HDMI capture's status as a label (hw.video.status: ok, no_signal, no_lock, out_of_range, no_detection, no_access, unknown); the value is always 1.
# TYPE kvmd_hdmi_status gauge
kvmd_hdmi_status{status="unknown"} 1
# HELP kvmd_system_uptime_seconds Time since the machine booted (proc/uptime), in whole seconds.
# TYPE kvmd_system_uptime_seconds gauge
kvmd_system_uptime_seconds 10
`
	if b.String() != want {
		t.Errorf("(-want +got):\n%s", lineDiff(want, b.String()))
	}
}

// TestRuntime checks that the standard collectors' families are there,
// and that the whole exposition passes promtool's lint.
func TestRuntime(t *testing.T) {
	var b bytes.Buffer
	if err := New(Config{Version: "x", Runtime: true}).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "go_gc_duration_seconds",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		if !regexp.MustCompile(`(?m)^` + name + `(\{[^}]*\})? \S+$`).MatchString(out) {
			t.Errorf("no sample of %s", name)
		}
	}
	checkSyntax(t, out)
	promtoolCheck(t, b.Bytes())
}

type failWriter struct{ n int }

var errWrite = errors.New("write failed")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n--; f.n < 0 {
		return 0, errWrite
	}
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	for n := range 3 {
		if err := New(Config{Runtime: true}).WriteMetrics(&failWriter{n: n}); !errors.Is(err, errWrite) {
			t.Errorf("writer failing after %d writes: %v, want its error", n, err)
		}
	}
}

// sampleLine is a sample of the text format: a name, optional labels with
// quoted values, a value.
var sampleLine = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",? ?)*\})? (NaN|[+-]Inf|[-+0-9.eE]+)$`)

// checkSyntax checks every line, and that no family is written twice.
func checkSyntax(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if seen[name] {
				t.Errorf("family %s written twice", name)
			}
			seen[name] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		if !sampleLine.MatchString(line) {
			t.Errorf("not a sample line: %q", line)
		}
	}
}

// promtoolCheck lints an exposition with Prometheus's own promtool (Debian
// package prometheus): it parses it as the server does and flags missing
// HELP, bad names and units, counters without _total. make test installs
// it and sets testutil.RequireEnv: then a missing one fails the test.
func promtoolCheck(t *testing.T, out []byte) {
	t.Helper()
	bin, ok := testutil.WantTool(t, "prometheus", "promtool")
	if !ok {
		t.Log("no promtool, exposition not linted")
		return
	}
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(out)
	msg, err := cmd.CombinedOutput()
	// Exit status 3 is lint problems only (1 is a parse error): those of
	// PiKVM's names, which are not ours to change, are let through.
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		rest := ""
		for line := range strings.Lines(string(msg)) {
			if !pikvmLint[strings.TrimSpace(line)] {
				rest += line
			}
		}
		if rest == "" {
			return
		}
	}
	if err != nil || len(msg) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, msg)
	}
}

// pikvmLint are promtool's complaints about PiKVM's names (kvmd 4.197's
// export.py makes them from /api/info's keys): the only ones allowed.
var pikvmLint = map[string]bool{
	`pikvm_hw_mem_total non-counter metrics should not have "_total" suffix`: true,
}

// lineDiff marks the lines of want missing from got (-) and those of got
// missing from want (+).
func lineDiff(want, got string) string {
	in := func(s, line string) bool { return strings.Contains("\n"+s, "\n"+line+"\n") }
	var b strings.Builder
	for l := range strings.Lines(want) {
		if !in(got, strings.TrimSuffix(l, "\n")) {
			b.WriteString("-" + l)
		}
	}
	for l := range strings.Lines(got) {
		if !in(want, strings.TrimSuffix(l, "\n")) {
			b.WriteString("+" + l)
		}
	}
	return b.String()
}

// BenchmarkWriteMetrics is one scrape's work on the Raspberry Pi 4 tree,
// the hardware values cached (as between two scrapes a second apart) or
// not, with the runtime and process families.
func BenchmarkWriteMetrics(b *testing.B) {
	root := b.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", "rpi4.ttar"), root); err != nil {
		b.Fatal(err)
	}
	for _, ttl := range []time.Duration{time.Hour, time.Nanosecond} {
		for _, names := range []Names{{KVMD: true}, {KVMD: true, PiKVM: true}} {
			src := info.New(info.Config{FS: hw.New(root), V4L2: &v4l2test.Fake{}, TTL: ttl})
			e := New(Config{Version: "x", Hardware: src.Hardware, AuthCounts: fixedCounts,
				Sessions: func() int { return 0 }, LogFollowers: func() int { return 0 }, Runtime: true, Names: names})
			name := "cached"
			if ttl < time.Second {
				name = "read"
			}
			b.Run(name+"/"+strings.ReplaceAll(names.String(), ",", "+"), func(b *testing.B) {
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					if err := e.WriteMetrics(&buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(buf.Len()), "bytes/scrape")
			})
		}
	}
}

// TestThrottlingAndUSBSources: the throttling flags a source cannot see
// are left out rather than written as a measured 0, the source is a
// label, and the USB status is a state set.
func TestThrottlingAndUSBSources(t *testing.T) {
	write := func(h info.Hardware) string {
		var b bytes.Buffer
		if err := New(Config{Hardware: func() info.Hardware { return h }}).WriteMetrics(&b); err != nil {
			t.Fatal(err)
		}
		checkSyntax(t, b.String())
		return b.String()
	}
	flags := map[string]info.NowPast{"undervoltage": {Now: true, Past: true}, "freq_capped": {}, "throttled": {}}
	hwmon := write(info.Hardware{
		Health: info.Health{Throttling: &info.Throttling{RawFlags: 0x10001, ParsedFlags: flags, Source: hw.ThrottleHwmon}},
		USB:    &hw.USB{Status: hw.USBNoUDC},
	})
	for _, line := range []string{
		`kvmd_throttling_flag{flag="undervoltage",when="now"} 1`,
		`kvmd_throttling_flag{flag="undervoltage",when="past"} 1`,
		`kvmd_throttling_source{source="hwmon"} 1`,
		"kvmd_usb_connected 0",
		`kvmd_usb_status{status="no_udc"} 1`,
		`kvmd_usb_status{status="ok"} 0`,
		`kvmd_usb_status{status="no_gadget"} 0`,
	} {
		if !strings.Contains(hwmon, "\n"+line+"\n") {
			t.Errorf("hwmon source: no line %q in:\n%s", line, hwmon)
		}
	}
	if strings.Contains(hwmon, `flag="throttled"`) || strings.Contains(hwmon, `flag="freq_capped"`) {
		t.Errorf("hwmon source: flags it cannot see written:\n%s", hwmon)
	}

	mailbox := write(info.Hardware{
		Health: info.Health{Throttling: &info.Throttling{RawFlags: 0, ParsedFlags: map[string]info.NowPast{}, Source: hw.ThrottleMailbox}},
	})
	if n := strings.Count(mailbox, "\nkvmd_throttling_flag{"); n != 6 || !strings.Contains(mailbox, `kvmd_throttling_source{source="mailbox"} 1`) {
		t.Errorf("mailbox source: %d flag samples, want 6, and the source:\n%s", n, mailbox)
	}

	// No source: no throttling family at all, as throttling is null.
	if none := write(info.Hardware{}); strings.Contains(none, "kvmd_throttling") || strings.Contains(none, "kvmd_usb") {
		t.Errorf("null throttling and USB written:\n%s", none)
	}
}

func TestHIDFamilies(t *testing.T) {
	var st hid.State
	st.Keyboard.Online = true
	e := New(Config{
		HID: func() hid.Counts {
			return hid.Counts{KeyboardWritten: 12, KeyboardDropped: 3, MouseWritten: 4, Dropped: map[string]uint64{"malformed": 2, "forbidden": 1}}
		},
		HIDState: func() hid.State { return st },
	})
	var b strings.Builder
	if err := e.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`kvmd_hid_reports_total{device="keyboard",result="written"} 12`,
		`kvmd_hid_reports_total{device="keyboard",result="dropped"} 3`,
		`kvmd_hid_reports_total{device="mouse",result="written"} 4`,
		`kvmd_hid_reports_total{device="mouse",result="dropped"} 0`,
		`kvmd_hid_input_dropped_total{reason="malformed"} 2`,
		`kvmd_hid_input_dropped_total{reason="forbidden"} 1`,
		`kvmd_hid_online{device="keyboard"} 1`,
		`kvmd_hid_online{device="mouse"} 0`,
		"# TYPE kvmd_hid_reports_total counter",
		"# TYPE kvmd_hid_online gauge",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("no line %s in\n%s", line, b.String())
		}
	}
}

// TestRuntimeFamilies: with Runtime, exactly the go_* and process_*
// families client_golang 1.25's standard collectors write on Linux, each
// with its type (their names and HELP are in runtime.go and process.go),
// and the GC summary counts the collections.
func TestRuntimeFamilies(t *testing.T) {
	runtime.GC()
	var b bytes.Buffer
	if err := New(Config{Version: "x", Runtime: true}).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"go_gc_duration_seconds summary", "go_gc_gogc_percent gauge", "go_gc_gomemlimit_bytes gauge",
		"go_goroutines gauge", "go_info gauge",
		"go_memstats_alloc_bytes gauge", "go_memstats_alloc_bytes_total counter", "go_memstats_buck_hash_sys_bytes gauge",
		"go_memstats_frees_total counter", "go_memstats_gc_sys_bytes gauge", "go_memstats_heap_alloc_bytes gauge",
		"go_memstats_heap_idle_bytes gauge", "go_memstats_heap_inuse_bytes gauge", "go_memstats_heap_objects gauge",
		"go_memstats_heap_released_bytes gauge", "go_memstats_heap_sys_bytes gauge", "go_memstats_last_gc_time_seconds gauge",
		"go_memstats_mallocs_total counter", "go_memstats_mcache_inuse_bytes gauge", "go_memstats_mcache_sys_bytes gauge",
		"go_memstats_mspan_inuse_bytes gauge", "go_memstats_mspan_sys_bytes gauge", "go_memstats_next_gc_bytes gauge",
		"go_memstats_other_sys_bytes gauge", "go_memstats_stack_inuse_bytes gauge", "go_memstats_stack_sys_bytes gauge",
		"go_memstats_sys_bytes gauge", "go_sched_gomaxprocs_threads gauge", "go_threads gauge",
		"kvmd_build_info gauge",
		"process_cpu_seconds_total counter", "process_max_fds gauge", "process_network_receive_bytes_total counter",
		"process_network_transmit_bytes_total counter", "process_open_fds gauge", "process_resident_memory_bytes gauge",
		"process_start_time_seconds gauge", "process_virtual_memory_bytes gauge", "process_virtual_memory_max_bytes gauge",
	}
	var got []string
	for line := range strings.Lines(b.String()) {
		if s, ok := strings.CutPrefix(line, "# TYPE "); ok {
			got = append(got, strings.TrimSuffix(s, "\n"))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("families (-want +got):\n%s", lineDiff(strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"))
	}
	const nonzero = `(?:[1-9]|0\.0*[1-9])\S*`
	for _, re := range []string{
		`(?m)^go_gc_duration_seconds\{quantile="0"\} \S+\ngo_gc_duration_seconds\{quantile="0.25"\} \S+\n` +
			`go_gc_duration_seconds\{quantile="0.5"\} \S+\ngo_gc_duration_seconds\{quantile="0.75"\} \S+\n` +
			`go_gc_duration_seconds\{quantile="1"\} ` + nonzero + `\ngo_gc_duration_seconds_sum ` + nonzero + `\ngo_gc_duration_seconds_count ` + nonzero + `\n`,
		`(?m)^go_info\{version="` + regexp.QuoteMeta(runtime.Version()) + `"\} 1$`,
		`(?m)^go_memstats_last_gc_time_seconds 1\.[0-9]+e\+09$`,
		`(?m)^process_start_time_seconds 1\.[0-9]+e\+09$`,
	} {
		if !regexp.MustCompile(re).MatchString(b.String()) {
			t.Errorf("no match for %s in:\n%s", re, b.String())
		}
	}
}

// TestDocsRuntimeFamilies: docs/fleets.md's table names exactly the go_*
// and process_* families written.
func TestDocsRuntimeFamilies(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "fleets.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(line, "| `go_") && !strings.HasPrefix(line, "| `process_") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range regexp.MustCompile("`((?:go|process)_[a-z_]+)(?:\\{([a-z_,]+)\\})?`").FindAllStringSubmatch(cell, -1) {
			if m[2] == "" {
				documented = append(documented, m[1])
				continue
			}
			for _, tail := range strings.Split(m[2], ",") {
				documented = append(documented, m[1]+tail)
			}
		}
	}
	slices.Sort(documented)
	var b bytes.Buffer
	if err := New(Config{Runtime: true}).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, name := range families(b.String()) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			written = append(written, name)
		}
	}
	if !slices.Equal(documented, written) {
		t.Errorf("docs/fleets.md (-documented +written):\n%s", lineDiff(strings.Join(documented, "\n")+"\n", strings.Join(written, "\n")+"\n"))
	}
}

// TestConcurrentScrapes: scrapes may run at once (two Prometheus servers);
// run with -race.
func TestConcurrentScrapes(t *testing.T) {
	src := boardSource(t, "rpi4")
	e := New(Config{Version: "x", Hardware: src.Hardware, AuthCounts: fixedCounts, Runtime: true, Names: Names{KVMD: true, PiKVM: true}})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var b bytes.Buffer
			errs <- e.WriteMetrics(&b)
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
