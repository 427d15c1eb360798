//go:build arm || arm64

package hw

import (
	// The Raspberry Pi's GPIO (/dev/gpiomem) and its header's pin names,
	// as periph's host.Init registers them on ARM.
	_ "periph.io/x/host/v3/bcm283x"
	_ "periph.io/x/host/v3/rpi"
)
