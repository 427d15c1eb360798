package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"kvmd/client"
)

// app is one run of a command.
type app struct {
	o      options
	c      *client.Client
	store  sessions
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if err != nil {
		return err
	}
	a := &app{
		o: o,
		c: &client.Client{
			BaseURL:    o.url,
			TOTPSecret: o.totpSecret,
			HTTPClient: client.NewHTTPClient(o.url, o.insecure),
		},
		store: sessions{path: o.sessionsPath},
		stdin: stdin, stdout: stdout, stderr: stderr,
	}
	// Without a password the user name is not sent either: the request
	// goes without credentials (the unix socket's peer check), rather
	// than with a password the daemon is sure to refuse.
	if o.passwd != "" {
		a.c.User, a.c.Password = o.user, o.passwd
	}
	switch o.cmd {
	case "login":
		return a.login(ctx)
	case "logout":
		return a.logout(ctx)
	}
	if err := a.useStoredSession(); err != nil {
		return err
	}
	switch o.cmd {
	case "check":
		return a.check(ctx)
	case "info":
		return a.info(ctx)
	case "log":
		return a.log(ctx)
	}
	return usagef("unknown command %q", o.cmd)
}

// useStoredSession makes the client use the session stored for the URL,
// unless it belongs to another user than the one asked for.
func (a *app) useStoredSession() error {
	sess, ok, err := a.store.get(a.o.url)
	if err != nil {
		return err
	}
	if ok && (a.o.user == "" || a.o.user == sess.User) {
		a.c.Token = sess.Token
	}
	return nil
}

// rejected tells an answer that refuses the credentials sent.
func rejected(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Status == 401 || e.Status == 403)
}

// authed runs f, which makes requests with a.c. When the stored session
// is rejected, the session is forgotten, and f runs once more with the
// password if there is one.
func (a *app) authed(f func() error) error {
	err := f()
	if a.c.Token == "" || !rejected(err) {
		return err
	}
	a.c.Token = ""
	if rerr := a.store.update(a.o.url, nil); rerr != nil {
		fmt.Fprintf(a.stderr, "kvmctl: %v\n", rerr)
	}
	if a.c.User == "" {
		return fmt.Errorf("the stored session was rejected (it ended or expired) and is forgotten; "+
			"run \"kvmctl login\" again: %w", err)
	}
	fmt.Fprintln(a.stderr, "kvmctl: the stored session was rejected (it ended or expired) and is forgotten; using the password instead")
	return f()
}

func (a *app) login(ctx context.Context) error {
	if a.o.user == "" {
		return usagef("login needs a user: --user, KVMCTL_USER or user: in the config file")
	}
	if a.store.path == "" {
		return usagef("no place to keep the session: neither XDG_STATE_HOME nor HOME is set")
	}
	if a.o.passwd == "" {
		passwd, err := a.prompt()
		if err != nil {
			return err
		}
		a.c.User, a.c.Password = a.o.user, passwd
	}
	token, err := a.c.Login(ctx)
	if err != nil {
		return err
	}
	if err := a.store.update(a.o.url, &session{User: a.o.user, Token: token, Created: time.Now().UTC()}); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Logged in to %s as %s; the session is kept in %s\n", a.o.url, a.o.user, a.store.path)
	return nil
}

// prompt asks for the password on the terminal.
func (a *app) prompt() (string, error) {
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usagef("no password: set KVMCTL_PASSWD or passwd: in the config file")
	}
	what := "Password"
	if a.o.totpSecret == "" {
		what += " (followed by the 2FA code if 2FA is on)"
	}
	fmt.Fprintf(a.stderr, "%s for %s at %s: ", what, a.o.user, a.o.url)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(a.stderr)
	if err != nil {
		return "", fmt.Errorf("reading the password: %w", err)
	}
	if len(b) == 0 {
		return "", usagef("no password given")
	}
	return string(b), nil
}

func (a *app) logout(ctx context.Context) error {
	sess, ok, err := a.store.get(a.o.url)
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(a.stderr, "kvmctl: no stored session for %s\n", a.o.url)
		return nil
	}
	a.c.Token = sess.Token
	err = a.c.Logout(ctx)
	switch {
	case rejected(err):
		fmt.Fprintf(a.stdout, "The session at %s had already ended; forgotten\n", a.o.url)
	case err != nil:
		return err // kept: it can be ended later
	default:
		fmt.Fprintf(a.stdout, "Logged out of %s\n", a.o.url)
	}
	return a.store.update(a.o.url, nil)
}

func (a *app) check(ctx context.Context) error {
	if err := a.authed(func() error { return a.c.Check(ctx) }); err != nil {
		return err
	}
	how := "no credentials needed"
	switch {
	case a.c.Token != "":
		how = "stored session"
	case a.c.User != "":
		how = "password of " + a.c.User
	}
	fmt.Fprintf(a.stdout, "OK: %s accepts the %s\n", a.o.url, how)
	return nil
}

func (a *app) info(ctx context.Context) error {
	var raw []byte
	err := a.authed(func() (err error) {
		raw, err = a.c.Info(ctx, a.o.fields...)
		return err
	})
	if err != nil {
		return err
	}
	if a.o.json {
		_, err = fmt.Fprintf(a.stdout, "%s\n", raw)
		return err
	}
	return writePretty(a.stdout, raw)
}

// log streams the log to stdout. Ctrl-C (ctx done) ends it without error.
func (a *app) log(ctx context.Context) error {
	var body io.ReadCloser
	err := a.authed(func() (err error) {
		body, err = a.c.Log(ctx, a.o.seek, a.o.follow)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer body.Close()
	w := &lfWriter{w: a.stdout}
	_, err = io.Copy(w, body)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the log: %w", err)
	}
	return w.Close()
}

// lfWriter turns the log's "\r\n" line ends into "\n", as other tools'
// output on a terminal or in a pipe to grep.
type lfWriter struct {
	w  io.Writer
	cr bool // the last byte written was a '\r', held back
}

func (l *lfWriter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p)+1)
	for _, b := range p {
		if l.cr && b != '\n' {
			out = append(out, '\r')
		}
		l.cr = b == '\r'
		if !l.cr {
			out = append(out, b)
		}
	}
	if _, err := l.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes a '\r' still held back.
func (l *lfWriter) Close() error {
	if !l.cr {
		return nil
	}
	l.cr = false
	_, err := l.w.Write([]byte{'\r'})
	return err
}
