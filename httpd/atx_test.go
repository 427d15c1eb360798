package httpd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/atx"
	"kvmd/events"
)

// TestATXOneBusyRegion: while power_long holds the power button, a reset
// through the API is AtxIsBusyError 409, as every other ATX operation, and
// the state says which button acts. The clock is fake: the press lasts
// exactly as long as the test says.
func TestATXOneBusyRegion(t *testing.T) {
	clock := clockwork.NewFakeClock()
	hub := &events.Hub{}
	ctl, err := atx.New(atx.Config{
		Pins: &atx.Pins{
			// The host is on: its power LED is lit.
			PowerLED: &gpiotest.Pin{N: "GPIO24", L: gpio.High}, HDDLED: &gpiotest.Pin{N: "GPIO22"},
			PowerSwitch: &gpiotest.Pin{N: "GPIO23"}, ResetSwitch: &gpiotest.Pin{N: "GPIO27"},
		},
		OnChange: func(st atx.State) { hub.Publish("atx", st) },
		Clock:    clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	e := newEnv(t, envOpts{devices: &Devices{Events: hub, ATX: ctl, Version: "4.108.1", Subsystems: testSubsystems(atx.Subsystem{C: ctl}, nil)}})
	admin := map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}
	if r := e.req("POST", "/api/atx/click?button=power_long", admin, ""); r.status != 200 {
		t.Fatalf("power_long: %d %s", r.status, r.body)
	}
	clock.BlockUntil(1)
	clock.Advance(time.Second)
	for _, p := range []string{"/api/atx/click?button=reset", "/api/atx/click?button=power", "/api/atx/power?action=off_hard", "/api/atx/power?action=reset_hard"} {
		r := e.req("POST", p, admin, "")
		if r.status != 409 || r.errName != "AtxIsBusyError" {
			t.Errorf("POST %s 1 s into power_long: %d %s, want 409 AtxIsBusyError", p, r.status, r.errName)
		}
	}
	if t.Failed() {
		return // the presses accepted by mistake would upset the timing below
	}
	if r := e.req("GET", "/api/atx", admin, ""); r.status != 200 || !strings.Contains(string(r.body), `"busy":true,"acts":{"power":true,"reset":false}`) {
		t.Errorf("GET /api/atx during power_long: %d %s", r.status, r.body)
	}
	// Released at 5.5 s, busy one more second; then a reset is accepted.
	clock.Advance(atx.LongClickDelay - time.Second)
	clock.BlockUntil(1)
	clock.Advance(atx.AfterRelease)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctl.State().Busy && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // the release goroutine leaves the region
	}
	done := make(chan reply, 1)
	go func() { done <- e.req("POST", "/api/atx/click?button=reset&wait=1", admin, "") }()
	clock.BlockUntil(1)
	clock.Advance(atx.ClickDelay)
	clock.BlockUntil(1)
	clock.Advance(atx.AfterRelease)
	if r := <-done; r.status != 200 {
		t.Errorf("reset once idle, wait=1: %d %s", r.status, r.body)
	}
}
