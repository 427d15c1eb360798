// Command kvmctl is a command-line client of the kvmd daemon, for scripts
// and field engineers: log in once and keep the session, check
// credentials, read the device's information and follow its service log.
//
//	kvmctl [--url URL] [--user NAME] [--insecure] [--config FILE] COMMAND
//	  login | check | info [--fields a,b] [--json] | log [--seek N] [-f] | logout
//
// Its work is done by package kvmd/client; this command adds credentials
// from flags, the environment and a config file, the stored session, and
// exit codes for scripts. Run "kvmctl --help" for the details.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"kvmd/client"
)

// Exit codes, documented in usage.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitAuth        = 3
	exitRateLimited = 4
	exitUnreachable = 5
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// usageError is a command line or configuration the command cannot run
// with.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// report prints err for a human and returns the exit code that tells a
// script what happened.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var (
		ue *usageError
		ce *client.Error
		cv *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kvmctl: %v\nRun \"kvmctl --help\" for usage.\n", err)
		return exitUsage
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "kvmctl: %v\n", err)
		switch ce.Status {
		case 401:
			fmt.Fprintln(stderr, "kvmctl: no credentials were sent: give a user and password (--user, KVMCTL_USER, KVMCTL_PASSWD, the config file), or run \"kvmctl login\"")
			return exitAuth
		case 403:
			return exitAuth
		case 429:
			if ce.RetryAfter > 0 {
				fmt.Fprintf(stderr, "kvmctl: rate limited: retry in %d s\n", int(ce.RetryAfter.Seconds()))
			}
			return exitRateLimited
		}
		return exitError
	case errors.Is(err, client.ErrUnreachable):
		fmt.Fprintf(stderr, "kvmctl: %v\n", err)
		return exitUnreachable
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "kvmctl: interrupted")
		return exitInterrupted
	case errors.As(err, &cv):
		fmt.Fprintf(stderr, "kvmctl: %v\nkvmctl: a device's own self-signed certificate? --insecure (or insecure: true in the config file) skips the check\n", err)
		return exitError
	}
	fmt.Fprintf(stderr, "kvmctl: %v\n", err)
	return exitError
}
