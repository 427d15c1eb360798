package imagetest

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvmd/redfish/redfishtest"
)

// The pl061 of qemu's virt machine: its lines as this test wires them. Line
// 3 is the guest kernel's power key (gpio-keys), taken; the others are
// free, unnamed lines (testGPIO).
const (
	linePowerLED    = 1
	lineHDDLED      = 2
	linePowerSwitch = 4
	lineResetSwitch = 5
	lineRelay       = 6
)

// pl061Conf is what testRedfish adds to the daemon's configuration: an
// ATX board and an output channel on the pl061's lines.
var pl061Conf = fmt.Sprintf(`atx-pin: [power_led=gpiochip0/%d, hdd_led=gpiochip0/%d, power_switch=gpiochip0/%d, reset_switch=gpiochip0/%d]
gpio-output: ["relay=gpiochip0/%d,pulse-max=1"]
`, linePowerLED, lineHDDLED, linePowerSwitch, lineResetSwitch, lineRelay)

// pl061Out is qemu's trace of the pl061 driving an output line
// (hw/gpio/trace-events: pl061_set_output, "%s setting output %d to %d"
// in qemu 7.2), with the log backend's "PID@SECONDS:" before it (-msg
// timestamp=on).
var pl061Out = regexp.MustCompile(`(?:(\d+)@(\d+\.\d+):)?pl061_set_output \S+ setting output (\d+)(?: line)? to (\d)`)

// lineEvent is one level qemu's pl061 put on a line, and when.
type lineEvent struct {
	line, level int
	at          float64 // seconds, 0 when the trace has no time
}

// gpioTrace reads the levels qemu's pl061 drove, from the machine's trace
// file, from event from on.
func (m *machine) gpioTrace(t *testing.T, from int) []lineEvent {
	t.Helper()
	f, err := os.Open(m.trace)
	if err != nil {
		t.Fatalf("qemu's trace: %v", err)
	}
	defer f.Close()
	var out []lineEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mm := pl061Out.FindStringSubmatch(sc.Text())
		if mm == nil {
			continue
		}
		e := lineEvent{}
		e.at, _ = strconv.ParseFloat(mm[2], 64)
		e.line, _ = strconv.Atoi(mm[3])
		e.level, _ = strconv.Atoi(mm[4])
		out = append(out, e)
	}
	if from > len(out) {
		return nil
	}
	return out[from:]
}

// presses returns the high pulses of line among events: each one's length
// (0 when the trace has no times), and whether the line was left high.
func presses(events []lineEvent, line int) (lens []time.Duration, high bool) {
	var since float64
	for _, e := range events {
		if e.line != line {
			continue
		}
		switch {
		case e.level == 1 && !high:
			high, since = true, e.at
		case e.level == 0 && high:
			high = false
			lens = append(lens, time.Duration((e.at-since)*float64(time.Second)))
		}
	}
	return lens, high
}

