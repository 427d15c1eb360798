// Command kvmd is the KVM-over-IP daemon: an HTTP API compatible with
// PiKVM's kvmd, and the tools that manage its users and 2FA secret.
//
//	kvmd serve [flags]                    run the daemon
//	kvmd user list|add|set|del NAME ...   manage the users file
//	kvmd token add|list|del ...           manage API tokens
//	kvmd totp init|show|del ...           manage the 2FA secret
//	kvmd firstboot [--etc DIR] ...        provision a new device
//	kvmd diag [-o FILE] [--config FILE]   write a support bundle
//	kvmd otg start|stop|status ...        the USB gadget (keyboard, mouse, drive)
//	kvmd version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"kvmd/daemon"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage:
  kvmd serve [--config FILE] [--listen ADDR ...] [--users FILE] [--totp-secret FILE]
             [--tls-cert FILE --tls-key FILE] [--unix-group GROUP] [--demo] ...
  kvmd user list|add|set|del [NAME] --users FILE [--role ROLE]
  kvmd token add|list|del [NAME] --users FILE [--user USER] [--role ROLE] [--expires DURATION]
  kvmd totp init|show|del --secret FILE [-f]
  kvmd firstboot [--etc DIR] [--state DIR] [--issue FILE] [--hostname NAME] [--group GROUP]
  kvmd diag [-o FILE] [--redact-identities] [--config FILE] [--root DIR] [--journal-dir DIR] [--demo]
  kvmd otg start|stop|status [--config FILE] [--udc NAME] ...
  kvmd version
Run "kvmd serve -h" for every serve flag.
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "kvmd:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "serve":
		cfg, err := parseServe(args[1:], stderr)
		if err != nil {
			return err
		}
		// Only serve shuts down on a signal; the other commands keep the
		// default, so Ctrl-C at a password prompt ends them at once.
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return daemon.Run(ctx, cfg, daemon.Env{Version: version, Stdout: stdout, Stderr: stderr})
	case "user":
		return userCmd(args[1:], stdin, stdout, stderr)
	case "token":
		return tokenCmd(args[1:], stdout, stderr)
	case "totp":
		return totpCmd(args[1:], stdin, stdout, stderr)
	case "firstboot":
		return firstbootCmd(args[1:], stdout, stderr)
	case "diag":
		return diagCmd(ctx, args[1:], stdout, stderr)
	case "otg":
		return otgCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "kvmd", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "kvmd: unknown command %q\n", args[0])
	return errUsage
}
