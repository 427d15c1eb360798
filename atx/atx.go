// Package atx presses the host's power and reset buttons and reads its
// power and disk LEDs through GPIO pins, as PiKVM's ATX board does.
//
// The behaviour follows kvmd's GPIO ATX plugin (kvmd/plugins/atx/gpio.py
// in github.com/pikvm/kvmd, read at f14596e8): a click holds a switch
// pin high for 100 ms (5.5 s for a long click), then the button stays
// busy for one more second; power on/off act only when the power LED says
// they are needed; an operation while another is under way is refused.
//
// One difference: kvmd gave the power and the reset button a busy region
// each in d57c3c66 (2025), so that it accepts a reset while power_long
// holds the power button. Here every operation shares one region, as
// kvmd's did before: a reset in the middle of a forced power-off is never
// what the user meant, and PiKVM's own web page already greys out all
// three buttons while "busy" is true (web/share/js/kvm/atx.js). The state
// still says which button acts.
//
// Every press is timed on a clock (Config.Clock), so tests drive it with
// clockwork's fake clock, the one periph's gpiotest pins use, instead of
// waiting out wall-clock windows.
package atx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"periph.io/x/conn/v3/gpio"

	"kvmd/subsystem"
)

// kvmd's defaults (get_plugin_options): click_delay, long_click_delay,
// and the one second a button stays busy after its release.
const (
	ClickDelay     = 100 * time.Millisecond
	LongClickDelay = 5500 * time.Millisecond
	AfterRelease   = time.Second
	// PollInterval is how often the LED inputs are read. kvmd debounces
	// them for 100 ms; reading every 10 ms keeps a change's delay well
	// under the 50 ms the events are promised within.
	PollInterval = 10 * time.Millisecond
)

// Errors. kvmd names them AtxIsBusyError (409) and AtxDisabledError
// (400) (kvmd/plugins/atx/__init__.py, disabled.py); httpd answers them so.
var (
	// ErrBusy: a button is being pressed, or was released less than
	// AfterRelease ago.
	ErrBusy = errors.New("atx: busy")
	// ErrDisabled: the board has no ATX wiring.
	ErrDisabled = errors.New("atx: disabled")
	// ErrClosed: the controller has released the buttons for good (the
	// daemon is stopping).
	ErrClosed = errors.New("atx: closed")
)

// State is kvmd's GET /api/atx result and "atx" event.
type State struct {
	Enabled bool `json:"enabled"`
	Busy    bool `json:"busy"`
	Acts    struct {
		Power bool `json:"power"`
		Reset bool `json:"reset"`
	} `json:"acts"`
	Leds struct {
		Power bool `json:"power"`
		HDD   bool `json:"hdd"`
	} `json:"leds"`
}

// Pins are the four lines of an ATX board. Each input is read with its
// ActiveLow applied; the switches are driven high while pressed (kvmd's
// wiring: an optocoupler per button).
type Pins struct {
	PowerLED, HDDLED                gpio.PinIn
	PowerLEDActiveLow, HDDActiveLow bool
	PowerSwitch, ResetSwitch        gpio.PinOut
}

// Config is what New needs. Zero durations take kvmd's defaults.
type Config struct {
	// Pins nil makes the ATX disabled, as kvmd's "disabled" plugin: on a
	// board without ATX wiring.
	Pins *Pins
	// OnChange, when set, is called with the new state whenever it
	// changes (LEDs, busy flags), one call at a time and in the order the
	// states were taken; it must not block or call the controller. The
	// same changes reach the "atx" subsystem's Watch (Subsystem).
	OnChange func(State)
	Log      *slog.Logger
	// Clock times the presses and the LED polling; nil is the real clock.
	Clock clockwork.Clock

	ClickDelay, LongClickDelay, AfterRelease, PollInterval time.Duration
}

