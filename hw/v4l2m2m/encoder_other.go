//go:build !linux

package v4l2m2m

import (
	"context"
	"fmt"

	"kvmd/hw"
)

// Encoder is a stateful encoder; V4L2 exists on Linux only, so elsewhere
// none opens.
type Encoder struct{}

// Open returns ErrNotSupported.
func Open(cfg Config) (*Encoder, error) {
	return nil, fmt.Errorf("%s: %w", cfg.Device, ErrNotSupported)
}

// Probe returns ErrNotSupported.
func Probe(path string, coded PixelFormat) (Device, error) {
	return Device{}, fmt.Errorf("%s: %w", path, ErrNotSupported)
}

// Detect finds no encoder: absent, which is not an error.
func Detect(f hw.FS, coded PixelFormat) (Device, bool, error) { return Device{}, false, nil }

// Device returns nothing.
func (e *Encoder) Device() Device { return Device{} }

// Controls returns none.
func (e *Encoder) Controls() Controls { return Controls{} }

// Encode returns ErrNotSupported.
func (e *Encoder) Encode(ctx context.Context, f Frame) (Unit, error) { return Unit{}, ErrNotSupported }

// ForceKeyFrame does nothing.
func (e *Encoder) ForceKeyFrame() {}

// SetBitrate returns ErrNotSupported.
func (e *Encoder) SetBitrate(kbps int) (bool, error) { return false, ErrNotSupported }

// SetGOP returns ErrNotSupported.
func (e *Encoder) SetGOP(frames int) (bool, error) { return false, ErrNotSupported }

// Resets returns 0.
func (e *Encoder) Resets() int { return 0 }

// Close does nothing.
func (e *Encoder) Close() error { return nil }
