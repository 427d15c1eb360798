package daemon

import (
	"context"
	"encoding/json"
	"log/slog"

	"kvmd/atx"
	"kvmd/devices"
	"kvmd/events"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/info"
	"kvmd/msd"
	"kvmd/streamer"
	"kvmd/subsystem"
)

// deviceParts are the devices the daemon drives, as httpd serves them.
type deviceParts struct {
	// atx is the ATX board, nil without its wiring: the daemon adds its
	// work after the VNC server's, so that it is stopped right after the
	// HTTP server.
	atx      *atx.Controller
	keys     *hid.HID
	streamer *streamer.Streamer
	// media is the virtual media drive, nil when it is off.
	media *msd.Manager
	http  *httpd.Devices
}

// addDevices builds the devices and kvmd's subsystems over them, and adds
// their work to sup: the keyboard and mouse, the video streamer, each
// subsystem's watcher; the ATX board's is left to the caller (deviceParts).
//
// This is the one place a subsystem is registered: its package
// implements subsystem.Typed for its state, and it takes its place in
// the list below, in the order of kvmd's greeting; its watcher, its
// greeting and GET /api/<name> follow from it.
func addDevices(sup *Supervisor, cfg Config, env Env, m *machine, src *info.Source, log *slog.Logger) (*deviceParts, error) {
	hub := &events.Hub{}
	// The keyboard's and mouse's changes (the LEDs, a device on- or
	// offline) have their state read at once.
	hidState := devices.NewHID(src)
	keys := hid.New(hid.Config{FS: m.fs, Open: m.hidOpen, Log: log.With("component", "hid"), OnChange: hidState.Changed})
	hidState.Live = keys
	// Released and closed before the tokens are written.
	sup.Add(Child{Name: "hid", Run: Loop(keys.Run)})

	media, err := newMSD(cfg, log)
	if err != nil {
		return nil, err
	}
	// The picture in H.264, when there is an encoder: the streamer
	// reports it and may feed it its raw sink; it runs after the
	// streamer (add, below).
	vid, err := newH264(cfg, env, m, log.With("component", "h264"))
	if err != nil {
		return nil, err
	}
	st, err := addStreamer(sup, cfg, m, src, vid, log.With("component", "streamer"))
	if err != nil {
		return nil, err
	}
	ctl, err := atx.New(atx.Config{Pins: atxBoard(cfg, src.Profile().Pins, log), Log: log.With("component", "atx")})
	switch {
	case err != nil:
		log.Warn("ATX unavailable", "err", err)
		ctl = nil
	case !ctl.Enabled():
		ctl = nil // kvmd's disabled ATX
	}
	wakeGPIO := make(chan struct{}, 1)
	outputs := newOutputs(sup, cfg, log.With("component", "gpio"), wakeGPIO)
	gpio := devices.GPIO{Machine: src, Pins: src.Profile().Pins, Outputs: outputs, Wake: wakeGPIO}

	d := &httpd.Devices{Events: hub, Version: env.Version, HID: keys, GPIO: gpio, Streamer: st,
		Subsystems: []subsystem.Subsystem{
			subsystem.Of[devices.GPIOState](gpio),
			subsystem.Of[devices.HIDState](hidState),
			subsystem.Of[atx.State](atx.Subsystem{C: ctl}),
			subsystem.Of[msd.State](msd.Subsystem{M: media}),
			subsystem.Of[map[string]any](streamer.Subsystem{S: st}),
			// kvmd's info events after the greeting (health, uptime,
			// node), read only while a WebSocket client listens.
			subsystem.Of[json.RawMessage](info.Subsystem{S: src, Listeners: hub}),
			subsystem.Of[hid.KeymapsState](hid.KeymapsSubsystem{K: keys.Keymaps()}),
			subsystem.Of[streamer.Clients](streamer.ClientsSubsystem{S: st}),
		},
	}
	if media != nil {
		d.MSD = media
	}
	// Checked at start (Config.Check).
	d.MSDRemoteDeny, _ = parseNetworks("--msd-remote-deny", cfg.MSDRemoteDeny)
	if vid != nil {
		vid.add(sup, st, d)
	}
	for _, s := range d.Subsystems {
		sup.Add(Child{Name: s.Name() + " events", Run: Loop(func(ctx context.Context) { subsystem.Watch(ctx, s, hub) })})
	}
	if ctl != nil {
		d.ATX = ctl
	}
	return &deviceParts{atx: ctl, keys: keys, streamer: st, media: media, http: d}, nil
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
