package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"

	"kvmd/httpd"
	"kvmd/httpd/auth"
)

// serve runs the daemon until ctx ends.
func serve(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log := newLogger(stderr)
	if cfg.Demo {
		dir, err := setupDemo(&cfg, stdout)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}

	authLog := log.With("component", "auth")
	users, err := auth.OpenUsers(cfg.Users, authLog)
	if err != nil {
		return err
	}
	var tfa *auth.TOTP
	if cfg.TOTPSecret != "" {
		tfa = auth.NewTOTP(cfg.TOTPSecret, authLog)
	}
	sessions := &auth.Sessions{Idle: cfg.SessionIdle, Lifetime: cfg.SessionLifetime, Max: 4096}
	peer, err := httpd.PeerPolicy(cfg.UnixGroup)
	if err != nil {
		return err
	}
	hcfg := httpd.Config{
		Auth:     auth.New(users, tfa, sessions, auth.NewLimiter(), authLog),
		Log:      log.With("component", "http"),
		PeerAuth: peer,
	}
	if cfg.AccessLog {
		hcfg.AccessLog = hcfg.Log
	}
	srv := httpd.New(hcfg)

	var tlsConf *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}}
	}

	lns, err := listeners(cfg, log)
	if err != nil {
		return err
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().Network() + ":" + ln.Addr().String()
	}
	log.Info("kvmd listening", "version", version, "addrs", strings.Join(addrs, " "), "tls", tlsConf != nil)

	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("sd_notify", "err", err)
	}
	go watchdog(ctx, log)
	stopping := make(chan struct{})
	go func() {
		defer close(stopping)
		<-ctx.Done()
		daemon.SdNotify(false, daemon.SdNotifyStopping)
		log.Info("shutting down")
	}()
	err = srv.Serve(ctx, lns, tlsConf)
	if ctx.Err() != nil {
		<-stopping // systemd hears STOPPING=1 before the process is gone
	}
	return err
}

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

// setupDemo writes a throwaway users file with user admin and a generated
// password, prints the credentials, and returns the directory to remove.
func setupDemo(cfg *Config, stdout io.Writer) (string, error) {
	dir, err := os.MkdirTemp("", "kvmd-demo-")
	if err != nil {
		return "", err
	}
	passwd := rand.Text()[:16]
	hash, err := auth.NewHash(passwd)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if cfg.Users == "" {
		cfg.Users = filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(cfg.Users, []byte("admin:"+hash+"\n"), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		fmt.Fprintf(stdout, "kvmd demo mode: user admin, password %s\n", passwd)
		if addr := cfg.Listen[0]; !strings.HasPrefix(addr, "unix:") {
			scheme, k := "http", ""
			if cfg.TLSCert != "" {
				scheme, k = "https", "-k "
			}
			fmt.Fprintf(stdout, "  try: curl %s-u admin:%s %s://%s/api/auth/check\n", k, passwd, scheme, addr)
		}
	}
	return dir, nil
}
