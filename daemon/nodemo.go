//go:build !demo

package daemon

import (
	"errors"
	"io"
	"log/slog"

	"kvmd/hw"
	"kvmd/msd"
)

// errNoDemo is what --demo answers in the release build, which has no
// demo mode, so that its fakes (GPIO pins, capture device, firmware mailbox) and the demo
// journal never ship to a device.
var errNoDemo = errors.New("--demo: this build has no demo mode; build with make run (go build -tags demo ./cmd/kvmd)")

func setupDemo(*Config, io.Writer, *slog.Logger) (*machine, error) {
	return nil, errNoDemo
}

// msdDrive is the gadget's LUN, read and written under cfg.Root.
func msdDrive(cfg Config) msd.Drive { return msd.LUN{FS: hw.New(cfg.Root)} }
