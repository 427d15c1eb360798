package hw

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/pin"
	"periph.io/x/host/v3/gpioioctl"
	// The character-device driver and periph's sysfs-gpio, as host.Init
	// registers them on Linux; the Raspberry Pi's own drivers come with
	// gpio_arm.go.
	_ "periph.io/x/host/v3/sysfs"
)

// PinSpec names a GPIO pin of the board.
type PinSpec struct {
	// Name is what the pin does: "atx_power_led".
	Name string
	// GPIO is periph's name for the pin: "GPIO24".
	GPIO string
	// ActiveLow means the pin is low when its function is on: an LED or
	// optocoupler wired to the supply.
	ActiveLow bool
}

// PinState is what a GPIO pin reads now.
type PinState struct {
	// GPIO is periph's name for the pin.
	GPIO string `json:"gpio"`
	// Direction is "in" or "out"; nil when the pin is not registered, not
	// a GPIO now (an alternate function such as a UART), or its state
	// cannot be read without changing it.
	Direction *string `json:"direction"`
	// Level is the logical level, ActiveLow applied: true when the
	// function is on. Nil when Direction is, or when reading would
	// disturb an output.
	Level *bool `json:"level"`
	// ActiveLow is the pin's wiring, so a reader can tell the electrical
	// level (Level != ActiveLow); a separate raw level would only repeat
	// it.
	ActiveLow bool `json:"active_low"`
}

// InitGPIO registers the machine's GPIO pins with periph's drivers of the
// boards this daemon runs on: the character device's (any Linux), and the
// Raspberry Pi's on ARM (gpio_arm.go). periph's host.Init would register
// every board's it knows too (Allwinner, Pine64, BeagleBone, C.H.I.P.,
// ODROID-C1), a fifth of a megabyte of the binary for boards no kvmd
// image or package is made for. It
// reports false with a nil error when this machine has no GPIO pins; an
// error names the GPIO drivers that apply here but failed, such as the
// Raspberry Pi's when it cannot map /dev/gpiomem. Both may come together:
// pins can be usable through one driver while another failed. Failures of
// drivers for other things (DMA, SPI, ...) are not reported.
func InitGPIO() (ok bool, err error) {
	st, err := driverreg.Init()
	if err != nil {
		return false, fmt.Errorf("gpio: %w", err)
	}
	return len(gpioreg.All()) > 0, gpioDriverErrors(st.Failed)
}

// gpioDriverErrors are the failures of GPIO drivers that matter: all but
// periph's sysfs-gpio, which loads after the character-device driver
// (ioctl-gpio) and fails whenever /sys/class/gpio/export cannot be opened
// for writing. The daemon never exports a pin, and its sandbox keeps /sys
// read-only: the booted test saw it warn "GPIO unavailable" at every start
// once the daemon could open the GPIO chips, as it would on a Pi.
func gpioDriverErrors(failed []driverreg.DriverFailure) error {
	var errs []error
	for _, f := range failed {
		if name := f.D.String(); strings.Contains(name, "gpio") && name != "sysfs-gpio" {
			errs = append(errs, fmt.Errorf("gpio: driver %s: %v", name, f.Err))
		}
	}
	return errors.Join(errs...)
}

// ReadPins reads the pins of specs from periph's registry, by spec name.
// A pin periph does not know (not registered: InitGPIO not called, or no
// such pin here) reads as nulls.
//
// ReadPins never changes a pin, and nothing in kvmd requests a GPIO line:
// the daemon only watches. A pin of periph's Raspberry Pi driver with
// /dev/gpiomem mapped reads its function and level from the registers,
// whatever holds it. A line of periph's character-device driver (the
// only one on a Pi 5, and the Pi 4's fallback without /dev/gpiomem) has
// no function until a process requests it, and requesting it to read it
// would release an output such as an ATX power button relay: such pins
// read as nulls.
func ReadPins(specs []PinSpec) map[string]PinState {
	out := make(map[string]PinState, len(specs))
	for _, s := range specs {
		out[s.Name] = readPin(gpioreg.ByName(s.GPIO), s)
	}
	return out
}

func readPin(p gpio.PinIO, s PinSpec) PinState {
	st := PinState{GPIO: s.GPIO, ActiveLow: s.ActiveLow}
	if p == nil {
		return st
	}
	for {
		r, ok := p.(gpio.RealPin)
		if !ok {
			break
		}
		p = r.Real()
	}
	dir, readable := pinDirection(p)
	if dir == "" {
		return st
	}
	st.Direction = &dir
	if readable {
		level := bool(p.Read()) != s.ActiveLow
		st.Level = &level
	}
	return st
}

