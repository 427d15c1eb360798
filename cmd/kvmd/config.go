package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"kvmd/auth"
	"kvmd/h264"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/metrics"
	"kvmd/streamer"
	"kvmd/vnc"
	"kvmd/whep"
)

// Config is the configuration of kvmd serve. Every field is a flag and a
// key of the config file with the same name; flags win over the file.
type Config struct {
	Listen          []string      `yaml:"listen"`
	Users           string        `yaml:"users"`
	TOTPSecret      string        `yaml:"totp-secret"`
	TLSCert         string        `yaml:"tls-cert"`
	TLSKey          string        `yaml:"tls-key"`
	UnixGroup       string        `yaml:"unix-group"`
	SessionIdle     time.Duration `yaml:"session-idle"`
	SessionLifetime time.Duration `yaml:"session-lifetime"`
	AccessLog       bool          `yaml:"access-log"`
	Root            string        `yaml:"root"`
	Meta            string        `yaml:"meta"`
	Extras          string        `yaml:"extras"`
	JournalDir      string        `yaml:"journal-dir"`
	LogUnits        []string      `yaml:"log-units"`
	LogFollowers    int           `yaml:"log-followers"`
	MetricsAuth     bool          `yaml:"metrics-auth"`
	MetricsNames    []string      `yaml:"metrics-names"`
	MSDDir          string        `yaml:"msd-dir"`
	Demo            bool          `yaml:"demo"`

	// The video streamer (package streamer): ustreamer, run on demand.
	Streamer              string        `yaml:"streamer"`
	StreamerDir           string        `yaml:"streamer-dir"`
	StreamerShutdownDelay time.Duration `yaml:"streamer-shutdown-delay"`
	StreamerForever       bool          `yaml:"streamer-forever"`
	StreamerQuality       int           `yaml:"streamer-quality"`
	StreamerDesiredFPS    int           `yaml:"streamer-desired-fps"`
	StreamerResolution    string        `yaml:"streamer-resolution"`
	StreamerArgs          []string      `yaml:"streamer-args"`

	// The VNC server (package vnc): off while VNCListen is empty.
	VNCListen     string `yaml:"vnc-listen"`
	VNCKeymap     string `yaml:"vnc-keymap"`
	VNCMaxClients int    `yaml:"vnc-max-clients"`
	// The picture in H.264 (packages h264, whep, mediaws).
	H264Encoder              string   `yaml:"h264-encoder"`
	H264FFmpeg               string   `yaml:"h264-ffmpeg"`
	H264Bitrate              int      `yaml:"h264-bitrate"`
	H264GOP                  int      `yaml:"h264-gop"`
	WebRTCMaxPeers           int      `yaml:"webrtc-max-peers"`
	WebRTCICEServers         []string `yaml:"webrtc-ice-servers"`
	WebRTCICECredentialsFile string   `yaml:"webrtc-ice-credentials-file"`

	// Reverse proxies and connection caps.
	TrustedProxy             []string `yaml:"trusted-proxy"`
	MaxConnections           int      `yaml:"max-connections"`
	MaxConnectionsPerAddress int      `yaml:"max-connections-per-address"`
	MaxWebSocketsPerUser     int      `yaml:"max-websockets-per-user"`

	// External authentication: which backend checks the passwords of
	// every user but AuthLocalUsers, and each backend's settings.
	AuthBackend            string        `yaml:"auth-backend"`
	AuthLocalUsers         []string      `yaml:"auth-local-users"`
	AuthCacheTTL           time.Duration `yaml:"auth-cache-ttl"`
	AuthTimeout            time.Duration `yaml:"auth-timeout"`
	LDAPURL                string        `yaml:"ldap-url"`
	LDAPStartTLS           bool          `yaml:"ldap-starttls"`
	LDAPCAFile             string        `yaml:"ldap-ca-file"`
	LDAPInsecureSkipVerify bool          `yaml:"ldap-insecure-skip-verify"`
	LDAPUserTemplate       string        `yaml:"ldap-user-template"`
	LDAPBaseDN             string        `yaml:"ldap-base-dn"`
	LDAPGroup              string        `yaml:"ldap-group"`
	LDAPRoleGroups         string        `yaml:"ldap-role-groups"`
	RADIUSServer           string        `yaml:"radius-server"`
	RADIUSSecretFile       string        `yaml:"radius-secret-file"`
	RADIUSRetries          int           `yaml:"radius-retries"`
	RADIUSNASID            string        `yaml:"radius-nas-id"`
	RADIUSFilterIDRoles    bool          `yaml:"radius-filter-id-roles"`
	HTTPAuthURL            string        `yaml:"http-auth-url"`
	HTTPAuthSecretFile     string        `yaml:"http-auth-secret-file"`
	HTTPAuthCAFile         string        `yaml:"http-auth-ca-file"`
}

