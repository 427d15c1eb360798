// Package ugpio drives the GPIO output channels the configuration
// declares, as kvmd's user GPIO does (kvmd/apps/kvmd/ugpio.py and
// kvmd/plugins/ugpio/ in github.com/pikvm/kvmd, read at f14596e8): a
// channel may be switched to a level and kept there, or pulsed (on for a
// delay, then off), each per what the configuration allows; while an
// operation runs, and for its busy delay after, the channel is busy and a
// second one is refused. The line behind a channel is a GPIO pin (kvmd's
// "gpio" driver, here periph.io's) or a Wake-on-LAN sender (kvmd's "wol"
// driver: turning it on sends the magic packet).
//
// The daemon never drives a pin the configuration did not declare as an
// output: the board's named pins stay inputs (package devices), and a
// channel cannot be both.
//
// Every delay runs on a clock (Config.Clock), so tests drive it with
// clockwork's fake clock.
package ugpio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Errors, with kvmd's names in httpd (kvmd/apps/kvmd/ugpio.py,
// kvmd/plugins/ugpio/__init__.py): all are 400 there but ErrBusy, an
// IsBusyError (409).
var (
	// ErrNotFound: no output channel of that name (GpioChannelNotFoundError).
	ErrNotFound = errors.New("ugpio: channel not found")
	// ErrSwitchNotSupported: the channel may not be switched
	// (GpioSwitchNotSupported).
	ErrSwitchNotSupported = errors.New("ugpio: switching not supported")
	// ErrPulseNotSupported: the channel may not be pulsed
	// (GpioPulseNotSupported).
	ErrPulseNotSupported = errors.New("ugpio: pulsing not supported")
	// ErrBusy: an operation on the channel is under way
	// (GpioChannelIsBusyError).
	ErrBusy = errors.New("ugpio: channel busy")
	// ErrOffline: the line could not be written (GpioDriverOfflineError).
	ErrOffline = errors.New("ugpio: driver offline")
	// ErrClosed: the outputs were released for good (the daemon is
	// stopping).
	ErrClosed = errors.New("ugpio: closed")
)

// Line is what a channel drives: a pin's electrical level.
type Line interface {
	// Write sets the line's level.
	Write(level bool) error
	// Read returns the level the line has now.
	Read() (bool, error)
}

// Output is a channel as the configuration declares it; its fields are
// kvmd's options of an output (kvmd/apps/_scheme.py), whose defaults the
// configuration applies (DefaultOutput).
type Output struct {
	Name string
	Line Line
	// Driver and Pin are what the state shows as the channel's hw:
	// kvmd's driver names ("__gpio__", "__wol__") and the pin.
	Driver, Pin string
	// Switch allows switch.
	Switch bool
	// Pulse is a pulse's default delay, 0 when pulse is not allowed; a
	// delay asked for is held to [MinPulse, MaxPulse].
	Pulse, MinPulse, MaxPulse time.Duration
	// BusyDelay is how long the channel stays busy after an operation.
	BusyDelay time.Duration
	// Inverted means the line is low when the channel is on.
	Inverted bool
	// Initial is the channel's state at start.
	Initial bool
}

// DefaultOutput is an output with kvmd's defaults: switch allowed, a
// pulse of 0.1 s (0.1 to 0.1 s), busy for 0.2 s after, off at start.
func DefaultOutput(name string, line Line) Output {
	return Output{Name: name, Line: line, Driver: "__gpio__", Switch: true,
		Pulse: 100 * time.Millisecond, MinPulse: 100 * time.Millisecond, MaxPulse: 100 * time.Millisecond,
		BusyDelay: 200 * time.Millisecond}
}

// constant is kvmd's is_const: a channel that can neither switch nor
// pulse, which kvmd leaves out of its scheme and state.
func (o *Output) constant() bool { return !o.Switch && o.Pulse == 0 }

