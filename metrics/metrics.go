// Package metrics writes the daemon's Prometheus text exposition (GET
// /api/export/prometheus/metrics): the machine's numeric state, from the
// same caches as /api/info (package info), the daemon's own counters and
// gauges (authentication attempts, sessions, log followers), and the Go
// runtime's (go_*) and the process's (process_*) metrics under the names
// client_golang's standard collectors give them.
//
// PiKVM's families (pikvm_*, as PiKVM's kvmd 4.197 writes them) can be
// written beside kvmd's or instead of them (Config.Names), from the same
// readings, so that dashboards and alert rules made for PiKVM keep
// working.
//
// kvmd's families come from one collector that turns the values of its
// sources into samples at each scrape: nothing is kept between
// scrapes, and the counters live where they are counted (package auth,
// as atomic counters). Their labels are bounded by the code or the board
// profile: an authentication method and result, a throttling flag, a GPIO
// pin's name; never a user name or an address.
//
// The package writes the text format itself (text.go) rather than through
// client_golang, which with its protobuf data model cost the arm64 release
// binary about 1.7 MiB for a few dozen gauges.
package metrics

import (
	"io"

	"kvmd/auth"
	"kvmd/hid"
	"kvmd/info"
)

// Config is what an Exporter reads. Each source left nil leaves its
// families out.
type Config struct {
	// Version is the daemon's version, for kvmd_build_info.
	Version string
	// Hardware returns the machine's state (info.Source.Hardware).
	Hardware func() info.Hardware
	// AuthCounts returns the authentication counters
	// (auth.Authenticator.Counts).
	AuthCounts func() []auth.Count
	// Sessions returns the number of live sessions.
	Sessions func() int
	// LogFollowers returns the number of /api/log follows running.
	LogFollowers func() int
	// HID returns the keyboard's and mouse's counters (hid.HID.Counts)
	// and HIDState their state (hid.HID.State).
	HID      func() hid.Counts
	HIDState func() hid.State
	// Runtime adds the Go runtime's (go_*) and the process's (process_*)
	// metrics.
	Runtime bool
	// Names chooses kvmd's families, PiKVM's or both; the zero value is
	// kvmd's only. PiKVM's are the machine's state only: they need
	// Hardware.
	Names Names
}

// Exporter writes the exposition. Create it with New.
type Exporter struct {
	kvmd    *collector
	pikvm   *pikvmCollector
	runtime *runtimeCollector
	process *processCollector
}

// New returns an Exporter for cfg.
func New(cfg Config) *Exporter {
	var e Exporter
	if cfg.Names.KVMD || !cfg.Names.PiKVM {
		e.kvmd = newCollector(cfg)
	}
	if cfg.Names.PiKVM && cfg.Hardware != nil {
		e.pikvm = &pikvmCollector{hardware: cfg.Hardware}
	}
	if cfg.Runtime {
		e.runtime = newRuntimeCollector()
		e.process = newProcessCollector(procSelf)
	}
	return &e
}

// WriteMetrics writes the exposition to w in the text format, version
// 0.0.4, families sorted by name, each family with one Write.
func (e *Exporter) WriteMetrics(w io.Writer) error {
	x := newExposition()
	if e.kvmd != nil {
		e.kvmd.collect(x)
	}
	if e.pikvm != nil {
		e.pikvm.collect(x)
	}
	if e.runtime != nil {
		e.runtime.collect(x)
	}
	if e.process != nil {
		e.process.collect(x)
	}
	return x.write(w)
}
