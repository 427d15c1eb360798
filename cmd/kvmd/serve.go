package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/jonboulle/clockwork"

	"kvmd/auth"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/journal"
	"kvmd/metrics"
	"kvmd/streamer"
	"kvmd/web"
)

// serve runs the daemon until ctx ends.
func serve(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	log, flushLog := newLogger(stderr)
	defer flushLog()
	var v4l2 hw.V4L2
	// The firmware's mailbox is this machine's: only on the real root.
	// A fixture root gets none (the demo a fake), so that no test or
	// demo ever asks the host's firmware.
	var mailbox hw.Mailbox
	var launcher streamer.Launcher
	var hidOpen hidOpener
	if cfg.Demo {
		d, err := setupDemo(&cfg, stdout, log)
		if err != nil {
			return err
		}
		defer d.stop()
		v4l2, mailbox, hidOpen, log, launcher = d.v4l2, d.mailbox, d.hidOpen, d.log, d.streamer
	} else if cfg.Root == "/" {
		mailbox = hw.VCIO{}
		// periph's drivers register the board's real GPIO pins. On a
		// fixture root they would be this machine's, not the tree's.
		ok, err := hw.InitGPIO()
		if err != nil {
			log.Warn("GPIO unavailable", "err", err)
		}
		chips, cerr := hw.GPIOChips()
		if cerr != nil {
			// Not in the group owning /dev/gpiochip* (gpio on Raspberry
			// Pi OS and the image; the package's udev rule elsewhere).
			log.Warn("GPIO chip cannot be opened", "err", cerr)
		}
		for _, c := range chips {
			log.Info("GPIO chip", "chip", c.Name, "label", c.Label, "lines", c.Lines, "named", c.Named)
		}
		if !ok && err == nil && cerr == nil && len(chips) == 0 {
			log.Info("no GPIO on this machine")
		}
	}

	authLog := log.With("component", "auth")
	clock := clockwork.NewRealClock()
	store, err := auth.OpenStore(cfg.Users, auth.StoreConfig{Log: authLog, Clock: clock, Watch: true})
	if err != nil {
		return err
	}
	defer store.Close()
	users, err := auth.NewUsers(store)
	if err != nil {
		return err
	}
	var tfa *auth.TOTP
	if cfg.TOTPSecret != "" {
		tfa = auth.NewTOTP(cfg.TOTPSecret, authLog)
	}
	sessions := &auth.Sessions{Idle: cfg.SessionIdle, Lifetime: cfg.SessionLifetime, Max: 4096, MaxPerUser: 64}
	peer, err := httpd.PeerPolicy(cfg.UnixGroup)
	if err != nil {
		return err
	}
	a := auth.New(users, tfa, sessions, auth.NewLimiter(), authLog)
	a.Tokens = auth.NewTokens(store, authLog)
	a.Tokens.Local = a.Local
	tokensCtx, stopTokens := context.WithCancel(context.Background())
	tokensDone := make(chan struct{})
	go func() { defer close(tokensDone); a.Tokens.Run(tokensCtx) }()
	defer func() { stopTokens(); <-tokensDone }() // the last-used times are written on the way out
	if a.External, err = external(cfg, users, authLog); err != nil {
		return err
	}
	if launcher == nil {
		launcher = streamer.Exec{Path: cfg.Streamer}
	}
	src := info.New(info.Config{
		FS: hw.New(cfg.Root), V4L2: v4l2, Mailbox: mailbox, MetaPath: cfg.Meta, ExtrasDir: cfg.Extras,
		Version: version, TwoFactor: a.TwoFactor, Log: log.With("component", "info"),
		Streamer: streamerProgram(ctx, cfg.Streamer, launcher),
	})
	log.Info("board", "root", cfg.Root, "board", src.Profile().Board)
	proxies, err := cfg.trustedProxies()
	if err != nil {
		return err
	}
	jr := journal.New(journal.Config{Dir: cfg.JournalDir, Units: cfg.LogUnits, MaxFollowers: cfg.LogFollowers})
	names, err := metrics.ParseNames(cfg.MetricsNames)
	if err != nil {
		return fmt.Errorf("--metrics-names: %w", err)
	}
	// The keyboard and mouse; released and closed before serve returns.
	hidCtx, stopHID := context.WithCancel(context.Background())
	devWake := make(chan struct{}, 1)
	keys := newHID(hw.New(cfg.Root), hidOpen, log.With("component", "hid"), devWake)
	hidDone := make(chan struct{})
	go func() { defer close(hidDone); keys.Run(hidCtx) }()
	defer func() { stopHID(); <-hidDone }()
	hcfg := httpd.Config{
		Auth:      a,
		Tokens:    a.Tokens,
		Users:     store,
		Info:      src,
		LogSource: jr,
		Log:       log.With("component", "http"),
		PeerAuth:  peer,
		UI:        web.FS(),
		Metrics: metrics.New(metrics.Config{
			Version: version, Hardware: src.Hardware, AuthCounts: a.Counts,
			Sessions: a.ActiveSessions, LogFollowers: jr.Followers, Runtime: true, Names: names,
			HID: keys.Counts, HIDState: keys.State,
		}),
		MetricsOpen:     !cfg.MetricsAuth,
		TrustedProxies:  proxies,
		MaxConns:        cfg.MaxConnections,
		MaxConnsPerAddr: cfg.MaxConnectionsPerAddress,
		MaxWSPerUser:    cfg.MaxWebSocketsPerUser,
		LogFollowers:    cfg.LogFollowers,
		Diagnostics:     diagSource(cfg, src, v4l2, a),
	}
	media, err := newMSD(cfg, log)
	if err != nil {
		return err
	}
	var stopDevices func()
	if hcfg.Devices, stopDevices, err = startDevices(ctx, src, nil, keys, devWake, media, log); err != nil {
		return err
	}
	defer stopDevices()
	stopStreamer, err := startStreamer(ctx, cfg, src, launcher, hcfg.Devices, log)
	if err != nil {
		return err
	}
	defer stopStreamer()
	if cfg.Demo && hcfg.Devices.H264 == nil && cfg.H264Encoder == h264Auto {
		fmt.Fprintln(stdout, "  no H.264 (WebRTC, Direct H.264): ffmpeg is not installed (make deps-demo installs it); the console shows MJPEG")
	}
	if cfg.TOTPSecret != "" {
		hcfg.TwoFactor = &auth.Enroll{Path: cfg.TOTPSecret, Account: hostLabel(), Log: authLog, TOTP: tfa}
		hcfg.TwoFactorOn = a.TwoFactor
	}
	if !cfg.MetricsAuth {
		log.Info("metrics served without authentication (metrics-auth false)")
	}
	if cfg.AccessLog {
		hcfg.AccessLog = hcfg.Log
	}
	srv, err := httpd.New(hcfg)
	if err != nil {
		return err
	}

	var tlsConf *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}}
	}

	stopVNC, err := startVNC(ctx, cfg, srv, a, keys, hcfg.Devices.Streamer, tlsConf, log.With("component", "vnc"))
	if err != nil {
		return err
	}
	defer stopVNC()

	checkFileLimit(cfg, log)
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

