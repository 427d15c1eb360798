package metrics

import (
	"fmt"
	"slices"
	"strings"

	"kvmd/info"
)

// Names chooses the families an Exporter writes: kvmd's own (kvmd_*,
// with labels and units), PiKVM's (pikvm_*, as PiKVM's kvmd 4.197 names
// them, so that its dashboards and alerts keep working), or both. The
// zero value writes kvmd's only.
type Names struct {
	KVMD, PiKVM bool
}

// NameSets are the names ParseNames accepts, in the order String writes
// them.
var NameSets = []string{"kvmd", "pikvm"}

// ParseNames reads a list of name sets (from NameSets), each item one name
// or several separated by commas. It refuses an empty list: that would
// leave the endpoint with nothing of the machine's.
func ParseNames(items []string) (Names, error) {
	var n Names
	for _, item := range items {
		for s := range strings.SplitSeq(item, ",") {
			switch strings.TrimSpace(s) {
			case "kvmd":
				n.KVMD = true
			case "pikvm":
				n.PiKVM = true
			case "":
			default:
				return Names{}, fmt.Errorf("metrics: unknown name set %q: want %s", s, strings.Join(NameSets, ", "))
			}
		}
	}
	if !n.KVMD && !n.PiKVM {
		return Names{}, fmt.Errorf("metrics: no name set: want at least one of %s", strings.Join(NameSets, ", "))
	}
	return n, nil
}

func (n Names) String() string {
	var s []string
	if n.KVMD {
		s = append(s, "kvmd")
	}
	if n.PiKVM {
		s = append(s, "pikvm")
	}
	return strings.Join(s, ",")
}

// pikvmCollector writes PiKVM's families from the same readings as kvmd's.
// PiKVM's kvmd (kvmd/apps/kvmd/api/export.py, 4.197) walks the JSON of
// its ATX state, its user GPIO channels and /api/info's health and fan,
// and writes every number or boolean as an untyped-by-label gauge named by
// its path: pikvm_hw_temp_cpu, pikvm_hw_mem_total,
// pikvm_hw_throttling_undervoltage_now (parsed_flags is left out of the
// path), pikvm_gpio_input_state_<channel>. Nulls are left out, as there.
//
// The GPIO names depend on the board's pins, so the collector makes its
// descriptions at each scrape.
type pikvmCollector struct {
	hardware func() info.Hardware
}

// collect adds PiKVM's families to e.
func (c *pikvmCollector) collect(e *exposition) {
	h := c.hardware()
	gauge := func(name, help string, v float64) {
		e.add(newDesc(name, typeGauge, help), v)
	}

	// ATX: PiKVM's ATX plugin is enabled when it is configured (gpio) and
	// reports the power LED; here, when the board has a power LED pin.
	led, ok := h.GPIO["atx_power_led"]
	gauge("pikvm_atx_enabled", "1 when the board has an ATX power LED pin (PiKVM: the ATX plugin is enabled).", bit(ok))
	gauge("pikvm_atx_power", "1 when the ATX power LED is on.", bit(ok && led.Level != nil && *led.Level))

	// GPIO: PiKVM's user GPIO channels are the board's named pins here;
	// the mode comes from the pin's direction, and a pin whose direction
	// is unknown is left out (it is neither). A channel's name is made a
	// metric name as PiKVM does, every character other than a letter,
	// digit or underscore becoming an underscore; the first of two pins
	// that end up with one name wins (sorted), rather than the scrape
	// failing on a duplicate.
	names := make([]string, 0, len(h.GPIO))
	for name := range h.GPIO {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for _, name := range names {
		p := h.GPIO[name]
		if p.Direction == nil {
			continue
		}
		mode := "input"
		if *p.Direction == "out" {
			mode = "output"
		}
		ch := metricName(name)
		if seen[mode+ch] {
			continue
		}
		seen[mode+ch] = true
		online := p.Level != nil
		gauge("pikvm_gpio_"+mode+"_online_"+ch, "1 when the level of GPIO pin "+name+" can be read.", bit(online))
		gauge("pikvm_gpio_"+mode+"_state_"+ch, "Logical level of GPIO pin "+name+" (0 when it cannot be read).", bit(online && *p.Level))
	}

	hl := h.Health
	if t := hl.Temp.CPU; t != nil {
		gauge("pikvm_hw_temp_cpu", "CPU temperature, in degrees Celsius (kvmd_cpu_temperature_celsius).", *t)
	}
	if p := hl.CPU.Percent; p != nil {
		gauge("pikvm_hw_cpu_percent", "Busy share of the CPU, in percent (kvmd_cpu_usage_percent).", float64(*p))
	}
	if m := hl.Mem; m.Total != nil && m.Available != nil && m.Percent != nil {
		gauge("pikvm_hw_mem_available", "Memory available, in bytes (kvmd_memory_available_bytes).", float64(*m.Available))
		gauge("pikvm_hw_mem_percent", "Share of memory in use, in percent (kvmd_memory_used_percent).", *m.Percent)
		gauge("pikvm_hw_mem_total", "Memory the kernel manages, in bytes (kvmd_memory_total_bytes).", float64(*m.Total))
	}
	if th := hl.Throttling; th != nil {
		// As /api/info's hw.health.throttling: every flag, including those
		// the hwmon source cannot see (false there; kvmd_throttling_flag
		// leaves them out).
		for _, flag := range throttlingFlags {
			f := th.ParsedFlags[flag]
			gauge("pikvm_hw_throttling_"+flag+"_now", "1 when the firmware's "+flag+" flag is set now.", bit(f.Now))
			gauge("pikvm_hw_throttling_"+flag+"_past", "1 when the firmware's "+flag+" flag has been set since boot.", bit(f.Past))
		}
		gauge("pikvm_hw_throttling_ignore_past", "1 when the board profile says to ignore the past flags.", bit(th.IgnorePast))
		gauge("pikvm_hw_throttling_raw_flags", "The firmware's get_throttled bits.", float64(th.RawFlags))
	}

	// kvmd does not drive a fan (PiKVM's kvmd-fan): PiKVM reports the same
	// when it has none configured.
	gauge("pikvm_fan_monitored", "1 when a fan is monitored; kvmd monitors none.", 0)
}

// metricName makes s a metric name's tail: every byte that is not an
// ASCII letter, digit or underscore becomes an underscore (PiKVM uses
// Python's \w, which also keeps non-ASCII letters; a metric name cannot).
func metricName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
