// Command kvmd is the KVM-over-IP daemon: an HTTP API compatible with
// PiKVM's kvmd, and the tools that manage its users and 2FA secret.
//
//	kvmd serve [flags]                    run the daemon
//	kvmd user list|add|set|del NAME ...   manage the users file
//	kvmd totp init|show|del ...           manage the 2FA secret
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
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage:
  kvmd serve [--config FILE] [--listen ADDR ...] [--users FILE] [--totp-secret FILE]
             [--tls-cert FILE --tls-key FILE] [--unix-group GROUP] [--demo] ...
  kvmd user list|add|set|del [NAME] --users FILE
  kvmd totp init|show|del --secret FILE [-f]
  kvmd version
Run "kvmd serve -h" for every serve flag.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
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
		return serve(ctx, cfg, stdout, stderr)
	case "user":
		return userCmd(args[1:], stdin, stdout, stderr)
	case "totp":
		return totpCmd(args[1:], stdin, stdout, stderr)
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
