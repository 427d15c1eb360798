package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"kvmd/client"
)

const usage = `Usage: kvmctl [FLAGS] COMMAND [COMMAND FLAGS]

A client of the kvmd daemon (its HTTP API), for scripts and field engineers.

Commands:
  login     log in and keep the session (the token, in a 0600 file) for the
            commands that follow, which then need no password
  check     check that the device accepts the session or credentials
  info [--fields a,b,...] [--json]
            the device's information (GET /api/info): every category, or
            those named (system, hw, meta, extras, auth, node, uptime, fan,
            health, ...); readable nested "key: value" lines, or with --json
            the raw JSON result
  log [--seek N] [-f|--follow]
            the service log of this boot, or of the last N seconds; with -f,
            then every new line as it is written, until Ctrl-C
  logout    end the stored session on the device and forget it

Flags (before or after the command):
  --url URL       the device: https://kvm.local, http://127.0.0.1:8080, or
                  unix:/run/kvmd/kvmd.sock (root, and the daemon's trusted
                  group, need no password there); a bare host means https://
  --user NAME     the user to authenticate as
  --passwd PASS   the password. Discouraged: a command line is visible to
                  every user of the machine (ps) and stays in shell history;
                  use KVMCTL_PASSWD or the config file instead
  --insecure      do not verify the device's TLS certificate (its own
                  self-signed one)
  --config FILE   the config file (default $XDG_CONFIG_HOME/kvmctl/config.yaml,
                  or ~/.config/kvmctl/config.yaml)

Settings come from the flags, else the environment (KVMCTL_URL, KVMCTL_USER,
KVMCTL_PASSWD, KVMCTL_TOTP_SECRET), else the config file, a YAML file with
the keys url, user, passwd, totp-secret and insecure. A config file that
holds passwd or totp-secret must be readable by its owner only (chmod 600):
kvmctl refuses it otherwise.

2FA: with a TOTP secret (KVMCTL_TOTP_SECRET or totp-secret, base32 as
"kvmd totp show" prints it), kvmctl appends the current code to the password
itself. When the code has a second or less left, it waits for the next one
rather than send one that may expire on the way; when the device refuses a
code, it tries once more with the next one (a clock a little behind).

Sessions: "kvmctl login" keeps the session token per device URL in
$XDG_STATE_HOME/kvmctl/sessions.json (or ~/.local/state/kvmctl/), mode 0600.
Commands use it when it is there (and is for the same user), else send the
user and password with every request. A session the device rejects (ended,
expired, daemon restarted) is forgotten, and the command goes on with the
password if there is one.

Exit status:
  0    success (also: "log" ended with Ctrl-C)
  1    any other error; the device's message is printed
  2    usage or configuration error
  3    authentication failed: wrong user, password, 2FA code or session,
       or no credentials
  4    rate limited: too many failures from this address; the wait is printed
  5    the device is unreachable (connection refused, unknown host, timeout,
       no such socket)
  130  interrupted
`

// options is what a command runs with: flags, environment and config file
// merged.
type options struct {
	cmd string

	url, user, passwd, totpSecret string
	insecure                      bool

	// info
	fields []string
	json   bool
	// log
	seek   int
	follow bool

	// sessionsPath is the file of stored sessions; empty when there is
	// no home directory to keep it in.
	sessionsPath string
}

// fileConfig is the config file.
type fileConfig struct {
	URL        string `yaml:"url"`
	User       string `yaml:"user"`
	Passwd     string `yaml:"passwd"`
	TOTPSecret string `yaml:"totp-secret"`
	Insecure   *bool  `yaml:"insecure"`
}

// globalFlags are the flags every command takes.
type globalFlags struct {
	url, user, passwd, config string
	insecure                  bool
}