// testRedfish: Redfish power on a real GPIO chip. The daemon is given an
// ATX board and an output channel on lines of the virt machine's pl061
// (gpiochip0/N, lines without names); redfishtool (Basic) and sushy (a
// Redfish session, X-Auth-Token) from the host press the power button
// through ComputerSystem.Reset, and /api/gpio pulses and switches the
// output. The far side is qemu itself: its trace of the pl061's output
// lines shows each press on line 4, of kvmd's 100 ms, none on the reset
// line, and the output's pulse and switch on line 6.
func (s *system) testRedfish(t *testing.T) {
	sh := s.m.shell
	start := time.Now()
	sh.must(t, "cp -a /etc/kvmd/kvmd.yaml /run/kvmd-imagetest.yaml && cat >> /etc/kvmd/kvmd.yaml <<'EOF'\n"+pl061Conf+"EOF\nsystemctl restart kvmd")
	t.Cleanup(func() { sh.must(t, "mv /run/kvmd-imagetest.yaml /etc/kvmd/kvmd.yaml && systemctl restart kvmd") })
	from := len(s.m.gpioTrace(t, 0))

	var atx struct {
		Enabled bool `json:"enabled"`
		Busy    bool `json:"busy"`
		Leds    struct {
			Power bool `json:"power"`
		} `json:"leds"`
	}
	idle := func() bool {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			s.getJSON(t, "/api/atx", &atx)
			if !atx.Busy {
				return atx.Leds.Power
			}
		}
		t.Fatal("the ATX board stays busy")
		return false
	}
	on := idle()
	if !atx.Enabled {
		t.Fatalf("/api/atx: not enabled with the pl061's lines configured\n%s", sh.must(t, "journalctl -b -o cat -u kvmd.service | tail -20"))
	}
	state := map[bool]string{true: "On", false: "Off"}
	admin := redfishtest.Target{Addr: fmt.Sprintf("127.0.0.1:%d", s.m.port), TLS: true, User: "admin", Password: s.passwd}
	out, err := redfishtest.Redfishtool(t, admin, "-P", "PowerState", "Systems", "-1", "get")
	if err != nil || !strings.Contains(out, `"PowerState": "`+state[on]+`"`) {
		t.Fatalf("redfishtool PowerState (the power LED line reads %v): %v\n%s", on, err, out)
	}
	if out, err := redfishtest.Redfishtool(t, admin, "Systems", "-1", "reset", "PushPowerButton"); err != nil {
		t.Fatalf("redfishtool reset PushPowerButton: %v\n%s", err, out)
	}
	idle()
	// The action that presses power whatever the LED reads.
	action := map[bool]string{true: "RESET_GRACEFUL_SHUTDOWN", false: "RESET_ON"}[on]
	out, err = redfishtest.Sushy(t, admin, `
import os, sushy
s = sushy.Sushy(os.environ['KVMD_BASE'] + '/redfish/v1', username=os.environ['KVMD_USER'],
                password=os.environ['KVMD_PASSWORD'], verify=os.environ['KVMD_VERIFY'] or False)
print('auth', 'session' if s._auth.get_session_key() else 'basic')
system = s.get_system()
print('power', system.power_state.value)
system.reset_system(sushy.`+action+`)
s._auth.close()
`)
	if err != nil || !strings.Contains(out, "auth session") || !strings.Contains(out, "power "+state[on]) {
		t.Fatalf("sushy: %v\n%s", err, out)
	}
	idle()

	// The output channel: a pulse, then switched on and off.
	for _, q := range []string{"pulse?channel=relay&delay=0.3&wait=1", "switch?channel=relay&state=1&wait=1"} {
		if st, body := s.post(t, "/api/gpio/"+q, ""); st != 200 {
			t.Fatalf("/api/gpio/%s: %d %s", q, st, body)
		}
	}
	var gpio struct {
		State struct {
			Outputs map[string]struct{ Online, State, Busy bool } `json:"outputs"`
		} `json:"state"`
	}
	s.getJSON(t, "/api/gpio", &gpio)
	if o := gpio.State.Outputs["relay"]; !o.Online || !o.State {
		t.Errorf("/api/gpio relay after switch on: %+v", gpio.State.Outputs)
	}
	if st, body := s.post(t, "/api/gpio/switch?channel=relay&state=0&wait=1", ""); st != 200 {
		t.Fatalf("switch off: %d %s", st, body)
	}

	events := s.m.gpioTrace(t, from)
	power, held := presses(events, linePowerSwitch)
	if len(power) != 2 || held {
		t.Errorf("power switch (line %d): presses %v, left high %v; want 2 presses:\n%v", linePowerSwitch, power, held, events)
	}
	for _, d := range power {
		// kvmd's 100 ms, as qemu's clock saw it, under TCG.
		if d != 0 && (d < 90*time.Millisecond || d > 2*time.Second) {
			t.Errorf("a press of %v, want about 100 ms", d)
		}
	}
	if reset, _ := presses(events, lineResetSwitch); len(reset) != 0 {
		t.Errorf("the reset switch (line %d) was pressed: %v", lineResetSwitch, reset)
	}
	relay, relayHigh := presses(events, lineRelay)
	if len(relay) != 2 || relayHigh {
		t.Errorf("relay (line %d): pulses %v, left high %v; want the pulse and the switch on and off:\n%v", lineRelay, relay, relayHigh, events)
	} else if relay[0] != 0 && (relay[0] < 290*time.Millisecond || relay[0] > 3*time.Second) {
		t.Errorf("the relay's pulse took %v, want about 0.3 s", relay[0])
	}
	t.Logf("power LED line reads %v; power switch presses %v (qemu's pl061 trace); relay %v; %v", on, power, relay, time.Since(start).Round(100*time.Millisecond))
}
