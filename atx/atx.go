// Package atx presses the host's power and reset buttons and reads its
// power and disk LEDs through GPIO pins, as PiKVM's ATX board does.
//
// The behaviour follows kvmd's GPIO ATX plugin (kvmd/plugins/atx/gpio.py
// in github.com/pikvm/kvmd, read at f14596e8): a click holds a switch
// pin high for 100 ms (5.5 s for a long click), then the button stays
// busy for one more second; power on/off act only when the power LED says
// they are needed; a second operation on a busy button is refused.
package atx

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"
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
	// ErrBusy: the button is being pressed, or was released less than
	// AfterRelease ago.
	ErrBusy = errors.New("atx: busy")
	// ErrDisabled: the board has no ATX wiring.
	ErrDisabled = errors.New("atx: disabled")
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
	// OnChange is called with the new state whenever it changes (LEDs,
	// busy flags), from the controller's goroutines; it must not block.
	OnChange func(State)
	Log      *slog.Logger

	ClickDelay, LongClickDelay, AfterRelease, PollInterval time.Duration
}

// Controller is one ATX board. Create it with New; Run reads the LEDs.
type Controller struct {
	cfg Config

	mu         sync.Mutex
	st         State
	powerBusy  bool
	resetBusy  bool
	lastPublic State
	published  bool
}

// New returns a controller. With pins it drives both switches low (not
// pressed), as kvmd does when it starts.
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
	c := &Controller{cfg: cfg}
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
	st.Acts.Power, st.Acts.Reset = c.powerBusy, c.resetBusy
	st.Busy = c.powerBusy || c.resetBusy
	return st
}

// Run reads the LED inputs until ctx ends, reporting changes.
func (c *Controller) Run(ctx context.Context) {
	if c.cfg.Pins == nil {
		return
	}
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.readLEDs()
		}
	}
}

func (c *Controller) readLEDs() {
	p := c.cfg.Pins
	power := bool(p.PowerLED.Read()) != p.PowerLEDActiveLow
	hdd := bool(p.HDDLED.Read()) != p.HDDActiveLow
	c.mu.Lock()
	c.st.Leds.Power, c.st.Leds.HDD = power, hdd
	c.mu.Unlock()
	c.notify()
}

// notify calls OnChange when the state differs from the one last reported.
func (c *Controller) notify() {
	c.mu.Lock()
	st := c.stateLocked()
	changed := !c.published || st != c.lastPublic
	c.lastPublic, c.published = st, true
	c.mu.Unlock()
	if changed && c.cfg.OnChange != nil {
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
// (LongClickDelay) or "reset". The power and reset buttons are busy
// independently; a click on a busy one is ErrBusy. Without wait it
// returns once the press began.
func (c *Controller) Click(ctx context.Context, button string, wait bool) error {
	p := c.cfg.Pins
	if p == nil {
		return ErrDisabled
	}
	var pin gpio.PinOut
	var busy *bool
	delay := c.cfg.ClickDelay
	switch button {
	case ButtonPower:
		pin, busy = p.PowerSwitch, &c.powerBusy
	case ButtonPowerLong:
		pin, busy, delay = p.PowerSwitch, &c.powerBusy, c.cfg.LongClickDelay
	case ButtonReset:
		pin, busy = p.ResetSwitch, &c.resetBusy
	default:
		return errors.New("atx: unknown button " + button)
	}
	c.mu.Lock()
	if *busy {
		c.mu.Unlock()
		return ErrBusy
	}
	*busy = true
	c.mu.Unlock()
	c.notify()
	if err := pin.Out(gpio.High); err != nil {
		c.release(busy)
		_ = pin.Out(gpio.Low)
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(delay)
		if err := pin.Out(gpio.Low); err != nil {
			c.cfg.Log.Error("atx: releasing a button", "button", button, "err", err)
		}
		c.cfg.Log.Info("clicked ATX button", "button", button)
		time.Sleep(c.cfg.AfterRelease)
		c.release(busy)
	}()
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

func (c *Controller) release(busy *bool) {
	c.mu.Lock()
	*busy = false
	c.mu.Unlock()
	c.notify()
}