// add defines the flags in fs, with the values already parsed (before
// the command) as defaults, since defining a flag sets its variable.
func (g *globalFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&g.url, "url", g.url, "")
	fs.StringVar(&g.user, "user", g.user, "")
	fs.StringVar(&g.passwd, "passwd", g.passwd, "")
	fs.StringVar(&g.config, "config", g.config, "")
	fs.BoolVar(&g.insecure, "insecure", g.insecure, "")
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs reads the command line, then fills in what it does not give
// from the environment (getenv) and the config file. It returns
// flag.ErrHelp for --help.
func parseArgs(args []string, getenv func(string) string) (options, error) {
	var o options
	var g globalFlags
	set := map[string]bool{}
	note := func(f *flag.Flag) { set[f.Name] = true }

	global := newFlagSet("kvmctl")
	g.add(global)
	if err := global.Parse(args); err != nil {
		return o, flagError(err)
	}
	global.Visit(note)
	rest := global.Args()
	if len(rest) == 0 {
		return o, usagef("no command")
	}
	o.cmd = rest[0]
	fs := newFlagSet(o.cmd)
	g.add(fs)
	var fields string
	switch o.cmd {
	case "login", "check", "logout":
	case "info":
		fs.StringVar(&fields, "fields", "", "")
		fs.BoolVar(&o.json, "json", false, "")
	case "log":
		fs.IntVar(&o.seek, "seek", 0, "")
		fs.BoolVar(&o.follow, "f", false, "")
		fs.BoolVar(&o.follow, "follow", false, "")
	case "help":
		return o, flag.ErrHelp
	default:
		return o, usagef("unknown command %q", o.cmd)
	}
	if err := fs.Parse(rest[1:]); err != nil {
		return o, flagError(err)
	}
	fs.Visit(note)
	if fs.NArg() > 0 {
		return o, usagef("%s: unexpected argument %q", o.cmd, fs.Arg(0))
	}
	if o.seek < 0 {
		return o, usagef("--seek must be 0 or more seconds")
	}
	for f := range strings.SplitSeq(fields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			o.fields = append(o.fields, f)
		}
	}

	cfgPath := g.config
	if !set["config"] {
		cfgPath = defaultConfigPath(getenv)
	}
	cfg, err := readConfig(cfgPath, set["config"])
	if err != nil {
		return o, err
	}
	pick := func(name, flagValue, env, fileValue string) string {
		if set[name] {
			return flagValue
		}
		if v := getenv(env); v != "" {
			return v
		}
		return fileValue
	}
	o.url = pick("url", g.url, "KVMCTL_URL", cfg.URL)
	o.user = pick("user", g.user, "KVMCTL_USER", cfg.User)
	o.passwd = pick("passwd", g.passwd, "KVMCTL_PASSWD", cfg.Passwd)
	o.totpSecret = pick("", "", "KVMCTL_TOTP_SECRET", cfg.TOTPSecret)
	switch {
	case set["insecure"]:
		o.insecure = g.insecure
	case cfg.Insecure != nil:
		o.insecure = *cfg.Insecure
	}

	if o.url == "" {
		return o, usagef("no device URL: give --url, KVMCTL_URL or url: in %s", cfgPath)
	}
	o.url = normURL(o.url)
	if err := client.ValidURL(o.url); err != nil {
		return o, usagef("%v", err)
	}
	o.sessionsPath = sessionsPath(getenv)
	return o, nil
}

func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usagef("%v", err)
}

// normURL makes a bare host an https URL and drops a trailing slash, so
// that one device has one key in the sessions file.
func normURL(u string) string {
	if !strings.HasPrefix(u, "unix:") && !strings.Contains(u, "://") {
		u = "https://" + u
	}
	if strings.HasPrefix(u, "unix:") {
		return u
	}
	return strings.TrimRight(u, "/")
}

// homeDir returns an XDG base directory: the variable when it holds an
// absolute path, else fallback under $HOME (%USERPROFILE% on Windows); ""
// without either.
func homeDir(getenv func(string) string, xdg, fallback string) string {
	if d := getenv(xdg); filepath.IsAbs(d) {
		return d
	}
	h := getenv("HOME")
	if h == "" {
		h = getenv("USERPROFILE")
	}
	if h == "" {
		return ""
	}
	return filepath.Join(h, fallback)
}

func defaultConfigPath(getenv func(string) string) string {
	d := homeDir(getenv, "XDG_CONFIG_HOME", ".config")
	if d == "" {
		return ""
	}
	return filepath.Join(d, "kvmctl", "config.yaml")
}

// readConfig reads the config file at path. A default path that does not
// exist is no config; one given with --config must exist. A file that
// holds a secret must be the owner's alone.
func readConfig(path string, explicit bool) (fileConfig, error) {
	var cfg fileConfig
	if path == "" {
		return cfg, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return cfg, nil
	}
	if err != nil {
		return cfg, usagef("config file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat() // of the file read, not of whatever the path names later
	if err != nil {
		return cfg, usagef("config file: %v", err)
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return cfg, usagef("config file: %v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a typo must not silently leave a setting out
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, usagef("config file %s: %v", path, err)
	}
	if (cfg.Passwd != "" || cfg.TOTPSecret != "") && othersMayAccess(fi) {
		return cfg, usagef("config file %s holds a password or 2FA secret but others may access it (mode %04o): "+
			"run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	return cfg, nil
}
