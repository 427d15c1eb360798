package ugpio

import (
	"context"
	"time"

	"periph.io/x/conn/v3/gpio"

	"kvmd/wol"
)

// Pin is a line on a GPIO pin through periph.io: kvmd's "gpio" driver.
type Pin struct{ P gpio.PinIO }

// Write drives the pin as an output at level.
func (p Pin) Write(level bool) error { return p.P.Out(gpio.Level(level)) }

// Read returns the pin's level: an output's reads back what it drives.
func (p Pin) Read() (bool, error) { return bool(p.P.Read()), nil }

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
