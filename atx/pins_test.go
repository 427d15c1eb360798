package atx

import (
	"testing"

	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/hw"
)

// TestBoardPins: the four pins are found in periph's registry by the
// board's names for them, each LED with its wiring; a board without one of
// them, or a pin periph does not know, has no ATX.
func TestBoardPins(t *testing.T) {
	for _, n := range []string{"ATXTEST_PL", "ATXTEST_HL", "ATXTEST_PS", "ATXTEST_RS"} {
		if err := gpioreg.Register(&gpiotest.Pin{N: n}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gpioreg.Unregister(n) })
	}
	specs := []hw.PinSpec{
		{Name: "gpio_other", GPIO: "ATXTEST_NONE"},
		{Name: PinPowerLED, GPIO: "ATXTEST_PL", ActiveLow: true},
		{Name: PinHDDLED, GPIO: "ATXTEST_HL"},
		{Name: PinPowerSwitch, GPIO: "ATXTEST_PS"},
		{Name: PinResetSwitch, GPIO: "ATXTEST_RS"},
	}
	p := BoardPins(specs)
	if p == nil {
		t.Fatal("no pins")
	}
	if p.PowerLED.Name() != "ATXTEST_PL" || p.HDDLED.Name() != "ATXTEST_HL" || p.PowerSwitch.Name() != "ATXTEST_PS" || p.ResetSwitch.Name() != "ATXTEST_RS" {
		t.Errorf("pins %s %s %s %s", p.PowerLED, p.HDDLED, p.PowerSwitch, p.ResetSwitch)
	}
	if !p.PowerLEDActiveLow || p.HDDActiveLow {
		t.Errorf("active low: power %v hdd %v, want true false", p.PowerLEDActiveLow, p.HDDActiveLow)
	}
	if p := BoardPins(specs[:4]); p != nil {
		t.Errorf("without a reset switch: %+v, want nil", p)
	}
	unknown := append([]hw.PinSpec{}, specs...)
	unknown[4].GPIO = "ATXTEST_NONE"
	if p := BoardPins(unknown); p != nil {
		t.Errorf("a pin periph does not know: %+v, want nil", p)
	}
}