// Controller is one ATX board. Create it with New; Run reads the LEDs;
// Close releases the buttons.
type Controller struct {
	cfg Config

	// pubMu is held from taking a state to publishing it, so that states
	// go out in the order they were taken and the last one published is
	// the current one. It is taken before mu.
	pubMu      sync.Mutex
	lastPublic State
	published  bool
	changes    subsystem.Sink[State] // the "atx" subsystem's Watch

	mu sync.Mutex
	st State // the LEDs; the busy fields come from pressing
	// pressing is the button of the operation under way ("" when idle):
	// one region for every operation.
	pressing string
	closed   bool
	stop     chan struct{} // closed by Close: a press under way ends now
	presses  sync.WaitGroup
}

// New returns a controller. With pins it drives both switches low (not
// pressed), as kvmd does when it starts: a daemon that died with a button
// held leaves it held until then.
func New(cfg Config) (*Controller, error) {
	if cfg.ClickDelay <= 0 {
		cfg.ClickDelay = ClickDelay
	}
	if cfg.LongClickDelay <= 0 {
		cfg.LongClickDelay = LongClickDelay
	}
	if cfg.AfterRelease <= 0 {
		cfg.AfterRelease = AfterRelease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	c := &Controller{cfg: cfg, stop: make(chan struct{})}
	if p := cfg.Pins; p != nil {
		c.st.Enabled = true
		for _, o := range []gpio.PinOut{p.PowerSwitch, p.ResetSwitch} {
			if err := o.Out(gpio.Low); err != nil {
				return nil, err
			}
		}
		for _, in := range []gpio.PinIn{p.PowerLED, p.HDDLED} {
			if err := in.In(gpio.PullNoChange, gpio.NoEdge); err != nil {
				return nil, err
			}
		}
		c.readLEDs()
	}
	return c, nil
}

// Enabled reports whether the board has ATX wiring.
func (c *Controller) Enabled() bool { return c.cfg.Pins != nil }

// State returns the current state.
func (c *Controller) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stateLocked()
}

func (c *Controller) stateLocked() State {
	st := c.st
	st.Acts.Power = c.pressing == ButtonPower || c.pressing == ButtonPowerLong
	st.Acts.Reset = c.pressing == ButtonReset
	st.Busy = c.pressing != ""
	return st
}

// Run reads the LED inputs until ctx ends, reporting changes, then
// releases the buttons (Close): a press under way when the daemon stops
// must not outlive it on a GPIO that keeps its level.
func (c *Controller) Run(ctx context.Context) {
	if c.cfg.Pins == nil {
		return
	}
	defer func() {
		if err := c.Close(); err != nil {
			c.cfg.Log.Error("atx: releasing the buttons", "err", err)
		}
	}()
	t := c.cfg.Clock.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			c.readLEDs()
		}
	}
}

// Close ends any press under way, drives both switches low and waits for
// the press to be over; every later operation is ErrClosed. It is safe to
// call more than once.
func (c *Controller) Close() error {
	p := c.cfg.Pins
	if p == nil {
		return nil
	}
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.stop)
	}
	var errs []error
	for _, o := range []gpio.PinOut{p.PowerSwitch, p.ResetSwitch} {
		if err := o.Out(gpio.Low); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o, err))
		}
	}
	c.mu.Unlock()
	c.presses.Wait()
	return errors.Join(errs...)
}

func (c *Controller) readLEDs() {
	p := c.cfg.Pins
	power := bool(p.PowerLED.Read()) != p.PowerLEDActiveLow
	hdd := bool(p.HDDLED.Read()) != p.HDDActiveLow
	c.mu.Lock()
	c.st.Leds.Power, c.st.Leds.HDD = power, hdd
	c.mu.Unlock()
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	c.publishLocked()
}

// publishLocked calls OnChange when the state differs from the one last
// published. The caller holds pubMu and made its change before: as every
// change is followed by a publication that takes the state afresh, and
// publications go one at a time, the last one says the current state.
func (c *Controller) publishLocked() {
	st := c.State()
	if c.published && st == c.lastPublic {
		return
	}
	c.lastPublic, c.published = st, true
	c.changes.Send(st)
	if c.cfg.OnChange != nil {
		c.cfg.OnChange(st)
	}
}

