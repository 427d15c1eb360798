package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kvmd/hw"
	"kvmd/info"
)

// families returns the names of the families of an exposition (its TYPE
// lines), sorted.
func families(out string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

func write(t *testing.T, cfg Config) string {
	t.Helper()
	var b bytes.Buffer
	if err := New(cfg).WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	checkSyntax(t, b.String())
	return b.String()
}

// TestPiKVMNames: on the Raspberry Pi 4 tree, the PiKVM families other
// than GPIO are exactly those PiKVM's kvmd 4.197 writes on such a board
// (testdata/pikvm-4.197.names, read from its source), every one a gauge,
// with the values of kvmd's families.
func TestPiKVMNames(t *testing.T) {
	src := boardSource(t, "rpi4")
	out := write(t, Config{Hardware: src.Hardware, Names: Names{PiKVM: true}})

	b, err := os.ReadFile(filepath.Join("testdata", "pikvm-4.197.names"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(b))
	var got []string
	for _, name := range families(out) {
		if !strings.HasPrefix(name, "pikvm_gpio_") {
			got = append(got, name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("families (-want +got):\n%s", lineDiff(strings.Join(want, "\n")+"\n", strings.Join(got, "\n")+"\n"))
	}
	if n := strings.Count(out, "# TYPE "); n != strings.Count(out, " gauge\n") {
		t.Errorf("not every family a gauge:\n%s", out)
	}
	for _, line := range []string{
		"pikvm_hw_temp_cpu 62.322",
		"pikvm_hw_cpu_percent 1",
		"pikvm_hw_mem_total 3.976179712e+09",
		"pikvm_hw_mem_available 3.494125568e+09",
		"pikvm_hw_mem_percent 12.1",
		"pikvm_hw_throttling_raw_flags 0",
		"pikvm_hw_throttling_undervoltage_now 0",
		"pikvm_atx_enabled 1",
		"pikvm_atx_power 1",
		"pikvm_gpio_input_online_atx_power_led 1",
		"pikvm_gpio_input_state_atx_power_led 1",
		"pikvm_gpio_input_state_atx_hdd_led 0",
		"pikvm_gpio_output_online_atx_power_switch 1",
		"pikvm_gpio_output_state_atx_power_switch 0",
	} {
		if !strings.Contains(out, "\n"+line+"\n") {
			t.Errorf("no line %q in:\n%s", line, out)
		}
	}
	if strings.Contains(out, "# TYPE kvmd_") {
		t.Errorf("kvmd's names written with pikvm only:\n%s", out)
	}
	promtoolCheck(t, []byte(out))
}

// TestPiKVMValues: the values follow /api/info's: throttling flags set,
// GPIO levels that cannot be read, pins without a direction, names that
// need cleaning and that collide, a board without a power LED.
func TestPiKVMValues(t *testing.T) {
	out := new("out")
	in := new("in")
	h := info.Hardware{
		Health: info.Health{Throttling: &info.Throttling{
			RawFlags:    0x50005,
			ParsedFlags: map[string]info.NowPast{"undervoltage": {Now: true, Past: true}, "throttled": {Now: true, Past: true}},
			IgnorePast:  true,
			Source:      hw.ThrottleMailbox,
		}},
		GPIO: map[string]hw.PinState{
			"relay-1":     {Direction: out, Level: new(true)},
			"relay_1":     {Direction: out, Level: new(false)},
			"button.2":    {Direction: in},
			"uart":        {},
			"atx_hdd_led": {Direction: in, Level: new(true)},
		},
	}
	got := write(t, Config{Hardware: func() info.Hardware { return h }, Names: Names{PiKVM: true}})
	for _, line := range []string{
		"pikvm_hw_throttling_raw_flags 327685",
		"pikvm_hw_throttling_undervoltage_now 1",
		"pikvm_hw_throttling_undervoltage_past 1",
		"pikvm_hw_throttling_throttled_now 1",
		"pikvm_hw_throttling_freq_capped_now 0",
		"pikvm_hw_throttling_ignore_past 1",
		"pikvm_atx_enabled 0",
		"pikvm_atx_power 0",
		"pikvm_fan_monitored 0",
		"pikvm_gpio_input_online_button_2 0",
		"pikvm_gpio_input_state_button_2 0",
		"pikvm_gpio_input_state_atx_hdd_led 1",
		// relay-1 sorts first and wins; relay_1 is left out.
		"pikvm_gpio_output_state_relay_1 1",
	} {
		if !strings.Contains(got, "\n"+line+"\n") {
			t.Errorf("no line %q in:\n%s", line, got)
		}
	}
	for _, absent := range []string{"uart", "pikvm_hw_temp_cpu", "pikvm_hw_mem_", "pikvm_hw_cpu_percent"} {
		if strings.Contains(got, absent) {
			t.Errorf("%s written:\n%s", absent, got)
		}
	}
}

// TestNames: each name set alone, both, and the zero value (kvmd's).
func TestNames(t *testing.T) {
	src := boardSource(t, "rpi4")
	for _, tc := range []struct {
		names       Names
		kvmd, pikvm bool
	}{
		{Names{}, true, false},
		{Names{KVMD: true}, true, false},
		{Names{PiKVM: true}, false, true},
		{Names{KVMD: true, PiKVM: true}, true, true},
	} {
		t.Run(tc.names.String(), func(t *testing.T) {
			out := write(t, Config{Version: "x", Hardware: src.Hardware, Names: tc.names})
			if got := strings.Contains(out, "\nkvmd_cpu_temperature_celsius "); got != tc.kvmd {
				t.Errorf("kvmd's temperature written %v, want %v", got, tc.kvmd)
			}
			if got := strings.Contains(out, "\npikvm_hw_temp_cpu "); got != tc.pikvm {
				t.Errorf("PiKVM's temperature written %v, want %v", got, tc.pikvm)
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    Names
		wantErr bool
	}{
		{[]string{"kvmd"}, Names{KVMD: true}, false},
		{[]string{"pikvm"}, Names{PiKVM: true}, false},
		{[]string{"kvmd,pikvm"}, Names{KVMD: true, PiKVM: true}, false},
		{[]string{"pikvm", " kvmd "}, Names{KVMD: true, PiKVM: true}, false},
		{nil, Names{}, true},
		{[]string{""}, Names{}, true},
		{[]string{"kvmd,prometheus"}, Names{}, true},
	} {
		got, err := ParseNames(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseNames(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
