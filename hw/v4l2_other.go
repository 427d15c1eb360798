//go:build !linux

package hw

import "fmt"

// DeviceV4L2 asks the kernel's V4L2 drivers; V4L2 exists on Linux only,
// so elsewhere every query fails with ErrNotSupported.
type DeviceV4L2 struct{}

var _ V4L2 = DeviceV4L2{}

// DVTimings returns ErrNotSupported.
func (DeviceV4L2) DVTimings(dev string) (Timings, error) {
	return Timings{}, fmt.Errorf("DV timings of %s: %w", dev, ErrNotSupported)
}

// Format returns ErrNotSupported.
func (DeviceV4L2) Format(dev string) (Format, error) {
	return Format{}, fmt.Errorf("format of %s: %w", dev, ErrNotSupported)
}

// Topology returns ErrNotSupported.
func (DeviceV4L2) Topology(media string) (Topology, error) {
	return Topology{}, fmt.Errorf("media topology of %s: %w", media, ErrNotSupported)
}
