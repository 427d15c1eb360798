package ugpio

import (
	"errors"
	"testing"
	"time"
)

func TestParseOutput(t *testing.T) {
	var asked []string
	line := func(pin string) (Line, error) {
		asked = append(asked, pin)
		if pin == "missing" {
			return nil, errors.New("no such pin")
		}
		return NewPin(nil), nil
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, tt := range []struct {
		spec string
		want Output // Line and Driver left out
	}{
		{"relay=GPIO17", Output{Name: "relay", Pin: "GPIO17", Switch: true, Pulse: ms(100), MinPulse: ms(100), MaxPulse: ms(100), BusyDelay: ms(200)}},
		{" button = gpiochip0/4 , switch=no, pulse=0.5, pulse-max=2, busy-delay=0 , inverted",
			Output{Name: "button", Pin: "gpiochip0/4", Pulse: ms(500), MinPulse: ms(100), MaxPulse: 2 * time.Second, Inverted: true}},
		{"lamp=GPIO5,pulse=0,initial=yes,inverted=false", Output{Name: "lamp", Pin: "GPIO5", Switch: true, MinPulse: ms(100), MaxPulse: ms(100), BusyDelay: ms(200), Initial: true}},
		// A default delay beyond max is held to it, as kvmd does.
		{"x=P,pulse=5", Output{Name: "x", Pin: "P", Switch: true, Pulse: ms(100), MinPulse: ms(100), MaxPulse: ms(100), BusyDelay: ms(200)}},
	} {
		got, err := ParseOutput(tt.spec, line)
		if err != nil {
			t.Errorf("%q: %v", tt.spec, err)
			continue
		}
		if got.Line == nil {
			t.Errorf("%q: no line", tt.spec)
		}
		got.Line, tt.want.Driver = nil, "__gpio__"
		if got != tt.want {
			t.Errorf("%q:\n got %+v\nwant %+v", tt.spec, got, tt.want)
		}
	}
	asked = nil
	for _, bad := range []string{
		"", "relay", "=GPIO1", "relay=", "relay=GPIO1,switch=maybe", "relay=GPIO1,pulse=-1", "relay=GPIO1,pulse=x",
		"relay=GPIO1,busy-delay=3601", "relay=GPIO1,color=red", "relay=GPIO1,switch=1,switch=0", "relay=GPIO1,,",
		"bad name=GPIO1", "relay=GPIO1,pulse-min=0.01", "relay=GPIO1,pulse-max=0.05", "relay=missing",
	} {
		if _, err := ParseOutput(bad, line); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if len(asked) != 1 || asked[0] != "missing" {
		t.Errorf("pins looked up for specs refused before: %q", asked)
	}
}
