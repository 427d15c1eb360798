package atx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// Every test here runs on clockwork's fake clock: time moves only when the
// test advances it, and the test waits for the controller's timers with
// BlockUntil, so nothing depends on how fast this machine is.

// recPin is a gpiotest pin that records each level driven and the fake
// clock's time then.
type recPin struct {
	gpiotest.Pin
	clock clockwork.Clock
	mu    sync.Mutex
	edges []edge
}

type edge struct {
	l  gpio.Level
	at time.Time
}

func (p *recPin) Out(l gpio.Level) error {
	p.mu.Lock()
	p.edges = append(p.edges, edge{l, p.clock.Now()})
	p.mu.Unlock()
	return p.Pin.Out(l)
}

func (p *recPin) history() []edge {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]edge(nil), p.edges...)
}

// level is the level last driven.
func (p *recPin) level() gpio.Level {
	h := p.history()
	if len(h) == 0 {
		return p.Pin.Read()
	}
	return h[len(h)-1].l
}

type board struct {
	clock            clockwork.FakeClock
	powerLED, hddLED *gpiotest.Pin
	powerSw, resetSw *recPin
	changes          chan State
	// timers is how many timers the controller keeps when idle: the LED
	// poller's ticker.
	timers int
}

// newBoard returns a controller on fake pins and a fake clock, its LED
// poller running. The switches start high, as a daemon that died with a
// button held leaves them. powerOn lights the power LED before New.
func newBoard(t *testing.T, cfg Config, powerOn bool) (*board, *Controller) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	b := &board{
		clock:    clock,
		powerLED: &gpiotest.Pin{N: "GPIO24", L: gpio.Level(powerOn)}, hddLED: &gpiotest.Pin{N: "GPIO22"},
		powerSw: &recPin{Pin: gpiotest.Pin{N: "GPIO23", L: gpio.High}, clock: clock},
		resetSw: &recPin{Pin: gpiotest.Pin{N: "GPIO27", L: gpio.High}, clock: clock},
		changes: make(chan State, 100),
		timers:  1,
	}
	cfg.Pins = &Pins{PowerLED: b.powerLED, HDDLED: b.hddLED, PowerSwitch: b.powerSw, ResetSwitch: b.resetSw}
	cfg.Clock = clock
	if cfg.OnChange == nil {
		cfg.OnChange = func(st State) { b.changes <- st }
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	clock.BlockUntil(b.timers) // the poller's ticker
	return b, c
}

// next returns the next state published, failing after 5 s (a hang, not a
// timing window: nothing here waits for the clock).
func (b *board) next(t *testing.T) State {
	t.Helper()
	select {
	case st := <-b.changes:
		return st
	case <-time.After(5 * time.Second):
		t.Fatal("no state published")
		return State{}
	}
}

// press advances the clock through a press begun by Click: delay held,
// then AfterRelease busy. Each step waits until the controller set its
// timer.
func (b *board) press(delay, after time.Duration) {
	b.clock.BlockUntil(b.timers + 1)
	b.clock.Advance(delay)
	b.clock.BlockUntil(b.timers + 1)
	b.clock.Advance(after)
}

func busyState(power, reset bool) State {
	var st State
	st.Enabled, st.Busy = true, power || reset
	st.Acts.Power, st.Acts.Reset = power, reset
	return st
}

func TestNewReleasesSwitches(t *testing.T) {
	b, c := newBoard(t, Config{}, false)
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
	if err := c.Close(); err != nil {
		t.Errorf("Close without pins: %v", err)
	}
}

// TestClickPulse checks kvmd's pulse lengths to the nanosecond of the
// fake clock: the switch is high for the click delay, then the button
// stays busy for AfterRelease, and wait=1 returns only then.
func TestClickPulse(t *testing.T) {
	for _, tc := range []struct {
		button string
		pin    func(*board) *recPin
		hold   time.Duration
	}{
		{ButtonPower, func(b *board) *recPin { return b.powerSw }, ClickDelay},
		{ButtonReset, func(b *board) *recPin { return b.resetSw }, ClickDelay},
		{ButtonPowerLong, func(b *board) *recPin { return b.powerSw }, LongClickDelay},
	} {
		t.Run(tc.button, func(t *testing.T) {
			b, c := newBoard(t, Config{}, false)
			b.next(t) // the state New read
			start := b.clock.Now()
			returned := make(chan time.Time, 1)
			go func() {
				if err := c.Click(context.Background(), tc.button, true); err != nil {
					t.Error(err)
				}
				returned <- b.clock.Now()
			}()
			b.press(tc.hold, AfterRelease)
			if at := <-returned; at.Sub(start) != tc.hold+AfterRelease {
				t.Errorf("wait=1 returned %v after the press began, want %v", at.Sub(start), tc.hold+AfterRelease)
			}
			h := tc.pin(b).history()
			if len(h) != 3 || h[1].l != gpio.High || h[2].l != gpio.Low {
				t.Fatalf("levels driven %v, want Low (start), High, Low", h)
			}
			if h[1].at != start {
				t.Errorf("pressed %v after Click", h[1].at.Sub(start))
			}
			if held := h[2].at.Sub(h[1].at); held != tc.hold {
				t.Errorf("held %v, want %v", held, tc.hold)
			}
			if c.State().Busy {
				t.Error("still busy after the click ended")
			}
			acts := busyState(tc.button != ButtonReset, tc.button == ButtonReset)
			for i, want := range []State{acts, busyState(false, false)} {
				if got := b.next(t); got != want {
					t.Errorf("event %d = %+v, want %+v", i, got, want)
				}
			}
		})
	}
	if ClickDelay != 100*time.Millisecond || LongClickDelay != 5500*time.Millisecond || AfterRelease != time.Second {
		t.Error("kvmd's delays are 0.1 s, 5.5 s and 1 s")
	}
}

