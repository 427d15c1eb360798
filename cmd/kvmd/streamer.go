package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/streamer"
)

// checkStreamer checks the streamer settings.
func (c *Config) checkStreamer() error {
	if c.StreamerQuality < 1 || c.StreamerQuality > 100 {
		return errors.New("--streamer-quality must be from 1 to 100")
	}
	if c.StreamerDesiredFPS < streamer.DefaultDesiredFPSMin || c.StreamerDesiredFPS > streamer.DefaultDesiredFPSMax {
		return fmt.Errorf("--streamer-desired-fps must be from %d to %d", streamer.DefaultDesiredFPSMin, streamer.DefaultDesiredFPSMax)
	}
	if c.StreamerResolution != "" {
		r, err := streamer.ParseResolution(c.StreamerResolution)
		if err != nil || !slices.Contains(streamer.DongleResolutions, r) {
			return fmt.Errorf("--streamer-resolution %q: want one of %s", c.StreamerResolution, strings.Join(streamer.DongleResolutions, ", "))
		}
		c.StreamerResolution = r
	}
	if c.StreamerShutdownDelay < 0 {
		return errors.New("--streamer-shutdown-delay cannot be negative")
	}
	if c.Streamer == "" {
		return errors.New("--streamer needs the ustreamer program (a path, or a name looked up in PATH)")
	}
	return nil
}

// streamerDir returns the directory of the streamer's socket: --streamer-dir,
// else the one systemd made for the service (RUNTIME_DIRECTORY, from
// RuntimeDirectory=: the one named ustreamer when there are several), else
// a new one of the daemon's own, removed at the end. The directory is the
// daemon's user's alone (0700).
func streamerDir(dir string) (string, func(), error) {
	if dir == "" {
		dirs := strings.Split(os.Getenv("RUNTIME_DIRECTORY"), ":")
		dir = dirs[0]
		for _, d := range dirs {
			if filepath.Base(d) == "ustreamer" {
				dir = d
			}
		}
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", nil, fmt.Errorf("--streamer-dir: %w", err)
		}
		return dir, func() { os.Remove(filepath.Join(dir, streamer.SocketName)) }, nil
	}
	tmp, err := os.MkdirTemp("", "kvmd-streamer-")
	if err != nil {
		return "", nil, fmt.Errorf("streamer directory: %w", err)
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// streamerProgram tells /api/info's system.streamer what the streamer
// program is, as kvmd does: its name, --version and --features; empty
// values when it cannot be asked (not installed).
func streamerProgram(ctx context.Context, path string, l streamer.Launcher) func() (string, string, map[string]bool) {
	return func() (string, string, map[string]bool) {
		p, err := l.Probe(ctx)
		if err != nil {
			return "", "", nil
		}
		return filepath.Base(path), p.Version, p.Features
	}
}

// startStreamer makes the video streamer and runs it until ctx ends or the
// returned stop is called: ustreamer (--streamer) on the capture device
// found below --root, or launcher (the demo's generated picture). The
// daemon's own reading of the capture (src) is its truth for the signal.
func startStreamer(ctx context.Context, cfg Config, src *info.Source, launcher streamer.Launcher, d *httpd.Devices, log *slog.Logger) (func(), error) {
	dir, cleanup, err := streamerDir(cfg.StreamerDir)
	if err != nil {
		return nil, err
	}
	fsys := hw.New(cfg.Root)
	st := streamer.New(streamer.Config{
		Launcher:   launcher,
		Dir:        dir,
		Capture:    func() (streamer.Capture, error) { return streamer.FindCapture(fsys) },
		Signal:     func() *hw.Video { return src.Hardware().Video },
		Quality:    cfg.StreamerQuality,
		DesiredFPS: cfg.StreamerDesiredFPS,
		Resolution: cfg.StreamerResolution,
		ExtraArgs:  cfg.StreamerArgs,
		Forever:    cfg.StreamerForever,
		// Zero is kvmd's default, 10 s.
		ShutdownDelay: cfg.StreamerShutdownDelay,
		Log:           log,
		Publish:       d.Events.Publish,
	})
	d.Streamer = st
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Say at start whether there is a streamer to run.
		if p, err := launcher.Probe(ctx); err != nil {
			log.Warn("no video streamer: the streamer endpoints answer 503 until one is installed", "err", err)
		} else {
			log.Info("video streamer", "program", cfg.Streamer, "version", p.Version, "socket", st.Socket())
		}
		st.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		cleanup()
	}, nil
}
