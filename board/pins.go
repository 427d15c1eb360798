package board

import (
	"slices"

	"kvmd/hw"
)

// The pin maps of PiKVM's builds, as kvmd wires them. Each names the file
// of github.com/pikvm/kvmd (read at f14596e8, 2026-08-06) that sets it:
// a build's configs/kvmd/main/<model>-<video>-<board>.yaml, and the plugin
// defaults those files leave in place. Pins are BCM GPIO numbers; periph
// names them "GPIO<n>" on every Raspberry Pi.

// group is a set of pins that belong together: a build either wires all of
// them as given or none can be trusted.
type group struct {
	name string
	pins []hw.PinSpec
}

// atxDefault is the DIY ATX board of v0-v3 and the hdmiusb builds: none of
// their yaml files sets atx pins, so kvmd/plugins/atx/gpio.py's
// get_plugin_options applies: power_led_pin 24, hdd_led_pin 22 (inputs,
// not inverted), power_switch_pin 23, reset_switch_pin 27 (outputs, idle
// low, high while pressed).
var atxDefault = group{"atx", []hw.PinSpec{
	{Name: "atx_power_led", GPIO: "GPIO24"},
	{Name: "atx_hdd_led", GPIO: "GPIO22"},
	{Name: "atx_power_switch", GPIO: "GPIO23"},
	{Name: "atx_reset_switch", GPIO: "GPIO27"},
}}

// atxV4 is the V4 Mini's and Plus's ATX wiring:
// configs/kvmd/main/v4mini-hdmi-rpi4.yaml and v4plus-hdmi-rpi4.yaml, kvmd.atx:
// power_led_pin 4, hdd_led_pin 5, power_switch_pin 23, reset_switch_pin 27.
// GPIO22, the DIY HDD LED, is the V4's USB breaker.
var atxV4 = group{"atx", []hw.PinSpec{
	{Name: "atx_power_led", GPIO: "GPIO4"},
	{Name: "atx_hdd_led", GPIO: "GPIO5"},
	{Name: "atx_power_switch", GPIO: "GPIO23"},
	{Name: "atx_reset_switch", GPIO: "GPIO27"},
}}

// hidSerial is v0's HID: an Arduino on the UART (configs/kvmd/main/v0-*.yaml,
// kvmd.hid.type serial), reset through kvmd/plugins/hid/_mcu/__init__.py's
// default reset_pin 4, not inverted (high resets).
var hidSerial = group{"hid", []hw.PinSpec{
	{Name: "hid_reset", GPIO: "GPIO4"},
}}

// hidSPI is v1's HID: a microcontroller on SPI0 (configs/kvmd/main/v1-*.yaml,
// kvmd.hid): sw_cs_pin 7 (kvmd/plugins/hid/spi.py holds it high and pulls
// it low for a transfer), reset_pin 25 with reset_inverted (low resets),
// power_detect_pin 16 (pulled down; high when the target powers the MCU).
var hidSPI = group{"hid", []hw.PinSpec{
	{Name: "hid_spi_cs", GPIO: "GPIO7", ActiveLow: true},
	{Name: "hid_reset", GPIO: "GPIO25", ActiveLow: true},
	{Name: "hid_power_detect", GPIO: "GPIO16"},
}}

// v3Extras is configs/kvmd/main/v3-hdmi-rpi4.yaml, kvmd.gpio.scheme:
// __v3_usb_breaker__ on pin 5, an output, initially high (USB connected).
var v3Extras = group{"v3", []hw.PinSpec{
	{Name: "v3_usb_breaker", GPIO: "GPIO5"},
}}

// v4Extras is the V4 yaml files' kvmd.gpio.scheme: __v3_usb_breaker__ on
// pin 22, __v4_locator__ on pin 12, __v4_const1__ on pin 6 (outputs).
var v4Extras = group{"v4", []hw.PinSpec{
	{Name: "v3_usb_breaker", GPIO: "GPIO22"},
	{Name: "v4_locator", GPIO: "GPIO12"},
	{Name: "v4_const1", GPIO: "GPIO6"},
}}

// modelGroups are the pin groups of each PIKVM_MODEL. The hdmi and hdmiusb
// builds of a model share its pins (their yaml files differ only in the
// streamer).
var modelGroups = map[string][]group{
	"v0":     {atxDefault, hidSerial},
	"v1":     {atxDefault, hidSPI},
	"v2":     {atxDefault},
	"v3":     {atxDefault, v3Extras},
	"v4mini": {atxV4, v4Extras},
	"v4plus": {atxV4, v4Extras},
}

// diy stands for a build that is none of PiKVM's, on a board PiKVM has
// no build for (or a Compute Module on some other carrier): kvmd's
// defaults are all that can be said of its wiring.
const diy = ""

// groupsOf returns the pin groups of model; diy gets kvmd's ATX defaults.
func groupsOf(model string) ([]group, bool) {
	if model == diy {
		return []group{atxDefault}, true
	}
	g, ok := modelGroups[model]
	return g, ok
}

// ignorePast are the models whose kvmd config sets kvmd.info.hw.ignore_past
// (configs/kvmd/main/v4mini-hdmi-rpi4.yaml, v4plus-hdmi-rpi4.yaml): clients
// show only current throttling.
var ignorePast = []string{"v4mini", "v4plus"}

// commonPins returns the pins of the groups every model of models wires
// the same way; a model without a known map makes it empty.
func commonPins(models []string) []hw.PinSpec {
	if len(models) == 0 {
		return nil
	}
	first, ok := groupsOf(models[0])
	if !ok {
		return nil
	}
	var pins []hw.PinSpec
	for _, g := range first {
		same := true
		for _, m := range models[1:] {
			gs, ok := groupsOf(m)
			if !ok || !slices.ContainsFunc(gs, func(o group) bool {
				return o.name == g.name && slices.Equal(o.pins, g.pins)
			}) {
				same = false
				break
			}
		}
		if same {
			pins = append(pins, g.pins...)
		}
	}
	return pins
}
