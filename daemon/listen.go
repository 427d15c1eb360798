package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// listeners returns the sockets systemd passed (socket activation), or
// else opens the --listen addresses.
func listeners(cfg Config, log *slog.Logger) ([]net.Listener, error) {
	got, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	var lns []net.Listener
	for _, ln := range got {
		if ln != nil {
			lns = append(lns, ln)
		}
	}
	if len(lns) > 0 {
		log.Info("using sockets passed by systemd; --listen ignored", "count", len(lns))
		return lns, nil
	}
	if len(cfg.Listen) == 0 {
		return nil, errors.New("nothing to listen on: give --listen")
	}
	gid := -1
	if cfg.UnixGroup != "" {
		g, err := user.LookupGroup(cfg.UnixGroup)
		if err != nil {
			return nil, fmt.Errorf("unix-group: %w", err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	for _, addr := range cfg.Listen {
		ln, err := listen(addr, gid)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// listen opens a TCP address or a unix socket. A socket file gets mode
// 0660 and, when gid is not -1, that group, so the members of --unix-group
// can connect.
func listen(addr string, gid int) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		return ln, nil
	}
	// A socket left by a daemon that died is in the way; a live one, or a
	// file that is not a socket, is not ours to remove.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen: %s: another daemon is serving this socket", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen: giving %s to the unix-group: %w", path, err)
		}
	}
	return ln, nil
}

// watchdog pings systemd's watchdog at a third of its interval, when the
// unit has one.
func watchdog(ctx context.Context, log *slog.Logger) {
	every, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("watchdog", "err", err)
	}
	if every <= 0 {
		return
	}
	t := time.NewTicker(every / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		}
	}
}
