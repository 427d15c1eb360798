package v4l2m2m

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvmd/hw"
	"kvmd/internal/ioctl"
)

// Probe opens the node at path and says what encoder of coded it is. Its
// error wraps ErrNotEncoder for a node that is none (a capture device, a
// decoder, an encoder of another format), fs.ErrNotExist for a missing
// node.
func Probe(path string, coded PixelFormat) (Device, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Device{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return probeFD(fd, path, coded)
}

// probeFD reads the capabilities and formats of an open node: a
// memory-to-memory device that streams, with coded among the compressed
// formats of its CAPTURE queue and raw ones on its OUTPUT queue once
// that is coded's (dev-encoder.rst, Querying Capabilities). Setting the
// format touches only this open file's context.
func probeFD(fd int, path string, coded PixelFormat) (Device, error) {
	var c capability
	if err := ioctl.Do(fd, vidiocQueryCap, unsafe.Pointer(&c)); err != nil {
		if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
			return Device{}, fmt.Errorf("%s: %w (no VIDIOC_QUERYCAP)", path, ErrNotEncoder)
		}
		return Device{}, fmt.Errorf("%s: VIDIOC_QUERYCAP: %w", path, err)
	}
	caps := c.Caps
	if caps&capDeviceCaps != 0 {
		caps = c.DeviceCaps
	}
	d := Device{Path: path, Driver: cString(c.Driver[:]), Card: cString(c.Card[:]), MPlane: caps&capVideoM2MMPlane != 0}
	if caps&(capVideoM2M|capVideoM2MMPlane) == 0 || caps&capStreaming == 0 {
		return d, fmt.Errorf("%s (%s): %w: not a streaming memory-to-memory device (capabilities %#x)", path, d.Card, ErrNotEncoder, caps)
	}
	outType, capType := uint32(bufTypeOutput), uint32(bufTypeCapture)
	if d.MPlane {
		outType, capType = bufTypeOutputMPlane, bufTypeCaptureMPlane
	}
	var err error
	if d.Coded, err = enumFormats(fd, capType, true); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	if !slices.Contains(d.Coded, coded) {
		return d, fmt.Errorf("%s (%s): %w: it makes %v, not %s", path, d.Card, ErrNotEncoder, d.Coded, coded)
	}
	f := format{Type: capType}
	pixFormat{Width: 640, Height: 480, PixelFormat: coded}.put(&f, d.MPlane)
	if err := ioctl.Do(fd, vidiocSFmt, unsafe.Pointer(&f)); err != nil {
		return d, fmt.Errorf("%s: setting the coded format %s: %w", path, coded, err)
	}
	if d.Raw, err = enumFormats(fd, outType, false); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Raw) == 0 {
		return d, fmt.Errorf("%s (%s): %w: it takes no raw format for %s", path, d.Card, ErrNotEncoder, coded)
	}
	return d, nil
}

// enumFormats lists a queue's formats, the compressed ones or the others.
func enumFormats(fd int, typ uint32, compressed bool) ([]PixelFormat, error) {
	var out []PixelFormat
	for i := range uint32(256) {
		d := fmtDesc{Index: i, Type: typ}
		err := ioctl.Do(fd, vidiocEnumFmt, unsafe.Pointer(&d))
		if errors.Is(err, unix.EINVAL) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("VIDIOC_ENUM_FMT of queue %d: %w", typ, err)
		}
		if (d.Flags&fmtFlagCompressed != 0) == compressed {
			out = append(out, PixelFormat(d.PixelFormat))
		}
	}
	return out, nil
}

// Detect looks through the machine's video nodes (sysfs's video4linux
// class under f's root) for a stateful encoder of coded: on a Pi 4 the
// bcm2835-codec's encode node. present is false, with a nil error, where
// there is none; nodes that could not be asked (no permission) make the
// error, beside a false present.
func Detect(f hw.FS, coded PixelFormat) (dev Device, present bool, err error) {
	nodes, err := f.VideoDevices()
	if hw.Absent(err) {
		return Device{}, false, nil
	}
	if err != nil {
		return Device{}, false, err
	}
	var errs []error
	for _, n := range nodes {
		if n.Kind() != "" {
			continue // a capture device
		}
		d, err := Probe(n.Node, coded)
		switch {
		case err == nil:
			return d, true, nil
		case errors.Is(err, ErrNotEncoder), errors.Is(err, fs.ErrNotExist):
		default:
			errs = append(errs, err)
		}
	}
	return Device{}, false, errors.Join(errs...)
}
