package httpd

import (
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/devices"
	"kvmd/hw"
	"kvmd/ugpio"
)

// TestGPIOOutputs: /api/gpio/switch and /pulse drive the configuration's
// output channels (package ugpio) on a periph pin, with kvmd's answers:
// busy 409, an output that does not allow the operation 400, an input
// channel (read-only) 400, an unknown channel 400, and bad parameters
// refused before anything is driven; viewers may not.
func TestGPIOOutputs(t *testing.T) {
	relay := &gpiotest.Pin{N: "TEST_RELAY"}
	button := &gpiotest.Pin{N: "TEST_BUTTON"}
	sw := ugpio.DefaultOutput("relay", ugpio.NewPin(relay))
	sw.Pulse, sw.BusyDelay = 0, 5*time.Second // the busy answer below is no race
	pulse := ugpio.DefaultOutput("button", ugpio.NewPin(button))
	pulse.Switch, pulse.BusyDelay = false, 0
	outs, err := ugpio.New(ugpio.Config{Outputs: []ugpio.Output{sw, pulse}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outs.Close)
	d, _ := testDevices(t)
	// The daemon's "gpio" subsystem: an input channel of the board, and
	// the outputs.
	d.GPIO = devices.GPIO{Pins: []hw.PinSpec{{Name: "v3_usb_breaker", GPIO: "GPIO5"}}, Outputs: outs}
	e := newEnv(t, envOpts{devices: d})
	for _, tc := range []struct {
		method, path, errName string
		status                int
	}{
		{"POST", "/api/gpio/switch?channel=relay&state=0", "", 200},
		{"POST", "/api/gpio/switch?channel=relay&state=1", "GpioChannelIsBusyError", 409},
		{"POST", "/api/gpio/pulse?channel=relay", "GpioPulseNotSupported", 400},
		{"POST", "/api/gpio/switch?channel=button&state=1", "GpioSwitchNotSupported", 400},
		{"POST", "/api/gpio/pulse?channel=button&delay=0.1&wait=1", "", 200},
		{"POST", "/api/gpio/switch?channel=v3_usb_breaker&state=1", "GpioSwitchNotSupported", 400},
		{"POST", "/api/gpio/pulse?channel=nope", "GpioChannelNotFoundError", 400},
		{"POST", "/api/gpio/pulse?channel=button&delay=-1", "ValidatorError", 400},
		{"POST", "/api/gpio/pulse?channel=button&delay=NaN", "ValidatorError", 400},
		{"POST", "/api/gpio/pulse?channel=button&delay=inf", "ValidatorError", 400},
		{"POST", "/api/gpio/pulse?channel=button&delay=3601", "ValidatorError", 400},
		{"POST", "/api/gpio/switch?channel=relay&state=maybe", "ValidatorError", 400},
	} {
		r := e.req(tc.method, tc.path, adminHdr, "")
		if r.status != tc.status || r.errName != tc.errName {
			t.Errorf("%s %s: %d %s %q, want %d %s", tc.method, tc.path, r.status, r.errName, r.errMsg, tc.status, tc.errName)
		}
	}
	if r := e.req("POST", "/api/gpio/pulse?channel=button", viewerHdr, ""); r.status != 403 {
		t.Errorf("a viewer's pulse: %d %s", r.status, r.errName)
	}
	if relay.Read() != gpio.Low || button.Read() != gpio.Low {
		t.Errorf("pins left %v %v, want both low (switched off, pulse over)", relay.Read(), button.Read())
	}
}
