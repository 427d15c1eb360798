package board

import (
	"slices"
	"strings"

	"kvmd/hw"
)

// build is one of PiKVM's platform packages: a PIKVM_MODEL with a
// PIKVM_VIDEO ("hdmi": an HDMI-to-CSI bridge; "hdmiusb": a USB dongle).
type build struct{ model, video string }

var (
	v0hdmi, v0usb = build{"v0", "hdmi"}, build{"v0", "hdmiusb"}
	v1hdmi, v1usb = build{"v1", "hdmi"}, build{"v1", "hdmiusb"}
	v2hdmi, v2usb = build{"v2", "hdmi"}, build{"v2", "hdmiusb"}
	v3hdmi        = build{"v3", "hdmi"}
	v4mini        = build{"v4mini", "hdmi"}
	v4plus        = build{"v4plus", "hdmi"}
	// other is a build that is none of PiKVM's: any capture, kvmd's
	// default wiring.
	other = build{diy, ""}
)

// hardware is a kind of Raspberry Pi and the PiKVM builds made for it.
type hardware struct {
	// board is PIKVM_BOARD: PiKVM names a board by its SoC family, so a
	// Compute Module 4 and a Pi 400 are rpi4 like the Pi 4 B.
	board string
	// compatible are the first entries of the device tree's root
	// compatible that mean this hardware.
	compatible []string
	// model is the device tree's model up to " Rev": the firmware writes
	// "Raspberry Pi 4 Model B Rev 1.5" for the DTS's "Raspberry Pi 4
	// Model B".
	model string
	// builds are the PiKVM builds for this hardware.
	builds []build
}

// hardwares are the Raspberry Pis kvmd knows.
//
// compatible: the root nodes of raspberrypi/linux's device trees (branch
// rpi-6.12.y): arch/arm/boot/dts/broadcom/bcm2708-rpi-zero-w.dts,
// bcm2709-rpi-2-b.dts, bcm2710-rpi-2-b.dts (the BCM2837 Pi 2 B v1.2),
// bcm2710-rpi-3-b.dts, bcm2710-rpi-3-b-plus.dts, bcm2710-rpi-zero-2-w.dts,
// bcm2711-rpi-4-b.dts, bcm2711-rpi-400.dts, bcm2711-rpi-cm4.dts,
// bcm2711-rpi-cm4s.dts, bcm2712-rpi-5-b.dts; arch/arm64/boot/dts/broadcom/
// bcm2712-rpi-500.dts, bcm2712-rpi-cm5.dtsi (included by every CM5 board
// file); the 3 A+ from the kernel's binding list
// (Documentation/devicetree/bindings/arm/bcm/brcm,bcm2835.txt).
//
// builds: pikvm/kvmd's PKGBUILD _variants (at f14596e8, 2026-08-06):
// v0-hdmi, v0-hdmiusb, v1-hdmi, v1-hdmiusb for zero2w, rpi2, rpi3;
// v2-hdmi for zero2w, rpi3, rpi4; v2-hdmiusb, v3-hdmi, v4mini-hdmi,
// v4plus-hdmi for rpi4. The Zero W (zerow) had v0-hdmi, v0-hdmiusb and
// v2-hdmi until kvmd commit 04720ffe ("deprecated rpi and zerow",
// 2022-04-12). The V4 Mini and Plus are Compute Module 4 carriers; a CM4
// may as well sit on any other carrier, so its builds include other.
// PiKVM has no build for the Pi 400, CM4S, Pi 5, Pi 500 or CM5.
var hardwares = []hardware{
	{board: "zerow", compatible: []string{"raspberrypi,model-zero-w"}, model: "Raspberry Pi Zero W",
		builds: []build{v0hdmi, v0usb, v2hdmi}},
	{board: "zero2w", compatible: []string{"raspberrypi,model-zero-2-w"}, model: "Raspberry Pi Zero 2 W",
		builds: []build{v0hdmi, v0usb, v1hdmi, v1usb, v2hdmi}},
	{board: "rpi2", compatible: []string{"raspberrypi,2-model-b", "raspberrypi,2-model-b-rev2"}, model: "Raspberry Pi 2 Model B",
		builds: []build{v0hdmi, v0usb, v1hdmi, v1usb}},
	{board: "rpi3", compatible: []string{"raspberrypi,3-model-b", "raspberrypi,3-model-b-plus", "raspberrypi,3-model-a-plus"},
		model: "Raspberry Pi 3 Model", builds: []build{v0hdmi, v0usb, v1hdmi, v1usb, v2hdmi}},
	{board: "rpi4", compatible: []string{"raspberrypi,4-model-b"}, model: "Raspberry Pi 4 Model B",
		builds: []build{v2hdmi, v2usb, v3hdmi}},
	{board: "rpi4", compatible: []string{"raspberrypi,400"}, model: "Raspberry Pi 400",
		builds: []build{other}},
	{board: "rpi4", compatible: []string{"raspberrypi,4-compute-module"}, model: "Raspberry Pi Compute Module 4",
		builds: []build{v4mini, v4plus, other}},
	{board: "rpi4", compatible: []string{"raspberrypi,4-compute-module-s"}, model: "Raspberry Pi Compute Module 4S",
		builds: []build{other}},
	{board: "rpi5", compatible: []string{"raspberrypi,5-model-b"}, model: "Raspberry Pi 5",
		builds: []build{other}},
	{board: "rpi5", compatible: []string{"raspberrypi,500"}, model: "Raspberry Pi 500",
		builds: []build{other}},
	{board: "rpi5", compatible: []string{"raspberrypi,5-compute-module"}, model: "Raspberry Pi Compute Module 5",
		builds: []build{other}},
}

// detectHardware finds the hardware of a device tree: by its compatible
// list, else by its model name (a tree from a firmware or capture without
// compatible). isPi is true for any Raspberry Pi, known or not.
func detectHardware(dt hw.DeviceTree) (h hardware, known, isPi bool) {
	for _, c := range dt.Compatible {
		for _, h := range hardwares {
			if slices.Contains(h.compatible, c) {
				return h, true, true
			}
		}
	}
	if len(dt.Compatible) == 0 {
		for _, h := range hardwares {
			if nameHasPrefix(dt.Model, h.model) {
				return h, true, true
			}
		}
	}
	isPi = strings.HasPrefix(dt.Model, "Raspberry Pi") ||
		slices.ContainsFunc(dt.Compatible, func(c string) bool { return strings.HasPrefix(c, "raspberrypi,") })
	return hardware{}, false, isPi
}

// nameHasPrefix reports whether name starts with the words of prefix: "Raspberry
// Pi 5" is a prefix of "Raspberry Pi 5 Model B Rev 1.0" but not of
// "Raspberry Pi 500 Rev 1.0".
func nameHasPrefix(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && (rest == "" || rest[0] == ' ')
}
