package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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
// a new one of the daemon's own (tempStreamerDir). The directory is the
// daemon's user's alone (0700). remove removes it when it is the daemon's
// own, once the streamer has removed its socket from it (the socket is the
// streamer's alone); the others are systemd's or the operator's.
func streamerDir(dir string) (_ string, remove func(), err error) {
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
		return dir, func() {}, nil
	}
	return tempStreamerDir(os.TempDir())
}

// The daemon's own streamer directories in the temporary directory: named
// tempDirPrefix once made and locked, newDirPrefix while being made.
const (
	tempDirPrefix = "kvmd-streamer-"
	newDirPrefix  = ".kvmd-streamer-new-"
)

// tempStreamerDir makes a streamer directory of the daemon's own in tmp,
// and removes those that daemons killed before their end left there: a
// daemon holds an flock on its directory as long as it runs (the kernel
// lets it go with the process, kill -9 included), so one that can be
// locked is no live daemon's. A directory is made under another name
// and renamed once locked, so none is ever seen unlocked under its name.
// cleanup removes it, empty (the streamer removed its socket), and lets
// the lock go.
func tempStreamerDir(tmp string) (dir string, cleanup func(), err error) {
	removeStaleStreamerDirs(tmp)
	made, err := os.MkdirTemp(tmp, newDirPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("streamer directory: %w", err)
	}
	f, err := os.Open(made)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	dir = filepath.Join(tmp, tempDirPrefix+strings.TrimPrefix(filepath.Base(made), newDirPrefix))
	if err == nil {
		err = os.Rename(made, dir)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.RemoveAll(made)
		return "", nil, fmt.Errorf("streamer directory: %w", err)
	}
	return dir, func() { os.Remove(dir); f.Close() }, nil
}

// removeStaleStreamerDirs removes the streamer directories in tmp of this
// user that no running daemon holds (tempStreamerDir), and those left
// half made more than a minute ago.
func removeStaleStreamerDirs(tmp string) {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, tempDirPrefix) && !strings.HasPrefix(name, newDirPrefix) {
			continue
		}
		p := filepath.Join(tmp, name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if strings.HasPrefix(name, newDirPrefix) {
			if time.Since(fi.ModTime()) > time.Minute {
				os.RemoveAll(p)
			}
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(p) // still locked by this process until f closes
		}
		f.Close()
	}
}

// addStreamer adds the video streamer: ustreamer (--streamer) on the
// capture device found below --root, or the machine's launcher (the
// demo's generated picture). The daemon's own reading of the capture
// (src) is its truth for the signal. v, when set, is the H.264 encoding
// of its picture (newVideo), reported in its state, whose encoder may
// take ustreamer's raw sink.
func addStreamer(sup *Supervisor, cfg Config, m *machine, src *info.Source, v *video, log *slog.Logger) (*streamer.Streamer, error) {
	dir, removeDir, err := streamerDir(cfg.StreamerDir)
	if err != nil {
		return nil, err
	}
	extra := cfg.StreamerArgs
	if v != nil && v.rawSink {
		// Before the operator's own options, which win.
		extra = append(slices.Clip(rawSinkArgs), extra...)
	}
	scfg := streamer.Config{
		Launcher:   m.launcher,
		Dir:        dir,
		Video:      streamer.Machine{FS: m.fs, Reader: src},
		Quality:    cfg.StreamerQuality,
		DesiredFPS: cfg.StreamerDesiredFPS,
		Resolution: cfg.StreamerResolution,
		ExtraArgs:  extra,
		Forever:    cfg.StreamerForever,
		// Zero is kvmd's default, 10 s.
		ShutdownDelay: cfg.StreamerShutdownDelay,
		Log:           log,
		H264Bitrate:   cfg.H264Bitrate,
		H264GOP:       cfg.H264GOP,
	}
	if v != nil {
		scfg.H264 = v
	}
	st := streamer.New(scfg)
	sup.Add(Child{Name: "streamer", Run: Loop(func(ctx context.Context) {
		st.Run(ctx)
		removeDir()
	})})
	return st, nil
}
