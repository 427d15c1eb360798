package daemon

import (
	"bytes"
	"errors"
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
	// MSDRemoteDeny are the networks write_remote and Redfish's
	// InsertMedia may not download from.
	MSDRemoteDeny []string `yaml:"msd-remote-deny"`
	Demo          bool     `yaml:"demo"`

	// The video streamer (package streamer): ustreamer, run on demand.
	Streamer              string        `yaml:"streamer"`
	StreamerDir           string        `yaml:"streamer-dir"`
	StreamerShutdownDelay time.Duration `yaml:"streamer-shutdown-delay"`
	StreamerForever       bool          `yaml:"streamer-forever"`
	StreamerQuality       int           `yaml:"streamer-quality"`
	StreamerDesiredFPS    int           `yaml:"streamer-desired-fps"`
	StreamerResolution    string        `yaml:"streamer-resolution"`
	StreamerArgs          []string      `yaml:"streamer-args"`

	// GPIO outputs, the ATX board's pins and Wake-on-LAN (gpio.go).
	GPIOOutputs []string `yaml:"gpio-output"`
	ATXPins     []string `yaml:"atx-pin"`
	WoLMAC      string   `yaml:"wol-mac"`
	WoLIP       string   `yaml:"wol-ip"`
	WoLPort     int      `yaml:"wol-port"`

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

// DefaultConfig is kvmd serve's configuration before its flags and file.
func DefaultConfig() Config {
	return Config{
		Listen:          []string{"127.0.0.1:8080"},
		SessionIdle:     24 * time.Hour,
		SessionLifetime: 7 * 24 * time.Hour,
		AccessLog:       true,
		Root:            "/",
		Meta:            DefaultMeta,
		Extras:          "/usr/share/kvmd/extras",
		LogUnits:        []string{"kvmd.service", "kvmd-*.service"},
		LogFollowers:    20,
		MetricsAuth:     true,
		MetricsNames:    []string{"kvmd", "pikvm"},
		MSDDir:          DefaultMSDDir,
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
		WoLIP:                    "255.255.255.255",
		WoLPort:                  9,
		MSDRemoteDeny:            defaultRemoteDeny(),
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

// DefaultMeta is where PiKVM keeps the operator's description.
const DefaultMeta = "/etc/kvmd/meta.yaml"

// DefaultMSDDir is where PiKVM keeps the virtual media's images (its own
// partition on a device).
const DefaultMSDDir = "/var/lib/kvmd/msd"

// Load reads the config file at path over c: its keys are the flags'
// names, and a key that is none is an error.
func (c *Config) Load(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// Check checks the configuration, and puts some values in canonical form.
func (c *Config) Check() error {
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
	if _, err := c.TrustedProxies(); err != nil {
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
	if err := c.checkGPIO(); err != nil {
		return err
	}
	if _, err := parseNetworks("--msd-remote-deny", c.MSDRemoteDeny); err != nil {
		return err
	}
	if err := c.checkH264(); err != nil {
		return err
	}
	return c.CheckAuth()
}

// TrustedProxies parses --trusted-proxy.
func (c *Config) TrustedProxies() ([]netip.Prefix, error) {
	return parseNetworks("--trusted-proxy", c.TrustedProxy)
}

// parseNetworks parses a flag's networks: CIDR networks, or single
// addresses (a /32 or /128).
func parseNetworks(flag string, list []string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for _, v := range list {
		v = strings.TrimSpace(v)
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%s %q: not a network (10.0.0.0/8) or an address", flag, v)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("%s %q: host bits set; the network is %s", flag, v, p.Masked())
		}
		nets = append(nets, p)
	}
	return nets, nil
}

// CheckAuth checks the external authentication settings, and puts the
// local users in canonical form.
func (c *Config) CheckAuth() error {
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
