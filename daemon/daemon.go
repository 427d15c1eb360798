package daemon

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/jonboulle/clockwork"

	"kvmd/auth"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/journal"
	"kvmd/metrics"
	"kvmd/streamer"
	"kvmd/web"
)

// Env is what the daemon gets from the process besides its Config.
type Env struct {
	// Version is the daemon's version (main's, set at build time).
	Version string
	// Stdout receives the demo's generated password; Stderr the log when
	// the daemon does not run under systemd.
	Stdout, Stderr io.Writer
}

// Run runs the daemon until ctx ends: it reads the machine, builds its
// parts and runs them under one Supervisor, the HTTP server last.
func Run(ctx context.Context, cfg Config, env Env) error {
	log, flushLog := newLogger(env.Stderr)
	defer flushLog()
	m, err := openMachine(&cfg, env.Stdout, log)
	if err != nil {
		return err
	}
	defer m.close()
	sup, closeParts, err := build(cfg, env, m)
	if err != nil {
		return err
	}
	defer closeParts()
	return sup.Run(ctx)
}

// build makes the daemon's parts for cfg on the machine m, each a child of
// the Supervisor it returns, in the order they start. done closes what
// outlives the children (the credential store's watch).
func build(cfg Config, env Env, m *machine) (sup *Supervisor, done func(), err error) {
	log := m.log
	sup = &Supervisor{Log: log.With("component", "daemon")}
	au, err := newAuth(cfg, log.With("component", "auth"))
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			au.store.Close()
		}
	}()
	// The last-used times of the API tokens are written on the way out:
	// stopped last.
	sup.Add(Child{Name: "tokens", Run: Loop(au.Tokens.Run)})

	src := info.New(info.Config{
		FS: m.fs, V4L2: m.v4l2, Mailbox: m.mailbox, MetaPath: cfg.Meta, ExtrasDir: cfg.Extras,
		Version: env.Version, TwoFactor: au.TwoFactor, Log: log.With("component", "info"),
		Streamer: streamer.Prober{Launcher: m.launcher}, StreamerApp: filepath.Base(cfg.Streamer),
	})
	log.Info("board", "root", cfg.Root, "board", src.Profile().Board)
	jr := journal.New(journal.Config{Dir: cfg.JournalDir, Units: cfg.LogUnits, MaxFollowers: cfg.LogFollowers})
	names, err := metrics.ParseNames(cfg.MetricsNames)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-names: %w", err)
	}
	proxies, err := cfg.TrustedProxies()
	if err != nil {
		return nil, nil, err
	}
	peer, err := httpd.PeerPolicy(cfg.UnixGroup)
	if err != nil {
		return nil, nil, err
	}

	dev, err := addDevices(sup, cfg, env, m, src, log)
	if err != nil {
		return nil, nil, err
	}

	hcfg := httpd.Config{
		Auth:      au.Authenticator,
		Tokens:    au.Tokens,
		Users:     au.store,
		Info:      src,
		LogSource: jr,
		Log:       log.With("component", "http"),
		PeerAuth:  peer,
		UI:        web.FS(),
		Metrics: metrics.New(metrics.Config{
			Version: env.Version, Hardware: src.Hardware, AuthCounts: au.Counts,
			Sessions: au.ActiveSessions, LogFollowers: jr.Followers, Runtime: true, Names: names,
			HID: dev.keys.Counts, HIDState: dev.keys.State,
		}),
		MetricsOpen:     !cfg.MetricsAuth,
		TrustedProxies:  proxies,
		MaxConns:        cfg.MaxConnections,
		MaxConnsPerAddr: cfg.MaxConnectionsPerAddress,
		MaxWSPerUser:    cfg.MaxWebSocketsPerUser,
		LogFollowers:    cfg.LogFollowers,
		Diagnostics:     diagSource(cfg, env, src, m.v4l2, au),
		Devices:         dev.http,
	}
	if cfg.TOTPSecret != "" {
		hcfg.TwoFactor = &auth.Enroll{Path: cfg.TOTPSecret, Account: auth.TOTPAccount(), Log: au.log, TOTP: au.totp}
		hcfg.TwoFactorOn = au.TwoFactor
	}
	if !cfg.MetricsAuth {
		log.Info("metrics served without authentication (metrics-auth false)")
	}
	if cfg.AccessLog {
		hcfg.AccessLog = hcfg.Log
	}
	srv, err := httpd.New(hcfg)
	if err != nil {
		return nil, nil, err
	}
	tlsConf, err := loadTLS(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := addVNC(sup, cfg, m, srv, au.Authenticator, dev.keys, dev.streamer, tlsConf, log.With("component", "vnc")); err != nil {
		return nil, nil, err
	}
	// The ATX board is stopped right after the HTTP server: a SIGTERM in
	// the middle of a press does not leave the button held.
	if dev.atx != nil {
		sup.Add(Child{Name: "atx", Run: Loop(dev.atx.Run)}) // Run releases the buttons when its context ends
	}
	if err := addServer(sup, cfg, env, srv, tlsConf, log); err != nil {
		return nil, nil, err
	}
	return sup, func() { au.store.Close() }, nil
}