func defaultConfig() Config {
	return Config{
		Listen:          []string{"127.0.0.1:8080"},
		SessionIdle:     24 * time.Hour,
		SessionLifetime: 7 * 24 * time.Hour,
		AccessLog:       true,
		Root:            "/",
		Meta:            defaultMeta,
		Extras:          "/usr/share/kvmd/extras",
		LogUnits:        []string{"kvmd.service", "kvmd-*.service"},
		LogFollowers:    20,
		MetricsAuth:     true,
		MetricsNames:    []string{"kvmd", "pikvm"},
		MSDDir:          defaultMSDDir,
		MaxConnections:  httpd.DefaultMaxConns,
		// Set apart from the other defaults: gofmt aligns a block.
		MaxConnectionsPerAddress: httpd.DefaultMaxConnsPerAddr,
		MaxWebSocketsPerUser:     httpd.DefaultMaxWSPerUser,
		AuthBackend:              "file",
		AuthLocalUsers:           []string{"admin"},
		AuthCacheTTL:             auth.DefaultCacheTTL,
		AuthTimeout:              auth.DefaultTimeout,
		RADIUSRetries:            2,
		RADIUSNASID:              "kvmd",
		Streamer:                 "ustreamer",
		StreamerShutdownDelay:    streamer.DefaultShutdownDelay,
		StreamerQuality:          streamer.DefaultQuality,
		StreamerDesiredFPS:       streamer.DefaultDesiredFPS,
		VNCKeymap:                hid.DefaultKeymap,
		VNCMaxClients:            vnc.DefaultMaxClients,
		H264Encoder:              h264Auto,
		H264FFmpeg:               "ffmpeg",
		H264Bitrate:              h264.DefaultBitrate,
		H264GOP:                  h264.DefaultGOP,
		WebRTCMaxPeers:           whep.DefaultMaxPeers,
	}
}

// authBackends are the values of --auth-backend.
var authBackends = []string{"file", "ldap", "radius", "http"}

// defaultMeta is where PiKVM keeps the operator's description.
const defaultMeta = "/etc/kvmd/meta.yaml"

// defaultMSDDir is where PiKVM keeps the virtual media's images (its own
// partition on a device).
const defaultMSDDir = "/var/lib/kvmd/msd"

// listFlag is a repeatable flag. The first use in a parse replaces what the
// config file or the default said; later uses add to it.
type listFlag struct {
	list *[]string
	set  bool
}

func (f *listFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f *listFlag) Set(v string) error {
	if !f.set {
		*f.list, f.set = nil, true
	}
	*f.list = append(*f.list, v)
	return nil
}