// TestOneBusyRegion: while power_long holds the power button every other
// operation is refused, the reset too, until a second after its release.
func TestOneBusyRegion(t *testing.T) {
	b, c := newBoard(t, Config{}, true)
	ctx := context.Background()
	if err := c.Click(ctx, ButtonPowerLong, false); err != nil {
		t.Fatal(err)
	}
	b.clock.BlockUntil(b.timers + 1)
	b.clock.Advance(time.Second)
	if st, want := c.State(), busyState(true, false); st.Busy != want.Busy || st.Acts != want.Acts {
		t.Errorf("state 1 s into power_long = %+v", st)
	}
	for _, op := range []struct {
		name string
		f    func() error
	}{
		{"click reset", func() error { return c.Click(ctx, ButtonReset, false) }},
		{"click power", func() error { return c.Click(ctx, ButtonPower, false) }},
		{"click power_long", func() error { return c.Click(ctx, ButtonPowerLong, false) }},
		{"reset_hard", func() error { return c.Power(ctx, ActionResetHard, false) }},
		{"off", func() error { return c.Power(ctx, ActionOff, false) }},
	} {
		if err := op.f(); !errors.Is(err, ErrBusy) {
			t.Errorf("%s during power_long: %v, want ErrBusy", op.name, err)
		}
	}
	if l := b.resetSw.level(); l != gpio.Low {
		t.Errorf("reset switch %v during power_long", l)
	}
	// Released at 5.5 s, still busy for a second after.
	b.clock.Advance(LongClickDelay - time.Second)
	b.clock.BlockUntil(b.timers + 1)
	if err := c.Click(ctx, ButtonReset, false); !errors.Is(err, ErrBusy) {
		t.Errorf("reset right after the release: %v, want ErrBusy", err)
	}
	b.clock.Advance(AfterRelease)
	for _, busy := range []bool{false, true, false} { // New's state, the press, its end
		if st := b.next(t); st.Busy != busy || st.Acts.Power != busy || st.Acts.Reset {
			t.Errorf("event %+v, want busy %v with the power button", st, busy)
		}
	}
	if err := c.Click(ctx, ButtonReset, false); err != nil {
		t.Errorf("reset once idle: %v", err)
	}
}

