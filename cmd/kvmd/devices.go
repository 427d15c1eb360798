package main

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"

	"kvmd/atx"
	"kvmd/devices"
	"kvmd/events"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/msd"
	"kvmd/ugpio"
)

// newMSD opens the virtual media drive: images in cfg.MSDDir, the
// gadget's LUN under cfg.Root (the demo's stand-in in demo mode); nil
// when cfg.MSDDir is empty.
func newMSD(cfg Config, log *slog.Logger) (*msd.Manager, error) {
	if cfg.MSDDir == "" {
		log.Info("virtual media off (msd-dir empty)")
		return nil, nil
	}
	return msd.New(msd.Config{Dir: cfg.MSDDir, Drive: msdDrive(cfg), Log: log.With("component", "msd")})
}

// devicePoll is how often the GPIO, HID, MSD and streamer states are
// compared for events; the ATX LEDs are read far more often (atx).
const devicePoll = 500 * time.Millisecond

// boardATXPins returns the board's ATX pins from periph's registry, or nil
// when the board has no known ATX wiring or a pin is not registered (a
// fixture root: InitGPIO was not called).
func boardATXPins(specs []hw.PinSpec) *atx.Pins {
	var low []bool
	find := func(name string) (gpio.PinIO, bool) {
		i := slices.IndexFunc(specs, func(p hw.PinSpec) bool { return p.Name == name })
		if i < 0 {
			return nil, false
		}
		low = append(low, specs[i].ActiveLow)
		p := gpioreg.ByName(specs[i].GPIO)
		return p, p != nil
	}
	pl, ok1 := find("atx_power_led")
	hl, ok2 := find("atx_hdd_led")
	ps, ok3 := find("atx_power_switch")
	rs, ok4 := find("atx_reset_switch")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil
	}
	return &atx.Pins{PowerLED: pl, HDDLED: hl, PowerLEDActiveLow: low[0], HDDActiveLow: low[1], PowerSwitch: ps, ResetSwitch: rs}
}

// hidOpener opens a HID function's node in place of the gadget's (the
// demo's stand-in host); nil opens the real /dev/hidgN.
type hidOpener = func(function string, writeOnly bool) (hid.File, error)

// newHID returns the keyboard and mouse of the gadget under fsys; their
// changes (the LEDs, a device on- or offline) wake the device watcher.
func newHID(fsys hw.FS, open hidOpener, log *slog.Logger, wake chan struct{}) *hid.HID {
	return hid.New(hid.Config{FS: fsys, Open: open, Log: log, OnChange: func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}})
}

// startDevices builds the device endpoints' sources and starts their
// watchers, which stop with ctx or stop, whichever comes first. stop
// returns once the ATX buttons are released: the caller calls it before
// the process exits, so that a SIGTERM in the middle of a press does not
// leave the button held. pins are the ATX board's (nil: none); keys, when
// set, is the keyboard and mouse, whose changes come on wake; media is the
// virtual media drive, nil when it is turned off; outputs are the GPIO
// output channels, released (pulses ended) by stop too.
func startDevices(ctx context.Context, src *info.Source, pins *atx.Pins, keys *hid.HID, wake <-chan struct{}, media *msd.Manager, outputs *ugpio.Outputs, log *slog.Logger) (d *httpd.Devices, stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	hub := &events.Hub{}
	d = &httpd.Devices{Events: hub, Version: version}
	atxDone := make(chan struct{})
	ctl, err := atx.New(atx.Config{
		Pins:     pins,
		OnChange: func(st atx.State) { hub.Publish("atx", st) },
		Log:      log.With("component", "atx"),
	})
	if err != nil {
		log.Warn("ATX unavailable", "err", err)
		close(atxDone)
	} else if ctl.Enabled() {
		d.ATX = ctl
		go func() { defer close(atxDone); ctl.Run(ctx) }() // Run releases the buttons when ctx ends
	} else {
		close(atxDone)
	}
	ds := &devices.Source{Hardware: src.Hardware, Pins: src.Profile().Pins, Wake: wake}
	if keys != nil {
		d.HID = keys
		ds.HIDLive = keys.State
	}
	if media != nil {
		ds.MSD, d.MSD = media.State, media
		go media.Run(ctx, devicePoll, func(st msd.State) { hub.Publish(devices.EventMSD, st) })
	}
	if outputs != nil {
		ds.Outputs, d.GPIO = outputs, outputs
	}
	d.State = ds.State
	d.Channels = func(name string) bool {
		return slices.ContainsFunc(ds.Channels(), func(p hw.PinSpec) bool { return p.Name == name })
	}
	go ds.Watch(ctx, devicePoll, hub.Publish)
	// kvmd's info events after the greeting (health, uptime, node), read
	// only while a WebSocket client listens.
	go src.Watch(ctx, info.EventEvery, func() bool { return hub.Len() > 0 }, hub.Publish)
	return d, func() {
		cancel()
		<-atxDone
		if outputs != nil {
			outputs.Close()
		}
	}, nil
}
