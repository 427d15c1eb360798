package atx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// recPin is a gpiotest pin that records when each level was driven.
type recPin struct {
	gpiotest.Pin
	mu    sync.Mutex
	edges []edge
}

type edge struct {
	l  gpio.Level
	at time.Time
}

func (p *recPin) Out(l gpio.Level) error {
	p.mu.Lock()
	p.edges = append(p.edges, edge{l, time.Now()})
	p.mu.Unlock()
	return p.Pin.Out(l)
}

func (p *recPin) history() []edge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]edge(nil), p.edges...)
}

type board struct {
	powerLED, hddLED *gpiotest.Pin
	powerSw, resetSw *recPin
	pins             *Pins
	mu               sync.Mutex
	changes          []State
}

func newBoard(t *testing.T, cfg Config) (*board, *Controller) {
	t.Helper()
	b := &board{
		powerLED: &gpiotest.Pin{N: "GPIO24"}, hddLED: &gpiotest.Pin{N: "GPIO22"},
		powerSw: &recPin{Pin: gpiotest.Pin{N: "GPIO23", L: gpio.High}}, resetSw: &recPin{Pin: gpiotest.Pin{N: "GPIO27", L: gpio.High}},
	}
	b.pins = &Pins{PowerLED: b.powerLED, HDDLED: b.hddLED, PowerSwitch: b.powerSw, ResetSwitch: b.resetSw}
	cfg.Pins = b.pins
	cfg.OnChange = func(st State) {
		b.mu.Lock()
		b.changes = append(b.changes, st)
		b.mu.Unlock()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return b, c
}

func (b *board) setPower(on bool) {
	b.powerLED.Lock()
	b.powerLED.L = gpio.Level(on)
	b.powerLED.Unlock()
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 3 s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNewReleasesSwitches(t *testing.T) {
	b, c := newBoard(t, Config{})
	for _, p := range []*recPin{b.powerSw, b.resetSw} {
		if h := p.history(); len(h) != 1 || h[0].l != gpio.Low {
			t.Errorf("%s: driven %v at start, want one Low", p.N, h)
		}
	}
	if st := c.State(); !st.Enabled || st.Busy {
		t.Errorf("state = %+v, want enabled and idle", st)
	}
}

func TestDisabled(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.State(); st != (State{}) {
		t.Errorf("disabled state = %+v, want all false", st)
	}
	for _, err := range []error{c.Click(context.Background(), ButtonPower, true), c.Power(context.Background(), ActionOn, false)} {
		if !errors.Is(err, ErrDisabled) {
			t.Errorf("err = %v, want ErrDisabled", err)
		}
	}
}

// TestClickPulse checks kvmd's pulse lengths: the switch is high for the
// click delay, then the button stays busy for AfterRelease.
func TestClickPulse(t *testing.T) {
	for _, tc := range []struct {
		button string
		pin    func(*board) *recPin
		hold   time.Duration
	}{
		{ButtonPower, func(b *board) *recPin { return b.powerSw }, 100 * time.Millisecond},
		{ButtonReset, func(b *board) *recPin { return b.resetSw }, 100 * time.Millisecond},
		{ButtonPowerLong, func(b *board) *recPin { return b.powerSw }, 300 * time.Millisecond},
	} {
		t.Run(tc.button, func(t *testing.T) {
			// The long click's 5.5 s is shortened here; its default is
			// checked below.
			b, c := newBoard(t, Config{LongClickDelay: 300 * time.Millisecond, AfterRelease: 200 * time.Millisecond})
			start := time.Now()
			if err := c.Click(context.Background(), tc.button, true); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			h := tc.pin(b).history()
			if len(h) != 3 || h[1].l != gpio.High || h[2].l != gpio.Low {
				t.Fatalf("levels driven %v, want Low (start), High, Low", h)
			}
			held := h[2].at.Sub(h[1].at)
			if held < tc.hold || held > tc.hold+80*time.Millisecond {
				t.Errorf("held %v, want %v", held, tc.hold)
			}
			if took < tc.hold+200*time.Millisecond {
				t.Errorf("wait=1 returned after %v, before the release and its busy time", took)
			}
			if c.State().Busy {
				t.Error("still busy after the click ended")
			}
		})
	}
	if ClickDelay != 100*time.Millisecond || LongClickDelay != 5500*time.Millisecond || AfterRelease != time.Second {
		t.Error("kvmd's delays are 0.1 s, 5.5 s and 1 s")
	}
}

func TestBusy(t *testing.T) {
	b, c := newBoard(t, Config{AfterRelease: 300 * time.Millisecond})
	if err := c.Click(context.Background(), ButtonPower, false); err != nil {
		t.Fatal(err)
	}
	st := c.State()
	if !st.Busy || !st.Acts.Power || st.Acts.Reset {
		t.Errorf("state during a power click = %+v", st)
	}
	if err := c.Click(context.Background(), ButtonPowerLong, false); !errors.Is(err, ErrBusy) {
		t.Errorf("second power click: %v, want ErrBusy", err)
	}
	// The reset button is its own region.
	if err := c.Click(context.Background(), ButtonReset, false); err != nil {
		t.Errorf("reset during a power click: %v", err)
	}
	waitFor(t, "idle", func() bool { return !c.State().Busy })
	_ = b
}

// TestPowerActions: on, off, off_hard and reset_hard click only when the
// power LED says they are needed.
func TestPowerActions(t *testing.T) {
	for _, tc := range []struct {
		action  string
		ledOn   bool
		pressed func(*board) *recPin
	}{
		{ActionOn, false, func(b *board) *recPin { return b.powerSw }},
		{ActionOn, true, nil},
		{ActionOff, true, func(b *board) *recPin { return b.powerSw }},
		{ActionOff, false, nil},
		{ActionOffHard, false, nil},
		{ActionResetHard, true, func(b *board) *recPin { return b.resetSw }},
		{ActionResetHard, false, nil},
	} {
		name := tc.action
		if tc.ledOn {
			name += "/led_on"
		}
		t.Run(name, func(t *testing.T) {
			b, c := newBoard(t, Config{AfterRelease: time.Millisecond, ClickDelay: 5 * time.Millisecond})
			b.setPower(tc.ledOn)
			waitFor(t, "LED read", func() bool { return c.State().Leds.Power == tc.ledOn })
			if err := c.Power(context.Background(), tc.action, true); err != nil {
				t.Fatal(err)
			}
			for _, p := range []*recPin{b.powerSw, b.resetSw} {
				n := len(p.history())
				want := 1
				if tc.pressed != nil && tc.pressed(b) == p {
					want = 3
				}
				if n != want {
					t.Errorf("%s driven %d times, want %d", p.N, n, want)
				}
			}
		})
	}
}

func TestLEDChangeReported(t *testing.T) {
	b, c := newBoard(t, Config{})
	b.setPower(true)
	b.hddLED.Lock()
	b.hddLED.L = gpio.High
	b.hddLED.Unlock()
	waitFor(t, "change reported", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		n := len(b.changes)
		return n > 0 && b.changes[n-1].Leds.Power && b.changes[n-1].Leds.HDD
	})
	if st := c.State(); !st.Leds.Power || !st.Leds.HDD {
		t.Errorf("state = %+v", st)
	}
	// Active-low wiring inverts the reading: a low pin is a lit LED.
	low, err := New(Config{Pins: &Pins{
		PowerLED: &gpiotest.Pin{N: "GPIO4"}, HDDLED: &gpiotest.Pin{N: "GPIO5"}, PowerLEDActiveLow: true,
		PowerSwitch: &gpiotest.Pin{N: "GPIO23"}, ResetSwitch: &gpiotest.Pin{N: "GPIO27"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if st := low.State(); !st.Leds.Power || st.Leds.HDD {
		t.Errorf("active-low state = %+v, want power on, hdd off", st)
	}
}
