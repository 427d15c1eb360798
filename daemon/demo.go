//go:build demo

package daemon

import (
	"io"
	"log/slog"

	"kvmd/hw"
	"kvmd/internal/demo"
	"kvmd/msd"
	"kvmd/msd/msdtest"
)

// setupDemo starts --demo (package demo) on the settings left at their
// defaults, and returns the machine of its fakes: capture device, firmware
// mailbox and streamer, the stand-in host of the keyboard and mouse, the
// logger that also writes to the demo journal, and what undoes it.
func setupDemo(cfg *Config, stdout io.Writer, log *slog.Logger) (*machine, error) {
	o := demo.Options{Users: cfg.Users, JournalDir: cfg.JournalDir, TOTPSecret: cfg.TOTPSecret, TLS: cfg.TLSCert != ""}
	if cfg.Root != "/" {
		o.Root = cfg.Root
	}
	if cfg.Meta != DefaultMeta {
		o.Meta = cfg.Meta
	}
	if cfg.MSDDir != DefaultMSDDir {
		o.MSDDir = cfg.MSDDir
	}
	if len(cfg.Listen) > 0 {
		o.Listen = cfg.Listen[0]
	}
	d, err := demo.Start(o, stdout, log)
	if err != nil {
		return nil, err
	}
	cfg.Users, cfg.Root, cfg.Meta, cfg.JournalDir, cfg.TOTPSecret = d.Users, d.Root, d.Meta, d.JournalDir, d.TOTPSecret
	cfg.MSDDir = d.MSDDir
	return &machine{v4l2: d.V4L2, mailbox: d.Mailbox, hidOpen: d.HIDOpen, log: d.Log(log), launcher: d.Streamer, close: d.Close}, nil
}

// msdDrive is the virtual media's LUN: in demo mode a stand-in that keeps
// the kernel's rules (msdtest), as there is no gadget; else the gadget's.
func msdDrive(cfg Config) msd.Drive {
	if cfg.Demo {
		return &msdtest.Drive{}
	}
	return msd.LUN{FS: hw.New(cfg.Root)}
}