func serveFlags(cfg *Config, configPath *string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kvmd serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(configPath, "config", "", "read settings from this YAML `file` (keys are the flag names; flags win)")
	fs.Var(&listFlag{list: &cfg.Listen}, "listen", "listen on `addr`: host:port, or unix:/path for a unix socket (repeatable)")
	fs.StringVar(&cfg.Users, "users", cfg.Users, "users `file` (htpasswd)")
	fs.StringVar(&cfg.TOTPSecret, "totp-secret", cfg.TOTPSecret, "2FA secret `file` (empty file: 2FA off)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "TLS certificate `file` (PEM) for the TCP listeners")
	fs.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "TLS private key `file` (PEM)")
	fs.StringVar(&cfg.UnixGroup, "unix-group", cfg.UnixGroup, "members of this `group` (and root) need no password over a unix socket")
	fs.DurationVar(&cfg.SessionIdle, "session-idle", cfg.SessionIdle, "end a session unused this long (0: never)")
	fs.DurationVar(&cfg.SessionLifetime, "session-lifetime", cfg.SessionLifetime, "end a session this long after login (0: never)")
	fs.BoolVar(&cfg.AccessLog, "access-log", cfg.AccessLog, "log one line per request")
	fs.StringVar(&cfg.Root, "root", cfg.Root, "filesystem `dir` the hardware is read under (/ on a device; a fixture tree in tests)")
	fs.StringVar(&cfg.Meta, "meta", cfg.Meta, "the operator's description of the device, YAML `file` (info category meta)")
	fs.StringVar(&cfg.Extras, "extras", cfg.Extras, "`dir` of add-ons, one directory with a manifest.yaml each (info category extras)")
	fs.StringVar(&cfg.JournalDir, "journal-dir", cfg.JournalDir, "read journal files from `dir` instead of the system journal (/api/log)")
	fs.Var(&listFlag{list: &cfg.LogUnits}, "log-unit", "systemd unit `pattern` whose entries /api/log shows (repeatable; default kvmd.service and kvmd-*.service)")
	fs.IntVar(&cfg.LogFollowers, "log-followers", cfg.LogFollowers, "most /api/log?follow=1 streams at once (beyond: 503)")
	fs.BoolVar(&cfg.MetricsAuth, "metrics-auth", cfg.MetricsAuth, "require authentication for /api/export/prometheus/metrics (false: open to anyone who can connect)")
	fs.Var(&listFlag{list: &cfg.MetricsNames}, "metrics-names", "metric `names` of /api/export/prometheus/metrics: kvmd (kvmd_*), pikvm (PiKVM's pikvm_*), or both (repeatable or comma-separated)")
	fs.StringVar(&cfg.MSDDir, "msd-dir", cfg.MSDDir, "image storage `dir` of the virtual media drive (/api/msd); empty turns virtual media off")
	fs.BoolVar(&cfg.Demo, "demo", cfg.Demo, "demo mode, in demo builds only (make run): throwaway users file with a generated password, printed at start, a bundled board with fake GPIO pins and capture device")
	fs.StringVar(&cfg.Streamer, "streamer", cfg.Streamer, "the video streamer `program`, ustreamer: a path, or a name looked up in PATH (absent: the streamer endpoints answer 503)")
	fs.StringVar(&cfg.StreamerDir, "streamer-dir", cfg.StreamerDir, "`dir` of the streamer's unix socket (default: systemd's RuntimeDirectory, else a new temporary one)")
	fs.DurationVar(&cfg.StreamerShutdownDelay, "streamer-shutdown-delay", cfg.StreamerShutdownDelay, "stop the streamer this long after its last client left")
	fs.BoolVar(&cfg.StreamerForever, "streamer-forever", cfg.StreamerForever, "keep the streamer running without clients")
	fs.IntVar(&cfg.StreamerQuality, "streamer-quality", cfg.StreamerQuality, "JPEG quality of the stream, 1 to 100, until set_params changes it")
	fs.IntVar(&cfg.StreamerDesiredFPS, "streamer-desired-fps", cfg.StreamerDesiredFPS, "frame rate of the stream, 0 (the source's) to 90, until set_params changes it")
	fs.StringVar(&cfg.StreamerResolution, "streamer-resolution", cfg.StreamerResolution, "capture resolution of a USB dongle, `WxH`, one of kvmd's list (default 1920x1080)")
	fs.Var(&listFlag{list: &cfg.StreamerArgs}, "streamer-arg", "an `option` added to ustreamer's command line, after the daemon's own (repeatable)")
	fs.StringVar(&cfg.VNCListen, "vnc-listen", cfg.VNCListen, "serve VNC (RFB 3.8, VeNCrypt with --tls-cert) on this TCP `address`, e.g. :5900 (empty: no VNC)")
	fs.StringVar(&cfg.VNCKeymap, "vnc-keymap", cfg.VNCKeymap, "the host's keyboard layout a VNC client's keys are typed with, one of /api/hid/keymaps")
	fs.IntVar(&cfg.VNCMaxClients, "vnc-max-clients", cfg.VNCMaxClients, "most VNC connections at once")
	fs.StringVar(&cfg.H264Encoder, "h264-encoder", cfg.H264Encoder, "H.264 `encoder`: auto (the board's V4L2 encoder where there is one and the capture is not MJPEG, else ffmpeg's libx264 if installed), software, hardware, or off (MJPEG only)")
	fs.StringVar(&cfg.H264FFmpeg, "h264-ffmpeg", cfg.H264FFmpeg, "the software encoder's `program`, ffmpeg with libx264: a path, or a name looked up in PATH")
	fs.IntVar(&cfg.H264Bitrate, "h264-bitrate", cfg.H264Bitrate, "most kbit/s of the H.264 stream, 25 to 20000, until set_params changes it (kvmd's h264_bitrate)")
	fs.IntVar(&cfg.H264GOP, "h264-gop", cfg.H264GOP, "most frames between H.264 key frames, 0 (only when a client needs one) to 60, until set_params changes it (kvmd's h264_gop)")
	fs.IntVar(&cfg.WebRTCMaxPeers, "webrtc-max-peers", cfg.WebRTCMaxPeers, "most WebRTC peers at once (beyond: 503); 0 turns WebRTC off")
	fs.Var(&listFlag{list: &cfg.WebRTCICEServers}, "webrtc-ice-server", "a STUN or TURN server's `URL` for WebRTC (stun:host:port, turn:host:port?transport=udp; repeatable; none: host candidates only)")
	fs.StringVar(&cfg.WebRTCICECredentialsFile, "webrtc-ice-credentials-file", cfg.WebRTCICECredentialsFile, "`file` holding username:credential for the turn: servers")
	fs.Var(&listFlag{list: &cfg.TrustedProxy}, "trusted-proxy", "`network` (CIDR, or one address) of a reverse proxy whose X-Real-IP, X-Forwarded-For or Forwarded is believed over TCP (repeatable; the unix socket always is)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "most connections open at once; beyond, the oldest idle or slow one is closed, or the new one if all are busy")
	fs.IntVar(&cfg.MaxConnectionsPerAddress, "max-connections-per-address", cfg.MaxConnectionsPerAddress, "most connections open at once from one client address (IPv6: one /64; trusted proxies and the unix socket exempt)")
	fs.IntVar(&cfg.MaxWebSocketsPerUser, "max-websockets-per-user", cfg.MaxWebSocketsPerUser, "most /api/ws WebSockets one user holds at once, all their sessions and tokens together (beyond: 429)")

	fs.StringVar(&cfg.AuthBackend, "auth-backend", cfg.AuthBackend, "who checks passwords: file (the users file), ldap, radius or http")
	fs.Var(&listFlag{list: &cfg.AuthLocalUsers}, "auth-local-users", "`users` checked against the users file only, never the backend (repeatable or comma-separated; empty: none)")
	fs.DurationVar(&cfg.AuthCacheTTL, "auth-cache-ttl", cfg.AuthCacheTTL, "remember a password the backend accepted this long (0: never)")
	fs.DurationVar(&cfg.AuthTimeout, "auth-timeout", cfg.AuthTimeout, "give up on the backend after this long (503)")
	fs.StringVar(&cfg.LDAPURL, "ldap-url", cfg.LDAPURL, "LDAP server: ldaps://host[:port] or ldap://host[:port]")
	fs.BoolVar(&cfg.LDAPStartTLS, "ldap-starttls", cfg.LDAPStartTLS, "upgrade an ldap:// connection with StartTLS")
	fs.StringVar(&cfg.LDAPCAFile, "ldap-ca-file", cfg.LDAPCAFile, "PEM `file` of the CA certificates of the LDAP server (empty: the system's)")
	fs.BoolVar(&cfg.LDAPInsecureSkipVerify, "ldap-insecure-skip-verify", cfg.LDAPInsecureSkipVerify, "accept any LDAP server certificate (unsafe: passwords can be intercepted)")
	fs.StringVar(&cfg.LDAPUserTemplate, "ldap-user-template", cfg.LDAPUserTemplate, "bind name, {user} for the user: uid={user},ou=people,dc=example,dc=org or {user}@corp.example.com")
	fs.StringVar(&cfg.LDAPBaseDN, "ldap-base-dn", cfg.LDAPBaseDN, "`DN` under which the user's entry is searched (for --ldap-group when the template is not a DN)")
	fs.StringVar(&cfg.LDAPGroup, "ldap-group", cfg.LDAPGroup, "`DN` of a group users must be members of (empty: none)")
	fs.StringVar(&cfg.LDAPRoleGroups, "ldap-role-groups", cfg.LDAPRoleGroups, "roles from LDAP groups: `admin=DN;operator=DN;viewer=DN`, the first the user is in gives its role; in none: refused (empty: the roles file)")
	fs.StringVar(&cfg.RADIUSServer, "radius-server", cfg.RADIUSServer, "RADIUS server, `host:port` (port 1812 if none)")
	fs.StringVar(&cfg.RADIUSSecretFile, "radius-secret-file", cfg.RADIUSSecretFile, "`file` holding the RADIUS shared secret")
	fs.IntVar(&cfg.RADIUSRetries, "radius-retries", cfg.RADIUSRetries, "send a RADIUS request this many more times when no answer comes (within --auth-timeout)")
	fs.StringVar(&cfg.RADIUSNASID, "radius-nas-id", cfg.RADIUSNASID, "NAS-Identifier sent to the RADIUS server")
	fs.BoolVar(&cfg.RADIUSFilterIDRoles, "radius-filter-id-roles", cfg.RADIUSFilterIDRoles, "take the role from the Access-Accept's Filter-Id (kvmd-admin, kvmd-operator, kvmd-viewer); without one: refused")
	fs.StringVar(&cfg.HTTPAuthURL, "http-auth-url", cfg.HTTPAuthURL, "`URL` the credentials are POSTed to as JSON (https, or http to a loopback address)")
	fs.StringVar(&cfg.HTTPAuthSecretFile, "http-auth-secret-file", cfg.HTTPAuthSecretFile, "`file` holding the secret sent as Authorization: Bearer")
	fs.StringVar(&cfg.HTTPAuthCAFile, "http-auth-ca-file", cfg.HTTPAuthCAFile, "PEM `file` of the CA certificates of the HTTP service (empty: the system's)")
	return fs
}

// parseServe reads the flags, then the config file they name, then the
// flags again on top of it.
func parseServe(args []string, stderr io.Writer) (Config, error) {
	cfg := defaultConfig()
	var path string
	fs := serveFlags(&cfg, &path, stderr)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if path != "" {
		cfg = defaultConfig()
		if err := loadConfig(path, &cfg); err != nil {
			return cfg, err
		}
		if err := serveFlags(&cfg, &path, io.Discard).Parse(args); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.check()
}

func loadConfig(path string, cfg *Config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

func (c *Config) check() error {
	if c.Users == "" && !c.Demo {
		return errors.New("no users file: pass --users FILE (create it with: kvmd user add admin --users FILE), or --demo")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if c.SessionIdle < 0 || c.SessionLifetime < 0 {
		return errors.New("session durations cannot be negative")
	}
	if c.LogFollowers < 1 {
		return errors.New("--log-followers must be at least 1")
	}
	if _, err := c.trustedProxies(); err != nil {
		return err
	}
	if _, err := metrics.ParseNames(c.MetricsNames); err != nil {
		return fmt.Errorf("--metrics-names: %w", err)
	}
	if c.MaxConnections < 1 {
		return errors.New("--max-connections must be at least 1")
	}
	if c.MaxConnectionsPerAddress < 1 || c.MaxConnectionsPerAddress > c.MaxConnections {
		return errors.New("--max-connections-per-address must be from 1 to --max-connections")
	}
	if c.MaxWebSocketsPerUser < 1 {
		return errors.New("--max-websockets-per-user must be at least 1")
	}
	if err := c.checkStreamer(); err != nil {
		return err
	}
	if err := c.checkVNC(); err != nil {
		return err
	}
	if err := c.checkH264(); err != nil {
		return err
	}
	return c.checkAuth()
}

// trustedProxies parses --trusted-proxy: CIDR networks, or single
// addresses (a /32 or /128).
func (c *Config) trustedProxies() ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, v := range c.TrustedProxy {
		v = strings.TrimSpace(v)
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("--trusted-proxy %q: not a network (10.0.0.0/8) or an address", v)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("--trusted-proxy %q: host bits set; the network is %s", v, p.Masked())
		}
		nets = append(nets, p)
	}
	return nets, nil
}

// checkAuth checks the external authentication settings, and puts the
// local users in canonical form.
func (c *Config) checkAuth() error {
	if !slices.Contains(authBackends, c.AuthBackend) {
		return fmt.Errorf("--auth-backend %q: want one of %s", c.AuthBackend, strings.Join(authBackends, ", "))
	}
	var local []string
	for _, item := range c.AuthLocalUsers {
		for u := range strings.SplitSeq(item, ",") {
			if u = strings.TrimSpace(u); u == "" {
				continue
			}
			if err := auth.ValidUser(u); err != nil {
				return fmt.Errorf("--auth-local-users %q: %w", u, err)
			}
			if !slices.Contains(local, u) {
				local = append(local, u)
			}
		}
	}
	c.AuthLocalUsers = local
	if c.AuthCacheTTL < 0 {
		return errors.New("--auth-cache-ttl cannot be negative")
	}
	if c.AuthTimeout <= 0 {
		return errors.New("--auth-timeout must be positive")
	}
	if c.RADIUSRetries < 0 {
		return errors.New("--radius-retries cannot be negative")
	}

	// Each backend's required settings, and no setting of another backend:
	// an --ldap-url without --auth-backend ldap is a mistake to report,
	// not a setting to ignore.
	type setting struct {
		flag     string
		set      bool
		required bool
	}
	settings := map[string][]setting{
		"ldap": {
			{"ldap-url", c.LDAPURL != "", true},
			{"ldap-user-template", c.LDAPUserTemplate != "", true},
			{"ldap-starttls", c.LDAPStartTLS, false},
			{"ldap-ca-file", c.LDAPCAFile != "", false},
			{"ldap-insecure-skip-verify", c.LDAPInsecureSkipVerify, false},
			{"ldap-base-dn", c.LDAPBaseDN != "", false},
			{"ldap-group", c.LDAPGroup != "", false},
			{"ldap-role-groups", c.LDAPRoleGroups != "", false},
		},
		"radius": {
			{"radius-server", c.RADIUSServer != "", true},
			{"radius-secret-file", c.RADIUSSecretFile != "", true},
			{"radius-filter-id-roles", c.RADIUSFilterIDRoles, false},
		},
		"http": {
			{"http-auth-url", c.HTTPAuthURL != "", true},
			{"http-auth-secret-file", c.HTTPAuthSecretFile != "", true},
			{"http-auth-ca-file", c.HTTPAuthCAFile != "", false},
		},
	}
	for _, b := range authBackends[1:] {
		for _, s := range settings[b] {
			switch {
			case b == c.AuthBackend && s.required && !s.set:
				return fmt.Errorf("--auth-backend %s needs --%s", b, s.flag)
			case b != c.AuthBackend && s.set:
				return fmt.Errorf("--%s is set, but --auth-backend is %s, not %s", s.flag, c.AuthBackend, b)
			}
		}
	}
	if c.AuthBackend == "ldap" {
		if !strings.Contains(c.LDAPUserTemplate, "{user}") {
			return fmt.Errorf("--ldap-user-template %q has no {user}", c.LDAPUserTemplate)
		}
		if c.LDAPStartTLS && strings.HasPrefix(strings.ToLower(c.LDAPURL), "ldaps:") {
			return errors.New("--ldap-starttls goes with an ldap:// URL; an ldaps:// one is TLS from the start")
		}
	}
	return nil
}