// TestCloseReleases is a SIGTERM 1 s into power_long: Close (Run's exit)
// drives the held switch low at once, and later operations are refused.
func TestCloseReleases(t *testing.T) {
	for _, how := range []string{"Close", "Run's context"} {
		t.Run(how, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			power := &recPin{Pin: gpiotest.Pin{N: "GPIO23"}, clock: clock}
			reset := &recPin{Pin: gpiotest.Pin{N: "GPIO27"}, clock: clock}
			c, err := New(Config{Clock: clock, Pins: &Pins{
				PowerLED: &gpiotest.Pin{N: "GPIO24"}, HDDLED: &gpiotest.Pin{N: "GPIO22"}, PowerSwitch: power, ResetSwitch: reset,
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ran := make(chan struct{})
			go func() { c.Run(ctx); close(ran) }()
			waited := make(chan error, 1)
			go func() { waited <- c.Click(context.Background(), ButtonPowerLong, true) }()
			clock.BlockUntil(2) // the ticker and the press
			start := clock.Now()
			clock.Advance(time.Second)
			if l := power.level(); l != gpio.High {
				t.Fatalf("power switch %v 1 s into power_long", l)
			}
			if how == "Close" {
				defer func() { cancel(); <-ran }()
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				cancel()
				<-ran
			}
			// Close has returned: the press is over, no timer runs.
			if l := power.level(); l != gpio.Low {
				t.Errorf("power switch %v after %s, want Low", l, how)
			}
			if h := power.history(); h[len(h)-1].at.Sub(start) != time.Second {
				t.Errorf("released %v into the press, want 1s", h[len(h)-1].at.Sub(start))
			}
			select {
			case err := <-waited:
				if err != nil {
					t.Errorf("the waiting click: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("a click waiting for its end was still waiting 5 s after %s", how)
			}
			if c.State().Busy {
				t.Error("busy after Close")
			}
			if err := c.Click(context.Background(), ButtonReset, false); !errors.Is(err, ErrClosed) {
				t.Errorf("click after Close: %v, want ErrClosed", err)
			}
			if l := reset.level(); l != gpio.Low {
				t.Errorf("reset switch %v after Close", l)
			}
			clock.Advance(10 * time.Second)
			if h := power.history(); h[len(h)-1].l != gpio.Low {
				t.Errorf("power switch driven %v after Close", h[len(h)-1].l)
			}
		})
	}
}

// TestEventsInOrder: the busy event of a click is slow to go out (a
// subscriber's lock, a scheduler's whim) while the click ends. The idle
// event must still come last, so that the last word is the true state.
func TestEventsInOrder(t *testing.T) {
	var mu sync.Mutex
	var got []State
	var c *Controller
	first := true
	onChange := func(st State) {
		mu.Lock()
		stall := st.Busy && first
		first = first && !stall
		mu.Unlock()
		if stall {
			// Until the click is over and, if the controller lets it, its
			// idle event has gone out first. A correct controller holds
			// that event back: the bounded wait is all this costs then.
			deadline := time.Now().Add(5 * time.Second)
			for c.State().Busy && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); time.Sleep(time.Millisecond) {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if n > 1 {
					break
				}
			}
		}
		mu.Lock()
		got = append(got, st)
		mu.Unlock()
	}
	b, ctl := newBoard(t, Config{OnChange: onChange}, false)
	c = ctl
	clicked := make(chan error, 1)
	go func() { clicked <- c.Click(context.Background(), ButtonReset, false) }()
	b.press(ClickDelay, AfterRelease)
	if err := <-clicked; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil { // waits for the release goroutine
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []State{busyState(false, false), busyState(false, true), busyState(false, false)}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestPowerActions: on, off, off_hard and reset_hard click only when the
// power LED says they are needed.
func TestPowerActions(t *testing.T) {
	for _, tc := range []struct {
		action  string
		ledOn   bool
		pressed func(*board) *recPin
		hold    time.Duration
	}{
		{ActionOn, false, func(b *board) *recPin { return b.powerSw }, ClickDelay},
		{ActionOn, true, nil, 0},
		{ActionOff, true, func(b *board) *recPin { return b.powerSw }, ClickDelay},
		{ActionOff, false, nil, 0},
		{ActionOffHard, true, func(b *board) *recPin { return b.powerSw }, LongClickDelay},
		{ActionOffHard, false, nil, 0},
		{ActionResetHard, true, func(b *board) *recPin { return b.resetSw }, ClickDelay},
		{ActionResetHard, false, nil, 0},
	} {
		name := tc.action
		if tc.ledOn {
			name += "/led_on"
		}
		t.Run(name, func(t *testing.T) {
			b, c := newBoard(t, Config{}, tc.ledOn)
			done := make(chan error, 1)
			go func() { done <- c.Power(context.Background(), tc.action, true) }()
			if tc.pressed != nil {
				b.press(tc.hold, AfterRelease)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			for _, p := range []*recPin{b.powerSw, b.resetSw} {
				h := p.history()
				want := 1
				if tc.pressed != nil && tc.pressed(b) == p {
					want = 3
					if len(h) == 3 && h[2].at.Sub(h[1].at) != tc.hold {
						t.Errorf("%s held %v, want %v", p.N, h[2].at.Sub(h[1].at), tc.hold)
					}
				}
				if len(h) != want {
					t.Errorf("%s driven %d times, want %d", p.N, len(h), want)
				}
			}
		})
	}
}

func TestLEDChangeReported(t *testing.T) {
	b, c := newBoard(t, Config{}, false)
	if st := b.next(t); st != busyState(false, false) {
		t.Errorf("first state %+v", st)
	}
	b.powerLED.Lock()
	b.powerLED.L = gpio.High
	b.powerLED.Unlock()
	b.hddLED.Lock()
	b.hddLED.L = gpio.High
	b.hddLED.Unlock()
	b.clock.Advance(PollInterval)
	want := busyState(false, false)
	want.Leds.Power, want.Leds.HDD = true, true
	if st := b.next(t); st != want {
		t.Errorf("after one poll: %+v, want %+v", st, want)
	}
	if st := c.State(); st != want {
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
