package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/term"

	"kvmd/diag"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/internal/atomicfile"
)

// newBundle is a support bundle of the device cfg describes: the same
// root, journal and files as serve, the secrets of its users, 2FA, TLS
// and backend files removed. counts is the daemon's authenticator, nil
// outside the daemon.
func newBundle(cfg Config, src diag.InfoSource, v4l2 hw.V4L2, counts diag.AuthCounts, identities bool, progress func(diag.Result)) (*diag.Bundle, error) {
	fs := hw.New(cfg.Root)
	host, _ := fs.Hostname()
	r, err := diag.NewRedactor(diag.Secrets{
		Users: cfg.Users,
		Files: []string{cfg.TOTPSecret, cfg.TLSKey, cfg.RADIUSSecretFile, cfg.HTTPAuthSecretFile, cfg.WebRTCICECredentialsFile},
		Names: cfg.AuthLocalUsers,
	}, identities, host)
	if err != nil {
		return nil, err
	}
	settings, err := yaml.Marshal(cfg)
	if err != nil {
		settings = fmt.Appendf(nil, "# cannot encode the configuration: %v\n", err)
	}
	return diag.New(diag.Config{
		FS: fs, Info: src, V4L2: v4l2, Version: version, Settings: settings, Redactor: r, Progress: progress, Auth: counts,
		Journal: diag.Journal{Dir: cfg.JournalDir, Units: cfg.LogUnits},
	}), nil
}

// diagSource serves GET /api/diagnostics from the daemon's own readers,
// with its authenticator's count of failed logins.
func diagSource(cfg Config, src *info.Source, v4l2 hw.V4L2, counts diag.AuthCounts) httpd.DiagSource {
	return func(identities bool) (httpd.DiagBundle, error) {
		b, err := newBundle(cfg, src, v4l2, counts, identities, nil)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// defaultConfigFile is the config file kvmd.service runs serve with.
const defaultConfigFile = "/etc/kvmd/kvmd.yaml"

// diagCmd is kvmd diag: the support bundle made by the command, so that
// it works when the daemon does not. It reads serve's config file, to see
// the same device; a few options override it.
func diagCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var path, out, root, journalDir string
	var identities, demo bool
	fs := flag.NewFlagSet("kvmd diag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&path, "config", defaultConfigFile, "serve's config `file`; a missing default file means serve's defaults")
	fs.StringVar(&out, "o", "", "write the bundle to `file` (- for stdout; default kvmd-diag-HOST-TIME.zip in this directory)")
	fs.BoolVar(&identities, "redact-identities", false, "also replace user names, addresses and the host name by placeholders")
	fs.StringVar(&root, "root", "", "read the hardware under `dir` instead of the config's root")
	fs.StringVar(&journalDir, "journal-dir", "", "read journal files from `dir` instead of the config's journal")
	fs.BoolVar(&demo, "demo", false, "the bundle of the demo board, in demo builds only")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("diag takes no arguments, got %q", fs.Args())
	}
	cfg := defaultConfig()
	if err := loadConfig(path, &cfg); err != nil && !(path == defaultConfigFile && errors.Is(err, iofs.ErrNotExist)) {
		return err
	}
	if root != "" {
		cfg.Root = root
	}
	if journalDir != "" {
		cfg.JournalDir = journalDir
	}
	cfg.Demo = cfg.Demo || demo
	if err := cfg.checkAuth(); err != nil {
		return err
	}

	log := slog.New(slog.DiscardHandler)
	var v4l2 hw.V4L2
	var mailbox hw.Mailbox
	if cfg.Demo {
		// The demo's password line is no part of the bundle's output.
		d, err := setupDemo(&cfg, io.Discard, log)
		if err != nil {
			return err
		}
		defer d.stop()
		v4l2, mailbox = d.v4l2, d.mailbox
	} else if cfg.Root == "/" {
		mailbox = hw.VCIO{}
		hw.InitGPIO() // as serve: the board's pins; none is no failure here
	}
	src := info.New(info.Config{
		FS: hw.New(cfg.Root), V4L2: v4l2, Mailbox: mailbox, MetaPath: cfg.Meta, ExtrasDir: cfg.Extras, Version: version,
	})

	var progress func(diag.Result)
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		progress = func(r diag.Result) {
			status := "ok"
			switch {
			case r.Skipped != "":
				status = "skipped"
			case r.Err != nil:
				status = "FAILED: " + r.Err.Error()
			}
			fmt.Fprintf(stderr, "kvmd diag: %-28s %7s  %s\n", r.Name, r.Took.Round(time.Millisecond), status)
		}
	}
	b, err := newBundle(cfg, src, v4l2, nil, identities, progress)
	if err != nil {
		return err
	}
	if out == "" {
		out = b.FileName()
	}
	var buf bytes.Buffer
	if err := b.Write(ctx, &buf); err != nil {
		return err
	}
	if out == "-" {
		_, err := stdout.Write(buf.Bytes())
		return err
	}
	// A bundle is written whole or not at all: a ticket never gets half.
	if err := atomicfile.Write(out, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	findings := b.Findings()
	fmt.Fprintf(stderr, "kvmd diag: wrote %s (%d KiB)", out, (buf.Len()+1023)/1024)
	if len(findings) > 0 {
		fmt.Fprintf(stderr, "; findings:\n  - %s", strings.Join(findings, "\n  - "))
	}
	fmt.Fprintln(stderr)
	return nil
}