// pinDirection returns "in", "out" or "" for p from periph's pin.Func, and
// whether p.Read leaves the pin as it is.
func pinDirection(p gpio.PinIO) (dir string, readable bool) {
	if _, ok := p.(*gpioioctl.GPIOLine); ok {
		// periph (host v3.8.5) knows a line's direction only from its
		// own request, and its Func of a line it requested as an output
		// reads it, which requests it again as a pulled-up input. A line
		// nothing here requested has no function: FuncNone, null.
		return "", false
	}
	var f pin.Func
	if pf, ok := p.(pin.PinFunc); ok {
		// bcm283x: the registers when mapped; unmapped, the function of
		// its chip line, which no code here requests: FuncNone.
		f = pf.Func()
	} else {
		//lint:ignore SA1019 a pin without pin.PinFunc has only Function.
		f = pin.Func(p.Function())
	}
	return funcDirection(f)
}

// funcDirection maps periph's pin functions ("IN", "In/High", "OUT",
// "Out/Low", "OUT_OPEN", ...) to a direction; anything else is not a GPIO
// now.
func funcDirection(f pin.Func) (string, bool) {
	s := strings.ToUpper(string(f))
	switch {
	case strings.HasPrefix(s, "IN"):
		return "in", true
	case strings.HasPrefix(s, "OUT"):
		return "out", true
	}
	return "", false
}

// GPIOChip is a GPIO chip as periph's character-device driver read it at
// InitGPIO.
type GPIOChip struct {
	// Name is the kernel's, "gpiochip0"; Label the driver's,
	// "pinctrl-bcm2711" or "9030000.pl061".
	Name, Label string
	// Lines is how many lines the chip has; Named how many have a name,
	// which periph registers as pins (gpioreg), where a board profile
	// can find them. A chip whose lines have no names (qemu's pl061) is
	// read, but adds no pin.
	Lines, Named int
}

// GPIOChips returns the chips periph read at InitGPIO, and an error naming
// each /dev/gpiochip* it could not open (periph only prints those): a
// chip the daemon cannot open is one it cannot watch, which is no reason
// to say the machine has no GPIO. Call it after InitGPIO.
func GPIOChips() ([]GPIOChip, error) {
	var chips []GPIOChip
	for _, c := range gpioioctl.Chips {
		gc := GPIOChip{Name: c.Name(), Label: c.Label(), Lines: c.LineCount()}
		for _, l := range c.Lines() {
			if n := l.Name(); n != "" && n != "_" && n != "-" {
				gc.Named++
			}
		}
		chips = append(chips, gc)
	}
	nodes, err := filepath.Glob("/dev/gpiochip*")
	if err != nil {
		return chips, err
	}
	return chips, unopened(chips, nodes, func(p string) error {
		f, err := os.Open(p)
		if err == nil {
			f.Close()
		}
		return err
	})
}

// unopened returns an error for each node that no chip read is named for
// and that open cannot open either: a node that opens now is a symlink to
// a chip read under another name (a Pi 5's gpiochip4), or appeared since.
func unopened(chips []GPIOChip, nodes []string, open func(string) error) error {
	var errs []error
	for _, n := range nodes {
		if slices.ContainsFunc(chips, func(c GPIOChip) bool { return c.Name == filepath.Base(n) }) {
			continue
		}
		if err := open(n); err != nil {
			errs = append(errs, fmt.Errorf("gpio: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ErrNoPin is a pin name that names no pin here.
var ErrNoPin = errors.New("gpio: no such pin")

// LookupPin returns the pin a configuration names: CHIP/LINE, a line of a
// GPIO chip by its offset as the kernel numbers them (gpiochip0/17, as
// kvmd's gpio driver takes a device and a pin number, and the only way to
// reach the lines of a chip that names none, such as qemu's pl061), or a
// name periph registered (GPIO17 on a Raspberry Pi). Call it after
// InitGPIO.
func LookupPin(name string) (gpio.PinIO, error) {
	if chip, line, ok := strings.Cut(name, "/"); ok {
		n, err := strconv.Atoi(line)
		if err != nil || n < 0 || strconv.Itoa(n) != line {
			return nil, fmt.Errorf("%w: %q: the line of %s is not a number", ErrNoPin, name, chip)
		}
		for _, c := range gpioioctl.Chips {
			if c.Name() == chip {
				if n >= c.LineCount() {
					return nil, fmt.Errorf("%w: %s has %d lines", ErrNoPin, chip, c.LineCount())
				}
				return c.ByNumber(n), nil
			}
		}
		return nil, fmt.Errorf("%w: no GPIO chip %s (or it could not be opened)", ErrNoPin, chip)
	}
	if p := gpioreg.ByName(name); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNoPin, name)
}
