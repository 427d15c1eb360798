package ugpio

import (
	"context"
	"errors"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"

	"kvmd/wol"
)

// Pin is a line on a GPIO pin through periph.io: kvmd's "gpio" driver.
// Create it with NewPin.
type Pin struct {
	p     gpio.PinOut
	mu    sync.Mutex
	level bool
	set   bool
}

// NewPin returns the line of p.
func NewPin(p gpio.PinOut) *Pin { return &Pin{p: p} }

// Write drives the pin as an output at level.
func (p *Pin) Write(level bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.p.Out(gpio.Level(level)); err != nil {
		return err
	}
	p.level, p.set = level, true
	return nil
}

// Read returns the level the pin was last driven to. It never reads the
// pin: periph's character-device lines (host v3.8.5, GPIOLine.Read) take
// a line that is not an input back as a pulled-up input to read it,
// which would let go of what the output drives. kvmd reads its output
// lines' values through libgpiod, which has no such effect.
func (p *Pin) Read() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.set {
		return false, errors.New("ugpio: the pin was never driven")
	}
	return p.level, nil
}

// WoLChannel is kvmd's name of the Wake-on-LAN channel and of its driver
// (kvmd/apps/_scheme.py makes both of a kvmd.wol section).
const WoLChannel = "__wol__"

// WoL is a line that sends a Wake-on-LAN magic packet each time it is
// turned on: kvmd's "wol" driver, which reads always off.
type WoL struct{ S wol.Sender }

// wolTimeout bounds one send: a datagram never waits for a peer, so this
// only ever ends a stuck route lookup.
const wolTimeout = 5 * time.Second

// Write sends the packet when level is true; false does nothing.
func (w WoL) Write(level bool) error {
	if !level {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wolTimeout)
	defer cancel()
	return w.S.Send(ctx)
}

// Read is always off: a packet has no level.
func (w WoL) Read() (bool, error) { return false, nil }

// WoLOutput is kvmd's __wol__ channel: pulse only (a pulse sends one
// packet), with kvmd's other defaults.
func WoLOutput(s wol.Sender) Output {
	o := DefaultOutput(WoLChannel, WoL{S: s})
	o.Driver, o.Pin, o.Switch = WoLChannel, "0", false
	return o
}
