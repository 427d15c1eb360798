package hw

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/pin"
	"periph.io/x/host/v3/gpioioctl"
)

// testPin is a fake GPIO pin in the manner of gpiotest.Pin (N, Fn, L),
// which cannot be used here: its package needs a module (clockwork) this
// one does not require. It counts reads, to prove which pins ReadPins
// leaves alone.
type testPin struct {
	gpio.PinIO // gpio.INVALID, for what ReadPins must not call
	N          string

	mu    sync.Mutex
	Fn    pin.Func
	L     gpio.Level
	reads int
}

func (p *testPin) Name() string     { return p.N }
func (p *testPin) String() string   { return p.N }
func (p *testPin) Number() int      { return -1 }
func (p *testPin) Function() string { return string(p.Func()) }

func (p *testPin) Func() pin.Func {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Fn
}

func (p *testPin) SupportedFuncs() []pin.Func    { return []pin.Func{gpio.IN, gpio.OUT} }
func (p *testPin) SetFunc(f pin.Func) error      { return fmt.Errorf("testPin: SetFunc(%s) called", f) }
func (p *testPin) In(gpio.Pull, gpio.Edge) error { return fmt.Errorf("testPin: In called") }
func (p *testPin) Out(l gpio.Level) error        { return fmt.Errorf("testPin: Out(%s) called", l) }
func (p *testPin) set(f pin.Func, l gpio.Level)  { p.mu.Lock(); p.Fn, p.L = f, l; p.mu.Unlock() }
func (p *testPin) readCount() int                { p.mu.Lock(); defer p.mu.Unlock(); return p.reads }
func (p *testPin) Read() gpio.Level              { p.mu.Lock(); defer p.mu.Unlock(); p.reads++; return p.L }
func newTestPin(name string, f pin.Func, l gpio.Level) *testPin {
	return &testPin{PinIO: gpio.INVALID, N: name, Fn: f, L: l}
}

// legacyPin has only the deprecated Function string, no pin.PinFunc.
type legacyPin struct {
	gpio.PinIO
	N, Fn string
	L     gpio.Level
}

func (p *legacyPin) Name() string     { return p.N }
func (p *legacyPin) Function() string { return p.Fn }
func (p *legacyPin) Read() gpio.Level { return p.L }

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
	inHigh := newTestPin(pfx+"GPIO24", gpio.IN_HIGH, gpio.High)
	inLow := newTestPin(pfx+"GPIO22", gpio.IN_LOW, gpio.Low)
	outHigh := newTestPin(pfx+"GPIO23", gpio.OUT_HIGH, gpio.High)
	outLow := newTestPin(pfx+"GPIO27", gpio.OUT, gpio.Low)
	openDrain := newTestPin(pfx+"GPIO5", gpio.OUT_OC, gpio.High)
	plainIn := newTestPin(pfx+"GPIO6", gpio.IN, gpio.High)
	uart := newTestPin(pfx+"GPIO14", "UART0_TX", gpio.High)
	unset := newTestPin(pfx+"GPIO2", pin.FuncNone, gpio.High)
	legacy := &legacyPin{PinIO: gpio.INVALID, N: pfx + "GPIO16", Fn: "Out/High", L: gpio.High}
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
		{PinSpec{"legacy", legacy.N, false}, PinState{legacy.N, out, on, false}},
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
	if n := uart.readCount() + unset.readCount(); n != 0 {
		t.Errorf("pins that are not GPIOs now were read %d times", n)
	}
}

func TestReadPinsAll(t *testing.T) {
	pfx := "TEST_" + t.Name() + "_"
	led := newTestPin(pfx+"GPIO24", gpio.IN_LOW, gpio.Low)
	sw := newTestPin(pfx+"GPIO23", gpio.OUT_LOW, gpio.Low)
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
	a := newTestPin(pfx+"A", gpio.IN_LOW, gpio.Low)
	b := newTestPin(pfx+"B", gpio.OUT_HIGH, gpio.High)
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
			a.set(gpio.IN, gpio.Level(i%2 == 0))
			b.set(gpio.OUT, gpio.Level(i%3 == 0))
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

// TestReadPinUnrequestedLine checks that a /dev/gpiochip line this process
// never requested is not read: reading would request it as a pulled-up
// input.
func TestReadPinUnrequestedLine(t *testing.T) {
	var line gpioioctl.GPIOLine
	if d := lineDirection(&line); d != "NotSet" {
		t.Fatalf("lineDirection(unrequested) = %q, want NotSet", d)
	}
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
