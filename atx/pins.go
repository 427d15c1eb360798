package atx

import (
	"slices"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"

	"kvmd/hw"
)

// The names of the ATX board's pins in a board profile (board.Profile.Pins).
const (
	PinPowerLED    = "atx_power_led"
	PinHDDLED      = "atx_hdd_led"
	PinPowerSwitch = "atx_power_switch"
	PinResetSwitch = "atx_reset_switch"
)

// BoardPins returns the ATX board's pins among a board's named pins, from
// periph's registry: nil when the board has no ATX wiring, or a pin is not
// registered (a fixture root, where hw.InitGPIO is not called, registers
// none).
func BoardPins(specs []hw.PinSpec) *Pins {
	find := func(name string) (gpio.PinIO, bool, bool) {
		i := slices.IndexFunc(specs, func(p hw.PinSpec) bool { return p.Name == name })
		if i < 0 {
			return nil, false, false
		}
		p := gpioreg.ByName(specs[i].GPIO)
		return p, specs[i].ActiveLow, p != nil
	}
	pl, plLow, ok1 := find(PinPowerLED)
	hl, hlLow, ok2 := find(PinHDDLED)
	ps, _, ok3 := find(PinPowerSwitch)
	rs, _, ok4 := find(PinResetSwitch)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil
	}
	return &Pins{PowerLED: pl, HDDLED: hl, PowerLEDActiveLow: plLow, HDDActiveLow: hlLow, PowerSwitch: ps, ResetSwitch: rs}
}
