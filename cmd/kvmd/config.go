package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"kvmd/daemon"
)

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

func serveFlags(cfg *daemon.Config, configPath *string, out io.Writer) *flag.FlagSet {
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
	fs.Var(&listFlag{list: &cfg.MSDRemoteDeny}, "msd-remote-deny", "`network` (CIDR, or one address) write_remote and Redfish's InsertMedia may not download from (repeatable; default loopback, link-local, multicast, broadcast)")
	fs.Var(&listFlag{list: &cfg.GPIOOutputs}, "gpio-output", "a GPIO output `channel`: NAME=PIN[,switch=BOOL][,pulse=SECONDS][,pulse-min=SECONDS][,pulse-max=SECONDS][,busy-delay=SECONDS][,inverted][,initial=BOOL] (repeatable)")
	fs.Var(&listFlag{list: &cfg.ATXPins}, "atx-pin", "an ATX board `line`: power_led|hdd_led|power_switch|reset_switch=PIN[,inverted] (repeatable; all four, in place of the board's)")
	fs.StringVar(&cfg.WoLMAC, "wol-mac", cfg.WoLMAC, "the MAC `address` kvmd's __wol__ GPIO channel wakes (empty: no such channel)")
	fs.StringVar(&cfg.WoLIP, "wol-ip", cfg.WoLIP, "the IPv4 `address` the Wake-on-LAN packet is sent to")
	fs.IntVar(&cfg.WoLPort, "wol-port", cfg.WoLPort, "the UDP `port` the Wake-on-LAN packet is sent to")
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
func parseServe(args []string, stderr io.Writer) (daemon.Config, error) {
	cfg := daemon.DefaultConfig()
	var path string
	fs := serveFlags(&cfg, &path, stderr)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	if path != "" {
		cfg = daemon.DefaultConfig()
		if err := cfg.Load(path); err != nil {
			return cfg, err
		}
		if err := serveFlags(&cfg, &path, io.Discard).Parse(args); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Check()
}