// demoParts are what --demo puts in place of the machine's own.
type demoParts struct {
	v4l2     hw.V4L2
	mailbox  hw.Mailbox
	hidOpen  hidOpener
	log      *slog.Logger
	streamer streamer.Launcher
	stop     func()
}

// external returns what checks the passwords of the users that are not
// local, or nil when the users file checks everyone's.
func external(cfg Config, users *auth.Users, log *slog.Logger) (*auth.External, error) {
	b, err := newBackend(cfg)
	if err != nil || b == nil {
		return nil, err
	}
	ext, err := auth.NewExternal(auth.ExternalConfig{
		Backend: b, Local: cfg.AuthLocalUsers, CacheTTL: cfg.AuthCacheTTL, Timeout: cfg.AuthTimeout,
	})
	if err != nil {
		return nil, err
	}
	log.Info("external authentication", "backend", b.Name(), "local_users", strings.Join(cfg.AuthLocalUsers, ","),
		"cache_ttl", cfg.AuthCacheTTL.String(), "timeout", cfg.AuthTimeout.String())
	var ignored []string
	for _, u := range users.Names() {
		if !ext.Local(u) {
			ignored = append(ignored, u)
		}
	}
	if len(ignored) > 0 {
		slices.Sort(ignored)
		log.Warn("users in the users file but not in auth-local-users: their file passwords are not accepted, only the backend's",
			"users", strings.Join(ignored, ","), "backend", b.Name())
	}
	return ext, nil
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

// hostLabel is the label authenticator apps show for this device's 2FA:
// the host name, so that several KVMs can be told apart.
func hostLabel() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "kvmd"
}