// authParts are the daemon's authentication: the credential store (the
// users, roles and tokens files), the 2FA secret's reader, and the
// Authenticator over them.
type authParts struct {
	*auth.Authenticator
	store *auth.Store
	totp  *auth.TOTP
	log   *slog.Logger
}

// newAuth opens the credentials cfg names and builds the Authenticator.
func newAuth(cfg Config, log *slog.Logger) (_ *authParts, err error) {
	store, err := auth.OpenStore(cfg.Users, auth.StoreConfig{Log: log, Clock: clockwork.NewRealClock(), Watch: true})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	users, err := auth.NewUsers(store)
	if err != nil {
		return nil, err
	}
	p := &authParts{store: store, log: log}
	if cfg.TOTPSecret != "" {
		p.totp = auth.NewTOTP(cfg.TOTPSecret, log)
	}
	sessions := &auth.Sessions{Idle: cfg.SessionIdle, Lifetime: cfg.SessionLifetime, Max: 4096, MaxPerUser: 64}
	p.Authenticator = auth.New(users, p.totp, sessions, auth.NewLimiter(), log)
	p.Tokens = auth.NewTokens(store, log)
	p.Tokens.Local = p.Local
	if p.External, err = external(cfg, users, log); err != nil {
		return nil, err
	}
	return p, nil
}

// addServer adds the HTTP server, the last child (stopped first), with
// what systemd hears of the daemon: READY=1 once every child has started,
// the watchdog's pings, STOPPING=1 when the stop begins.
func addServer(sup *Supervisor, cfg Config, env Env, srv *httpd.Server, tlsConf *tls.Config, log *slog.Logger) error {
	checkFileLimit(cfg, log)
	lns, err := listeners(cfg, log)
	if err != nil {
		return err
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().Network() + ":" + ln.Addr().String()
	}
	log.Info("kvmd listening", "version", env.Version, "addrs", strings.Join(addrs, " "), "tls", tlsConf != nil)
	sup.Started = func() {
		if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
			log.Warn("sd_notify", "err", err)
		}
	}
	sup.Stopping = func() {
		daemon.SdNotify(false, daemon.SdNotifyStopping)
		log.Info("shutting down")
	}
	sup.Add(Child{Name: "watchdog", Restart: Temporary, Run: Loop(func(ctx context.Context) { watchdog(ctx, log) })})
	sup.Add(Child{Name: "http", Restart: Critical, Run: func(ctx context.Context) error { return srv.Serve(ctx, lns, tlsConf) }})
	return nil
}

// loadTLS reads the TLS certificate and key, nil without them.
func loadTLS(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
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

// machine is what the daemon reads and drives: the machine under
// cfg.Root, or the demo's stand-ins.
type machine struct {
	fs hw.FS
	// v4l2 queries the capture device (nil: the real ioctls); mailbox
	// asks the firmware, only on the real root (a fixture root gets none,
	// the demo a fake), so that no test or demo asks the host's.
	v4l2    hw.V4L2
	mailbox hw.Mailbox
	// hidOpen opens the keyboard's and mouse's nodes in place of the
	// gadget's (the demo's stand-in host); nil: the real /dev/hidgN.
	hidOpen func(function string, writeOnly bool) (hid.File, error)
	// launcher starts the video streamer.
	launcher streamer.Launcher
	// log is the daemon's log (the demo's also writes its journal).
	log   *slog.Logger
	close func()
}

// openMachine sets up what cfg reads and drives: the demo's stand-ins
// with --demo (which also fills in cfg's files), else the machine under
// cfg.Root, whose GPIO pins periph registers when it is this machine's.
func openMachine(cfg *Config, stdout io.Writer, log *slog.Logger) (*machine, error) {
	m := &machine{log: log, close: func() {}}
	if cfg.Demo {
		var err error
		if m, err = setupDemo(cfg, stdout, log); err != nil {
			return nil, err
		}
	} else if cfg.Root == "/" {
		m.mailbox = hw.VCIO{}
		initGPIO(log)
	}
	m.fs = hw.New(cfg.Root)
	if m.launcher == nil {
		m.launcher = streamer.Exec{Path: cfg.Streamer}
	}
	return m, nil
}

// hostName is the machine's host name (a VNC viewer's desktop name), or
// "kvmd" when it has none.
func (m *machine) hostName() string {
	if h, err := m.fs.Hostname(); err == nil && h != "" {
		return h
	}
	return "kvmd"
}

// initGPIO has periph register the board's real GPIO pins, and logs what
// it found. On a fixture root they would be this machine's, not the
// tree's: only for the real root.
func initGPIO(log *slog.Logger) {
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
