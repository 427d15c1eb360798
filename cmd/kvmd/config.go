package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
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
	Demo            bool          `yaml:"demo"`
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
	}
}

// defaultMeta is where PiKVM keeps the operator's description.
const defaultMeta = "/etc/kvmd/meta.yaml"

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
	fs.BoolVar(&cfg.Demo, "demo", cfg.Demo, "demo mode: throwaway users file with a generated password, printed at start")
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
	return nil
}
