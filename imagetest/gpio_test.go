package imagetest

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// gpioChipRe is gpioinfo's chip line (libgpiod 1.6): "gpiochip0 - 8 lines:".
var gpioChipRe = regexp.MustCompile(`(?m)^(gpiochip\d+) - (\d+) lines:$`)

// testGPIO: what the daemon can honestly show of the virt board's GPIO
// chip, a pl061 with 8 unnamed lines: periph, inside the sandbox, opened
// the chip and read its lines (the daemon's log names it, as gpioinfo
// does); no line has a name, so none is a pin, and the generic board's
// profile names none: hw.gpio and /api/gpio are empty, not invented.
func (s *system) testGPIO(t *testing.T) {
	sh := s.m.shell
	info := sh.must(t, "gpioinfo")
	m := gpioChipRe.FindAllStringSubmatch(info, -1)
	if len(m) != 1 {
		t.Fatalf("gpioinfo: want one chip\n%s", info)
	}
	chip, lines := m[0][1], m[0][2]
	if strings.Count(info, "unnamed") != mustAtoi(t, lines) {
		t.Errorf("gpioinfo: not every line unnamed\n%s", info)
	}
	t.Logf("guest: %s, %s lines, unnamed; its node %s", chip, lines, sh.must(t, "stat -c '%U:%G %a' /dev/"+chip))

	// periph's reading, as the daemon logged it at start.
	log := sh.must(t, "journalctl -b -o cat _SYSTEMD_UNIT=kvmd.service | grep GPIO; true")
	want := regexp.MustCompile(`GPIO chip chip=` + chip + ` label=\S+ lines=` + lines + ` named=0`)
	if !want.MatchString(log) {
		t.Errorf("the daemon's log does not name %s with %s unnamed lines:\n%s", chip, lines, log)
	}
	if strings.Contains(log, "no GPIO on this machine") || strings.Contains(log, "cannot be opened") {
		t.Errorf("the daemon's log:\n%s", log)
	}

	var hw struct {
		HW struct {
			GPIO map[string]any `json:"gpio"`
		} `json:"hw"`
	}
	s.getJSON(t, "/api/info?fields=hw", &hw)
	if len(hw.HW.GPIO) != 0 {
		t.Errorf("hw.gpio %v: the virt board names no pins", hw.HW.GPIO)
	}
	var g struct {
		Model struct {
			Scheme struct {
				Inputs  map[string]any `json:"inputs"`
				Outputs map[string]any `json:"outputs"`
			} `json:"scheme"`
		} `json:"model"`
	}
	s.getJSON(t, "/api/gpio", &g)
	if len(g.Model.Scheme.Inputs) != 0 || len(g.Model.Scheme.Outputs) != 0 {
		t.Errorf("/api/gpio channels %v %v", g.Model.Scheme.Inputs, g.Model.Scheme.Outputs)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
