package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"kvmd/daemon"
	"kvmd/diag"
	"kvmd/internal/atomicfile"
)

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
	cfg := daemon.DefaultConfig()
	if err := cfg.Load(path); err != nil && !(path == defaultConfigFile && errors.Is(err, iofs.ErrNotExist)) {
		return err
	}
	if root != "" {
		cfg.Root = root
	}
	if journalDir != "" {
		cfg.JournalDir = journalDir
	}
	cfg.Demo = cfg.Demo || demo
	if err := cfg.CheckAuth(); err != nil {
		return err
	}

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
	b, done, err := daemon.Bundle(cfg, daemon.Env{Version: version}, identities, progress)
	if err != nil {
		return err
	}
	defer done()
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
