// Package board knows the boards kvmd runs on: which Raspberry Pi (or
// other machine) this is, what PiKVM calls such a build (model, video,
// board: the fields of PiKVM's /usr/share/kvmd/platform), and which GPIO
// pin is wired to what.
//
// A profile is chosen from the device tree's compatible list, which the
// firmware fills in for every Raspberry Pi, falling back to its model
// string; a machine without a device tree is generic.
package board

import (
	"strings"

	"kvmd/hw"
)

// Profile is what kvmd knows of a kind of board.
type Profile struct {
	// Board is PiKVM's name for the board (PIKVM_BOARD): rpi4, zero2w, ...
	Board string
	// Type is "rpi" for a Raspberry Pi, "generic" otherwise.
	Type string
	// Model and Video are PiKVM's PIKVM_MODEL and PIKVM_VIDEO for a DIY
	// build on this board: v2 with an HDMI-to-CSI bridge (TC358743).
	// Empty means unknown (null).
	Model, Video string
	// Pins are the board's named GPIO pins.
	Pins []hw.PinSpec

	compatible  []string // device-tree compatible entries that mean this board
	modelPrefix string   // device-tree model prefix, when compatible is missing
}

// atxPins is the wiring of PiKVM's DIY ATX board: the host's power and HDD
// LEDs read on inputs, its power and reset buttons pressed through relays
// or optocouplers on outputs (kvmd's atx/gpio plugin defaults).
var atxPins = []hw.PinSpec{
	{Name: "atx_power_led", GPIO: "GPIO24"},
	{Name: "atx_hdd_led", GPIO: "GPIO22"},
	{Name: "atx_power_switch", GPIO: "GPIO23"},
	{Name: "atx_reset_switch", GPIO: "GPIO27"},
}

// Profiles are the known boards, most specific first.
var Profiles = []Profile{
	{Board: "rpi5", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,5-model-b"}, modelPrefix: "Raspberry Pi 5"},
	{Board: "cm5", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,5-compute-module"}, modelPrefix: "Raspberry Pi Compute Module 5"},
	{Board: "rpi4", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,4-model-b", "raspberrypi,400"}, modelPrefix: "Raspberry Pi 4"},
	{Board: "cm4", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,4-compute-module"}, modelPrefix: "Raspberry Pi Compute Module 4"},
	{Board: "zero2w", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,model-zero-2-w"}, modelPrefix: "Raspberry Pi Zero 2"},
	{Board: "rpi3", Type: "rpi", Model: "v2", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,3-model-b", "raspberrypi,3-model-b-plus", "raspberrypi,3-model-a-plus"}, modelPrefix: "Raspberry Pi 3"},
	{Board: "zerow", Type: "rpi", Model: "v0", Video: "hdmi", Pins: atxPins,
		compatible: []string{"raspberrypi,model-zero-w"}, modelPrefix: "Raspberry Pi Zero W"},
}

// Generic is the profile of a machine kvmd knows nothing special about.
var Generic = Profile{Board: "generic", Type: "generic"}

// Detect chooses the profile for a device tree.
func Detect(dt hw.DeviceTree) Profile {
	for _, c := range dt.Compatible {
		for _, p := range Profiles {
			for _, pc := range p.compatible {
				if c == pc {
					return p
				}
			}
		}
	}
	for _, p := range Profiles {
		if dt.Model != "" && strings.HasPrefix(dt.Model, p.modelPrefix) {
			return p
		}
	}
	if strings.HasPrefix(dt.Model, "Raspberry Pi") {
		return Profile{Board: "rpi", Type: "rpi"}
	}
	return Generic
}
