// Package board knows the boards kvmd runs on: what PiKVM calls the
// platform (model, video, board: the fields of /api/info's
// hw.platform), and which GPIO pin is wired to what.
//
// PiKVM's own images say what they are in a platform file
// (/usr/lib/kvmd/platform); where it exists its values win. Elsewhere the
// board is known from the device tree the firmware fills in, the video
// from the capture device, and the model only where exactly one PiKVM
// build fits the hardware: a Pi 4 B with a CSI bridge may be a DIY v2 or a
// v3, a bare Compute Module 4 a V4 Mini, a V4 Plus or anything else, and
// then the model is null rather than a guess. Pins follow the same rule:
// a group of pins (the ATX LEDs and buttons, the HID controller's lines)
// is read only when every build that fits wires it the same way.
package board

import (
	"errors"
	"fmt"
	"slices"

	"kvmd/hw"
)

// Profile is what kvmd knows of the machine it runs on.
type Profile struct {
	// Type is "rpi" for a Raspberry Pi, "generic" otherwise.
	Type string
	// Model, Video and Board are PiKVM's PIKVM_MODEL (v0 ... v4plus),
	// PIKVM_VIDEO (hdmi, hdmiusb) and PIKVM_BOARD (rpi4, zero2w, ...).
	// Empty means unknown: null.
	Model, Video, Board string
	// Pins are the machine's named GPIO pins: only those its wiring is
	// known for.
	Pins []hw.PinSpec
	// IgnorePast is kvmd's info.hw.ignore_past for the model: clients
	// should show only current throttling.
	IgnorePast bool
	// FromFile tells that PiKVM's platform file was read.
	FromFile bool
}

// Facts are what identifying the machine reads.
type Facts struct {
	DeviceTree hw.DeviceTree
	// Platform is PiKVM's platform file, nil when there is none.
	Platform *Platform
	// Capture is PIKVM_VIDEO as the capture device shows it: "hdmi" for
	// a CSI-2 receiver (an HDMI-to-CSI bridge), "hdmiusb" for a USB video
	// device, "" without either.
	Capture string
}

// Read gathers the facts below fs's root. The error joins the device
// tree's, the platform file's and the capture devices' read problems
// (absence is none); the facts it could read are returned all the same.
func Read(fs hw.FS) (Facts, error) {
	var f Facts
	var errs []error
	dt, err := fs.DeviceTree()
	if err != nil && !hw.Absent(err) {
		errs = append(errs, fmt.Errorf("device tree: %w", err))
	}
	f.DeviceTree = dt
	switch p, err := ReadPlatform(fs); {
	case err == nil:
		f.Platform = &p
	case !hw.Absent(err):
		errs = append(errs, err)
	}
	devs, err := fs.VideoDevices()
	if err != nil && !hw.Absent(err) {
		errs = append(errs, fmt.Errorf("video devices: %w", err))
	}
	f.Capture = CaptureVideo(devs, dt.Model)
	return f, errors.Join(errs...)
}

// CaptureVideo returns PIKVM_VIDEO for the capture device among devs on a
// board of device-tree model (see hw.PickCapture): "hdmi" for a CSI-2
// receiver, "hdmiusb" for a USB dongle, "" for none.
func CaptureVideo(devs []hw.VideoDevice, model string) string {
	c, ok := hw.PickCapture(devs, model)
	if !ok {
		return ""
	}
	switch c.Kind() {
	case hw.CaptureCSI:
		return "hdmi"
	case hw.CaptureUSB:
		return "hdmiusb"
	}
	return ""
}

// Identify returns the profile for f.
func Identify(f Facts) Profile {
	h, known, isPi := detectHardware(f.DeviceTree)
	p := Profile{Type: "generic"}
	if isPi || f.Platform != nil {
		// PiKVM OS runs only on Raspberry Pis.
		p.Type = "rpi"
	}
	var fits []build
	if known {
		p.Board = h.board
		for _, b := range h.builds {
			if f.Capture == "" || b.video == "" || b.video == f.Capture {
				fits = append(fits, b)
			}
		}
	}
	if p.Type == "rpi" {
		// A generic machine's USB camera says nothing of a PiKVM build.
		p.Video = f.Capture
	}
	if p.Video == "" {
		p.Video = same(fits, func(b build) string { return b.video })
	}
	p.Model = same(fits, func(b build) string { return b.model })
	models := make([]string, 0, len(fits))
	for _, b := range fits {
		if !slices.Contains(models, b.model) {
			models = append(models, b.model)
		}
	}

	if fp := f.Platform; fp != nil {
		p.FromFile = true
		if fp.Board != "" {
			p.Board = fp.Board
		}
		if fp.Video != "" {
			p.Video = fp.Video
		}
		if fp.Model != "" {
			p.Model = fp.Model
			models = []string{fp.Model}
			if _, ok := modelGroups[fp.Model]; !ok {
				models = nil // a model kvmd has no map of
			}
		}
	}
	p.Pins = commonPins(models)
	p.IgnorePast = p.Model != "" && slices.Contains(ignorePast, p.Model)
	return p
}

// same returns field of every build in bs if they all agree, else "".
func same(bs []build, field func(build) string) string {
	if len(bs) == 0 {
		return ""
	}
	v := field(bs[0])
	for _, b := range bs[1:] {
		if field(b) != v {
			return ""
		}
	}
	return v
}