// channelName is kvmd's valid_ugpio_channel: letters, digits and ._- (and
// kvmd's own __names__), at most 255.
var channelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.-]*$`)

// MaxDelay bounds every delay of an output: kvmd takes any float; a
// switch held busy for days is a typo.
const MaxDelay = time.Hour

// check refuses an output kvmd's validators would, or that could not
// work.
func (o *Output) check() error {
	if o.Line == nil {
		return fmt.Errorf("ugpio: channel %s has no line", o.Name)
	}
	return o.checkOptions()
}

// checkOptions is check but for the line.
func (o *Output) checkOptions() error {
	switch {
	case len(o.Name) > 255 || !channelName.MatchString(o.Name):
		return fmt.Errorf("ugpio: %q is not a channel name (letters, digits, _ . -; at most 255)", o.Name)
	case o.Pulse < 0 || o.BusyDelay < 0 || o.Pulse > MaxDelay || o.BusyDelay > MaxDelay || o.MaxPulse > MaxDelay:
		return fmt.Errorf("ugpio: channel %s: delays are from 0 to %v", o.Name, MaxDelay)
	case o.Pulse > 0 && (o.MinPulse < 100*time.Millisecond || o.MaxPulse < o.MinPulse):
		return fmt.Errorf("ugpio: channel %s: a pulse's min and max delays are at least 0.1 s, min at most max", o.Name)
	}
	return nil
}

// Scheme is kvmd's description of an output in /api/gpio's
// model.scheme.outputs; delays in seconds.
type Scheme struct {
	Switch bool `json:"switch"`
	Pulse  struct {
		Delay    float64 `json:"delay"`
		MinDelay float64 `json:"min_delay"`
		MaxDelay float64 `json:"max_delay"`
	} `json:"pulse"`
	HW struct {
		Driver string `json:"driver"`
		Pin    string `json:"pin"`
	} `json:"hw"`
}

// State is kvmd's state of an output in /api/gpio's state.outputs: its
// level is not read while it is busy (false then), and a line that cannot
// be read is offline.
type State struct {
	Online bool `json:"online"`
	State  bool `json:"state"`
	Busy   bool `json:"busy"`
}

// Config is what New needs.
type Config struct {
	Outputs []Output
	// OnChange is called after a channel becomes busy or idle, without
	// locks held; it must not block.
	OnChange func()
	Log      *slog.Logger
	// Clock times the pulses and busy delays; nil is the real clock.
	Clock clockwork.Clock
}

// Outputs are the output channels.
type Outputs struct {
	cfg   Config
	chans map[string]*channel
	names []string

	mu     sync.Mutex
	closed bool
	stop   chan struct{}
	ops    sync.WaitGroup
}

type channel struct {
	Output
	busy bool // under Outputs.mu
}

// New checks the outputs and drives each to its initial state, as kvmd
// does when it takes the lines. A line that cannot be written is an
// error: the daemon then starts without that channel rather than leave
// it at a level nobody chose.
func New(cfg Config) (*Outputs, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	o := &Outputs{cfg: cfg, chans: map[string]*channel{}, stop: make(chan struct{})}
	var errs []error
	for _, out := range cfg.Outputs {
		if err := out.check(); err != nil {
			errs = append(errs, err)
			continue
		}
		if o.chans[out.Name] != nil {
			errs = append(errs, fmt.Errorf("ugpio: channel %s declared twice", out.Name))
			continue
		}
		if err := out.Line.Write(out.Initial != out.Inverted); err != nil {
			errs = append(errs, fmt.Errorf("ugpio: channel %s: setting its initial state: %w", out.Name, err))
			continue
		}
		o.chans[out.Name] = &channel{Output: out}
		o.names = append(o.names, out.Name)
	}
	sort.Strings(o.names)
	return o, errors.Join(errs...)
}

// Names returns the channels' names, sorted.
func (o *Outputs) Names() []string { return o.names }

// Has says whether name is an output channel.
func (o *Outputs) Has(name string) bool { return o.chans[name] != nil }

// Schemes returns the model of each channel kvmd shows (not the
// constant ones).
func (o *Outputs) Schemes() map[string]Scheme {
	out := map[string]Scheme{}
	for name, c := range o.chans {
		if c.constant() {
			continue
		}
		var s Scheme
		s.Switch = c.Switch
		if c.Pulse > 0 {
			s.Pulse.Delay, s.Pulse.MinDelay, s.Pulse.MaxDelay = c.Pulse.Seconds(), c.MinPulse.Seconds(), c.MaxPulse.Seconds()
		}
		s.HW.Driver, s.HW.Pin = c.Driver, c.Pin
		out[name] = s
	}
	return out
}

// States returns the state of each channel Schemes shows.
func (o *Outputs) States() map[string]State {
	out := map[string]State{}
	for name, c := range o.chans {
		if c.constant() {
			continue
		}
		o.mu.Lock()
		busy := c.busy
		o.mu.Unlock()
		st := State{Online: true, Busy: busy}
		if !busy {
			level, err := c.Line.Read()
			st.Online = err == nil
			st.State = err == nil && level != c.Inverted
		}
		out[name] = st
	}
	return out
}

// Switch sets a channel to state and keeps it there; the channel is busy
// for its busy delay after. Without wait it returns once the operation
// began, and a line that fails is only logged, as in kvmd; with wait it
// returns the operation's error (ctx may end the wait, never the
// operation).
func (o *Outputs) Switch(ctx context.Context, name string, state, wait bool) error {
	c := o.chans[name]
	switch {
	case c == nil:
		return ErrNotFound
	case !c.Switch:
		return ErrSwitchNotSupported
	}
	return o.run(ctx, c, wait, "switch", func() error {
		if err := o.write(c, state); err != nil {
			return err
		}
		o.cfg.Log.Info("GPIO channel switched", "channel", name, "state", state)
		o.sleep(c.BusyDelay)
		return nil
	})
}

// Pulse turns a channel on for delay (0: its default), held to its
// minimum and maximum, then off; the channel is busy for its busy delay
// after. wait is as for Switch.
func (o *Outputs) Pulse(ctx context.Context, name string, delay time.Duration, wait bool) error {
	c := o.chans[name]
	switch {
	case c == nil:
		return ErrNotFound
	case c.Pulse == 0:
		return ErrPulseNotSupported
	}
	if delay <= 0 {
		delay = c.Pulse
	}
	delay = min(max(delay, c.MinPulse), c.MaxPulse)
	return o.run(ctx, c, wait, "pulse", func() error {
		err := o.write(c, true)
		if err == nil {
			o.sleep(delay)
		}
		// Off whatever happened: a pulse never leaves a channel on.
		if offErr := o.write(c, false); err == nil {
			err = offErr
		}
		if err != nil {
			return err
		}
		o.cfg.Log.Info("GPIO channel pulsed", "channel", name, "delay", delay)
		o.sleep(c.BusyDelay)
		return nil
	})
}

// run enters the channel's busy region, then runs op in a goroutine of its
// own, which leaves it.
func (o *Outputs) run(ctx context.Context, c *channel, wait bool, what string, op func() error) error {
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return ErrClosed
	case c.busy:
		o.mu.Unlock()
		return ErrBusy
	}
	c.busy = true
	o.ops.Add(1)
	o.mu.Unlock()
	o.changed()
	done := make(chan error, 1)
	go func() {
		defer o.ops.Done()
		err := op()
		if err != nil && !wait {
			o.cfg.Log.Error("GPIO operation failed", "channel", c.Name, "op", what, "err", err)
		}
		o.mu.Lock()
		c.busy = false
		o.mu.Unlock()
		o.changed()
		done <- err
	}()
	if !wait {
		return nil
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (o *Outputs) write(c *channel, on bool) error {
	if err := c.Line.Write(on != c.Inverted); err != nil {
		return fmt.Errorf("%w: channel %s: %w", ErrOffline, c.Name, err)
	}
	return nil
}

func (o *Outputs) changed() {
	if o.cfg.OnChange != nil {
		o.cfg.OnChange()
	}
}

// sleep waits d on the clock, or less when Close was called.
func (o *Outputs) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := o.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
	case <-o.stop:
	}
}

// Close ends the pulses under way early (each channel is turned off, as a
// pulse ends) and waits for every operation; later ones are ErrClosed. A
// switched channel keeps its level, as kvmd leaves it when it stops.
func (o *Outputs) Close() {
	o.mu.Lock()
	if !o.closed {
		o.closed = true
		close(o.stop)
	}
	o.mu.Unlock()
	o.ops.Wait()
}

// Seconds reads a delay given in seconds (kvmd's floats), refusing what
// is not a number from 0 to MaxDelay.
func Seconds(f float64) (time.Duration, error) {
	if math.IsNaN(f) || f < 0 || f > MaxDelay.Seconds() {
		return 0, fmt.Errorf("ugpio: %v is not a number of seconds from 0 to %v", f, MaxDelay.Seconds())
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}
