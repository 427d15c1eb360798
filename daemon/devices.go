package daemon

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"kvmd/atx"
	"kvmd/devices"
	"kvmd/events"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/msd"
	"kvmd/streamer"
)

// devicePoll is how often the GPIO, HID and MSD states are compared for
// events; the ATX LEDs are read far more often (atx).
const devicePoll = 500 * time.Millisecond

// hidOpener opens a HID function's node in place of the gadget's (the
// demo's stand-in host); nil opens the real /dev/hidgN.
type hidOpener = func(function string, writeOnly bool) (hid.File, error)

// deviceParts are the devices the daemon drives, as httpd serves them.
type deviceParts struct {
	// atx is the ATX board, nil without its wiring: the daemon adds its
	// work after the VNC server's, so that it is stopped right after the
	// HTTP server.
	atx      *atx.Controller
	keys     *hid.HID
	streamer *streamer.Streamer
	http     *httpd.Devices
}

// addDevices builds the keyboard and mouse, the virtual media drive, the
// ATX board and the video streamer, and adds each to sup with the
// watchers of their states, the ATX board's work left to the caller. The ATX board is added last of them, so that
// it is stopped right after the HTTP server: a SIGTERM in the middle of
// a press does not leave the button held.
func addDevices(sup *Supervisor, cfg Config, env Env, m *machine, src *info.Source, log *slog.Logger) (*deviceParts, error) {
	hub := &events.Hub{}
	d := &httpd.Devices{Events: hub, Version: env.Version}
	dp := &deviceParts{}
	// The keyboard's and mouse's changes (the LEDs, a device on- or
	// offline) wake the device watcher.
	wake := make(chan struct{}, 1)
	keys := hid.New(hid.Config{FS: m.fs, Open: m.hidOpen, Log: log.With("component", "hid"), OnChange: func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}})
	// Released and closed before the tokens are written.
	sup.Add(Child{Name: "hid", Run: Loop(keys.Run)})
	d.HID = keys

	ds := &devices.Source{Hardware: src.Hardware, Pins: src.Profile().Pins, Wake: wake, HIDLive: keys.State}
	media, err := newMSD(cfg, log)
	if err != nil {
		return nil, err
	}
	if media != nil {
		ds.MSD, d.MSD = media.State, media
		sup.Add(Child{Name: "msd", Run: Loop(func(ctx context.Context) {
			media.Run(ctx, devicePoll, func(st msd.State) { hub.Publish(devices.EventMSD, st) })
		})})
	}
	d.State = ds.State
	d.Channels = func(name string) bool {
		return slices.ContainsFunc(ds.Channels(), func(p hw.PinSpec) bool { return p.Name == name })
	}
	sup.Add(Child{Name: "devices", Run: Loop(func(ctx context.Context) { ds.Watch(ctx, devicePoll, hub.Publish) })})
	// kvmd's info events after the greeting (health, uptime, node), read
	// only while a WebSocket client listens.
	sup.Add(Child{Name: "info", Run: Loop(func(ctx context.Context) {
		src.Watch(ctx, info.EventEvery, func() bool { return hub.Len() > 0 }, hub.Publish)
	})})

	st, err := addStreamer(sup, cfg, m, src, hub, log.With("component", "streamer"))
	if err != nil {
		return nil, err
	}
	d.Streamer, dp.streamer = st, st

	ctl, err := atx.New(atx.Config{
		Pins:     atx.BoardPins(src.Profile().Pins),
		OnChange: func(st atx.State) { hub.Publish("atx", st) },
		Log:      log.With("component", "atx"),
	})
	switch {
	case err != nil:
		log.Warn("ATX unavailable", "err", err)
	case ctl.Enabled():
		d.ATX = ctl
		dp.atx = ctl
	}
	dp.keys, dp.http = keys, d
	return dp, nil
}

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