// Power actions, kvmd's names.
const (
	ActionOn        = "on"
	ActionOff       = "off"
	ActionOffHard   = "off_hard"
	ActionResetHard = "reset_hard"
)

// Buttons, kvmd's names.
const (
	ButtonPower     = "power"
	ButtonPowerLong = "power_long"
	ButtonReset     = "reset"
)

// Power performs a power action: "on" clicks power only when the power
// LED is off, "off" only when it is on, "off_hard" long-clicks and
// "reset_hard" clicks reset only when it is on. Nothing to do is no error,
// as in kvmd. wait waits for the click to end (and ctx may then cancel the
// wait, never the click).
func (c *Controller) Power(ctx context.Context, action string, wait bool) error {
	if c.cfg.Pins == nil {
		return ErrDisabled
	}
	on := c.State().Leds.Power
	switch action {
	case ActionOn:
		if on {
			return nil
		}
		return c.Click(ctx, ButtonPower, wait)
	case ActionOff:
		if !on {
			return nil
		}
		return c.Click(ctx, ButtonPower, wait)
	case ActionOffHard:
		if !on {
			return nil
		}
		return c.Click(ctx, ButtonPowerLong, wait)
	case ActionResetHard:
		if !on {
			return nil
		}
		return c.Click(ctx, ButtonReset, wait)
	}
	return errors.New("atx: unknown action " + action)
}

// Click presses a button: "power" (ClickDelay), "power_long"
// (LongClickDelay) or "reset". While any press is under way, and for
// AfterRelease after it, every click is ErrBusy. Without wait it returns
// once the press began.
func (c *Controller) Click(ctx context.Context, button string, wait bool) error {
	p := c.cfg.Pins
	if p == nil {
		return ErrDisabled
	}
	var pin gpio.PinOut
	delay := c.cfg.ClickDelay
	switch button {
	case ButtonPower:
		pin = p.PowerSwitch
	case ButtonPowerLong:
		pin, delay = p.PowerSwitch, c.cfg.LongClickDelay
	case ButtonReset:
		pin = p.ResetSwitch
	default:
		return errors.New("atx: unknown button " + button)
	}
	done := make(chan struct{})
	if err := c.press(button, pin, delay, done); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// press enters the busy region, drives pin high and starts the goroutine
// that releases it, which closes done when the region is left.
func (c *Controller) press(button string, pin gpio.PinOut, delay time.Duration, done chan struct{}) error {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.pressing != "":
		c.mu.Unlock()
		return ErrBusy
	}
	// High under mu: Close, which takes mu, always drives low after.
	if err := pin.Out(gpio.High); err != nil {
		_ = pin.Out(gpio.Low)
		c.mu.Unlock()
		return fmt.Errorf("atx: pressing %s: %w", button, err)
	}
	c.pressing = button
	c.presses.Add(1)
	c.mu.Unlock()
	go c.hold(button, pin, delay, done)
	// Busy is published before the release goroutine can publish idle:
	// that needs pubMu, held here.
	c.publishLocked()
	return nil
}

// hold keeps the button pressed for delay, releases it, and leaves the
// busy region AfterRelease later; Close cuts both waits short.
func (c *Controller) hold(button string, pin gpio.PinOut, delay time.Duration, done chan struct{}) {
	defer c.presses.Done()
	defer close(done)
	closed := !c.sleep(delay)
	c.mu.Lock()
	err := pin.Out(gpio.Low)
	c.mu.Unlock()
	if err != nil {
		c.cfg.Log.Error("atx: releasing a button", "button", button, "err", err)
	}
	if closed {
		c.cfg.Log.Info("released an ATX button early: shutting down", "button", button)
	} else {
		c.cfg.Log.Info("clicked ATX button", "button", button)
		c.sleep(c.cfg.AfterRelease)
	}
	c.mu.Lock()
	c.pressing = ""
	c.mu.Unlock()
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	c.publishLocked()
}

// sleep waits d on the clock and reports true, or false as soon as Close
// was called.
func (c *Controller) sleep(d time.Duration) bool {
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-c.stop:
		return false
	}
}
