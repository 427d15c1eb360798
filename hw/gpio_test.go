package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"
	"periph.io/x/conn/v3/pin"
	"periph.io/x/host/v3/gpioioctl"
)

// newPin returns one of periph's fake pins with function fn and level l.
func newPin(name string, fn pin.Func, l gpio.Level) *gpiotest.Pin {
	return &gpiotest.Pin{N: name, Num: -1, Fn: string(fn), L: l}
}

// legacyPin hides the pin.PinFunc of a fake pin: a driver that has only
// the deprecated Function string.
type legacyPin struct{ gpio.PinIO }

// untouched reports whether ReadPins left p as newPin made it: no In (which
// sets a pull and may change the level) and no Out.
func untouched(p *gpiotest.Pin, l gpio.Level) bool {
	p.Lock()
	defer p.Unlock()
	return p.P == gpio.PullNoChange && p.L == l
}

// registerPins registers pins under names unique to the test, and
// unregisters them when it ends.
func registerPins(t *testing.T, pins ...gpio.PinIO) {
	t.Helper()
	for _, p := range pins {
		if err := gpioreg.Register(p); err != nil {
			t.Fatal(err)
		}
		name := p.Name()
		t.Cleanup(func() {
			if err := gpioreg.Unregister(name); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReadPins(t *testing.T) {
	pfx := "TEST_" + t.Name() + "_"
	inHigh := newPin(pfx+"GPIO24", gpio.IN_HIGH, gpio.High)
	inLow := newPin(pfx+"GPIO22", gpio.IN_LOW, gpio.Low)
	outHigh := newPin(pfx+"GPIO23", gpio.OUT_HIGH, gpio.High)
	outLow := newPin(pfx+"GPIO27", gpio.OUT, gpio.Low)
	openDrain := newPin(pfx+"GPIO5", gpio.OUT_OC, gpio.High)
	plainIn := newPin(pfx+"GPIO6", gpio.IN, gpio.High)
	uart := newPin(pfx+"GPIO14", "UART0_TX", gpio.High)
	unset := newPin(pfx+"GPIO2", pin.FuncNone, gpio.High)
	legacy := legacyPin{newPin(pfx+"GPIO16", "Out/High", gpio.High)}
	registerPins(t, inHigh, inLow, outHigh, outLow, openDrain, plainIn, uart, unset, legacy)
	alias := pfx + "POWER_LED"
	if err := gpioreg.RegisterAlias(alias, inLow.N); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gpioreg.Unregister(alias) })

	in, out := refOf("in"), refOf("out")
	on, off := refOf(true), refOf(false)
	for _, tt := range []struct {
		spec PinSpec
		want PinState
	}{
		{PinSpec{"power_led", inHigh.N, false}, PinState{inHigh.N, in, on, false}},
		{PinSpec{"power_led_low", inHigh.N, true}, PinState{inHigh.N, in, off, true}},
		{PinSpec{"hdd_led", inLow.N, false}, PinState{inLow.N, in, off, false}},
		{PinSpec{"hdd_led_low", inLow.N, true}, PinState{inLow.N, in, on, true}},
		{PinSpec{"power_switch", outHigh.N, false}, PinState{outHigh.N, out, on, false}},
		{PinSpec{"power_switch_low", outHigh.N, true}, PinState{outHigh.N, out, off, true}},
		{PinSpec{"reset_switch", outLow.N, false}, PinState{outLow.N, out, off, false}},
		{PinSpec{"open_drain", openDrain.N, false}, PinState{openDrain.N, out, on, false}},
		{PinSpec{"plain_in", plainIn.N, true}, PinState{plainIn.N, in, off, true}},
		{PinSpec{"legacy", legacy.Name(), false}, PinState{legacy.Name(), out, on, false}},
		{PinSpec{"alias", alias, true}, PinState{alias, in, on, true}},
		{PinSpec{"uart", uart.N, false}, PinState{GPIO: uart.N}},
		{PinSpec{"unset", unset.N, true}, PinState{GPIO: unset.N, ActiveLow: true}},
		{PinSpec{"missing", pfx + "GPIO99", false}, PinState{GPIO: pfx + "GPIO99"}},
		{PinSpec{"missing_low", pfx + "GPIO98", true}, PinState{GPIO: pfx + "GPIO98", ActiveLow: true}},
	} {
		t.Run(tt.spec.Name, func(t *testing.T) {
			got := ReadPins([]PinSpec{tt.spec})
			want := map[string]PinState{tt.spec.Name: tt.want}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ReadPins(%+v):\n got %s\nwant %s", tt.spec, jsonOf(t, got), jsonOf(t, want))
			}
		})
	}
	for p, l := range map[*gpiotest.Pin]gpio.Level{inHigh: gpio.High, inLow: gpio.Low, outHigh: gpio.High,
		outLow: gpio.Low, openDrain: gpio.High, plainIn: gpio.High, uart: gpio.High, unset: gpio.High} {
		if !untouched(p, l) {
			t.Errorf("ReadPins changed %s: pull %s, level %s", p.N, p.P, p.L)
		}
	}
}

func TestReadPinsAll(t *testing.T) {
	pfx := "TEST_" + t.Name() + "_"
	led := newPin(pfx+"GPIO24", gpio.IN_LOW, gpio.Low)
	sw := newPin(pfx+"GPIO23", gpio.OUT_LOW, gpio.Low)
	registerPins(t, led, sw)
	got := ReadPins([]PinSpec{
		{Name: "atx_power_led", GPIO: led.N, ActiveLow: true},
		{Name: "atx_power_switch", GPIO: sw.N},
		{Name: "atx_hdd_led", GPIO: pfx + "GPIO22"},
	})
	want := fmt.Sprintf(`{"atx_hdd_led":{"gpio":"%[1]sGPIO22","direction":null,"level":null,"active_low":false},`+
		`"atx_power_led":{"gpio":"%[1]sGPIO24","direction":"in","level":true,"active_low":true},`+
		`"atx_power_switch":{"gpio":"%[1]sGPIO23","direction":"out","level":false,"active_low":false}}`, pfx)
	if j := jsonOf(t, got); j != want {
		t.Errorf("JSON\n got %s\nwant %s", j, want)
	}
	if got := ReadPins(nil); got == nil || len(got) != 0 {
		t.Errorf("ReadPins(nil) = %#v, want an empty map", got)
	}
}

// TestReadPinsConcurrent reads from several goroutines while the pins
// change, as concurrent /api/info requests do (run with -race).
func TestReadPinsConcurrent(t *testing.T) {
	pfx := "TEST_" + t.Name() + "_"
	a := newPin(pfx+"A", gpio.IN_LOW, gpio.Low)
	b := newPin(pfx+"B", gpio.OUT_HIGH, gpio.High)
	registerPins(t, a, b)
	specs := []PinSpec{{Name: "a", GPIO: a.N}, {Name: "b", GPIO: b.N, ActiveLow: true}}
	stop := make(chan struct{})
	var flipper sync.WaitGroup
	flipper.Add(1)
	go func() {
		defer flipper.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a.Lock()
			a.L = gpio.Level(i%2 == 0)
			a.Unlock()
			b.Lock()
			b.L = gpio.Level(i%3 == 0)
			b.Unlock()
		}
	}()
	var readers sync.WaitGroup
	for range 8 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 200 {
				got := ReadPins(specs)
				if len(got) != 2 || got["a"].Level == nil || got["b"].Direction == nil || *got["b"].Direction != "out" {
					t.Errorf("ReadPins() = %s", jsonOf(t, got))
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	flipper.Wait()
}

// TestReadPinUnrequestedLine checks that a /dev/gpiochip line is not
// read: reading would request it as a pulled-up input.
func TestReadPinUnrequestedLine(t *testing.T) {
	var line gpioioctl.GPIOLine
	got := readPin(&line, PinSpec{GPIO: "GPIO24"})
	if want := (PinState{GPIO: "GPIO24"}); !reflect.DeepEqual(got, want) {
		t.Errorf("readPin(unrequested line) = %s, want %s", jsonOf(t, got), jsonOf(t, want))
	}
}

func TestFuncDirection(t *testing.T) {
	for f, want := range map[pin.Func]string{
		gpio.IN: "in", gpio.IN_HIGH: "in", gpio.IN_LOW: "in",
		gpio.OUT: "out", gpio.OUT_HIGH: "out", gpio.OUT_LOW: "out", gpio.OUT_OC: "out",
		gpio.FLOAT: "", gpio.PWM: "", gpio.CLK: "", "I2C1_SDA": "", "ALT5": "", pin.FuncNone: "",
	} {
		if got, _ := funcDirection(f); got != want {
			t.Errorf("funcDirection(%q) = %q, want %q", f, got, want)
		}
	}
}

// TestInitGPIO runs periph's host drivers on a machine without GPIO: no
// pins, and that is not a failure.
func TestInitGPIO(t *testing.T) {
	if chips, _ := filepath.Glob("/dev/gpiochip*"); len(chips) > 0 {
		t.Skip("this machine has GPIO chips")
	}
	if _, err := os.Stat("/sys/class/gpio"); err == nil {
		t.Skip("this machine has sysfs GPIO")
	}
	ok, err := InitGPIO()
	if ok || err != nil {
		t.Errorf("InitGPIO() = %v, %v; want false, nil", ok, err)
	}
	if ok2, err2 := InitGPIO(); ok2 != ok || (err2 == nil) != (err == nil) {
		t.Errorf("second InitGPIO() = %v, %v; want the first's %v, %v", ok2, err2, ok, err)
	}
}

// TestUnopened: a /dev/gpiochip* periph did not read is reported with the
// reason it cannot be opened; one read, or that opens now, is not. The
// booted test found the daemon saying "no GPIO on this machine" beside a
// chip it could not open (Debian gives /dev/gpiochip* to root alone).
func TestUnopened(t *testing.T) {
	chips := []GPIOChip{{Name: "gpiochip0", Label: "pinctrl-rp1", Lines: 54, Named: 54}}
	denied := fs.ErrPermission
	open := func(p string) error {
		if p == "/dev/gpiochip4" { // a Pi 5's link to gpiochip0
			return nil
		}
		return &fs.PathError{Op: "open", Path: p, Err: denied}
	}
	if err := unopened(chips, []string{"/dev/gpiochip0", "/dev/gpiochip4"}, open); err != nil {
		t.Errorf("read chips and a link: %v", err)
	}
	err := unopened(chips, []string{"/dev/gpiochip0", "/dev/gpiochip1"}, open)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "/dev/gpiochip1") || strings.Contains(err.Error(), "gpiochip0") {
		t.Errorf("an unreadable chip: %v", err)
	}
	if err := unopened(nil, nil, open); err != nil {
		t.Errorf("no chips: %v", err)
	}
}

type namedDriver string

func (d namedDriver) String() string          { return string(d) }
func (d namedDriver) Prerequisites() []string { return nil }
func (d namedDriver) After() []string         { return nil }
func (d namedDriver) Init() (bool, error)     { return true, nil }

// TestGPIODriverErrors: a GPIO driver's failure is reported, but not
// sysfs-gpio's (export is never used, and /sys is read-only in the
// daemon's sandbox), nor a failure of a driver for something else.
func TestGPIODriverErrors(t *testing.T) {
	denied := errors.New("need more access, try as root or setup udev rules: open /sys/class/gpio/export: permission denied")
	if err := gpioDriverErrors([]driverreg.DriverFailure{{D: namedDriver("sysfs-gpio"), Err: denied}, {D: namedDriver("sysfs-spi"), Err: denied}}); err != nil {
		t.Errorf("sysfs-gpio and an SPI driver failing: %v", err)
	}
	err := gpioDriverErrors([]driverreg.DriverFailure{{D: namedDriver("bcm2835-gpio"), Err: errors.New("/dev/gpiomem: permission denied")}})
	if err == nil || !strings.Contains(err.Error(), "bcm2835-gpio") {
		t.Errorf("bcm2835-gpio failing: %v", err)
	}
}

// TestLookupPin: a name periph registered, or CHIP/LINE; what names no
// pin is ErrNoPin. A chip's lines are checked in the booted test (the
// pl061 of qemu's virt machine), as no chip exists here.
func TestLookupPin(t *testing.T) {
	pfx := t.Name() + "_"
	p := newPin(pfx+"GPIO5", gpio.IN, gpio.Low)
	registerPins(t, p)
	if got, err := LookupPin(p.N); err != nil || got.Name() != p.N {
		t.Errorf("LookupPin(%s): %v, %v", p.N, got, err)
	}
	for _, bad := range []string{pfx + "GPIO6", "", "gpiochip99/1", "gpiochip0/x", "gpiochip0/-1", "gpiochip0/01", "gpiochip0/", "/3"} {
		if _, err := LookupPin(bad); !errors.Is(err, ErrNoPin) {
			t.Errorf("LookupPin(%q): %v", bad, err)
		}
	}
}
