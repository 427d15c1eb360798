package demo

import (
	"fmt"
	"log/slog"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// OutputPin is the demo's DEMO_OUT pin, registered with periph on first
// use: the pin of the demo's output channel (DefaultOutput), and of any
// gpio-output the operator gives the demo. The demo host says in the log
// when it goes high and low, as its ATX buttons do.
const OutputPin = "DEMO_OUT"

// DefaultOutput is the demo's output channel, on OutputPin, with kvmd's
// defaults (switch, or pulse for 0.1 s).
const DefaultOutput = "demo_relay=" + OutputPin

// RegisterOutputPin registers OutputPin, unless a pin of that name is
// registered already; Close unregisters it.
func (d *Demo) RegisterOutputPin(log *slog.Logger) error {
	if gpioreg.ByName(OutputPin) != nil {
		return nil
	}
	p := &demoOutput{Pin: &gpiotest.Pin{N: OutputPin, Fn: "Out/Low"}, log: log}
	if err := gpioreg.Register(p); err != nil {
		return fmt.Errorf("demo: registering %s: %w", OutputPin, err)
	}
	d.pins = append(d.pins, p)
	return nil
}

// demoOutput is a pin that logs its changes.
type demoOutput struct {
	*gpiotest.Pin
	log *slog.Logger
}

func (p *demoOutput) Out(l gpio.Level) error {
	was := p.Read()
	if err := p.Pin.Out(l); err != nil {
		return err
	}
	if was != l {
		p.log.Info(fmt.Sprintf("demo host: %s %s", OutputPin, map[gpio.Level]string{gpio.High: "high", gpio.Low: "low"}[l]))
	}
	return nil
}
