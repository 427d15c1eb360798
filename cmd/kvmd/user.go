package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"kvmd/auth"
)

const userUsage = "usage: kvmd user list --users FILE\n" +
	"       kvmd user add|set NAME --users FILE [--role admin|operator|viewer]\n" +
	"       kvmd user set NAME --revoke-tokens --users FILE [--role admin|operator|viewer]\n" +
	"       kvmd user del NAME --users FILE"

// userCmd runs "kvmd user list|add|set|del NAME --users FILE". add refuses
// an existing user, set creates or updates one (as PiKVM's kvmd-htpasswd
// set does), del removes one with its role and API tokens. Every edit goes
// through the daemon's own credential store (auth.Store): one change of
// the files under their lock, no crash point halfway, every other line,
// comments and malformed lines included, left as it was.
func userCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	action, fset, err := subcommand("user", args, []string{"list", "add", "set", "del"}, userUsage, stderr)
	if err != nil {
		return err
	}
	path := fset.String("users", "", "the users `FILE` (htpasswd format)")
	roleName := fset.String("role", "", "the user's `ROLE`: admin, operator or viewer (add, set; kept in FILE.roles)")
	revoke := fset.Bool("revoke-tokens", false, "also revoke every API token of the user (set: with a new password, always asked)")
	names, err := parseInterleaved(fset, args[1:])
	if err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("user %s: --users FILE is required\n%s", action, userUsage)
	}

	if action == "list" {
		if len(names) != 0 {
			return fmt.Errorf("user list: unexpected argument %q\n%s", names[0], userUsage)
		}
		return listUsers(*path, stdout, stderr)
	}
	if len(names) != 1 {
		return fmt.Errorf("user %s: want exactly one user NAME, got %d\n%s", action, len(names), userUsage)
	}
	name := names[0]
	if err := auth.ValidUser(name); err != nil {
		return fmt.Errorf("user %s: %w", action, err)
	}

	var role auth.Role
	if *roleName != "" {
		if action != "add" && action != "set" {
			return fmt.Errorf("user %s: --role is for add and set\n%s", action, userUsage)
		}
		if role, err = auth.ParseRole(*roleName); err != nil {
			return fmt.Errorf("user %s: %w", action, err)
		}
	}

	if *revoke && action != "set" {
		return fmt.Errorf("user %s: --revoke-tokens is for set\n%s", action, userUsage)
	}
	store, err := openStore(*path, stderr)
	if err != nil {
		return err
	}
	if action == "del" {
		if err := store.Snapshot().Err(); err != nil {
			return fmt.Errorf("user del: %w", err)
		}
		err := store.Edit(nil, func(e *auth.Edit) error { return e.DeleteUser(name) })
		if errors.Is(err, auth.ErrNoUser) {
			return fmt.Errorf("user del: no user %q in %s", name, *path)
		}
		return err
	}

	exists := store.Snapshot().Has(name)
	if action == "set" && role != auth.RoleNone && exists && !*revoke {
		// set --role of an existing user changes the role only.
		err := store.Edit(nil, func(e *auth.Edit) error {
			if _, ok := e.Users.Lookup(name); !ok {
				return auth.ErrNoUser
			}
			e.Roles.Set(name, role)
			return nil
		})
		if !errors.Is(err, auth.ErrNoUser) {
			return err
		}
		// Removed meanwhile: made anew below, with a password.
	}
	if action == "add" && exists {
		// Refuse before asking for a password; checked again under the lock.
		return errUserExists(name, *path)
	}
	passwd, err := readPassword(stdin, stderr)
	if err != nil {
		return fmt.Errorf("user %s: %w", action, err)
	}
	if passwd == "" {
		return fmt.Errorf("user %s: empty password refused", action)
	}
	if err := auth.ValidPasswd(passwd); err != nil {
		return fmt.Errorf("user %s: %w", action, err)
	}
	hash, err := auth.NewHash(passwd)
	if err != nil {
		return fmt.Errorf("user %s: %w", action, err)
	}
	// One change of the files: the entry, the role line and, with
	// --revoke-tokens, the tokens' removal together (no crash leaves the
	// old tokens under a new password); a new user with nothing a former
	// user of the name left.
	revoked := 0
	err = store.Edit(nil, func(e *auth.Edit) error {
		if _, ok := e.Users.Lookup(name); ok {
			if action == "add" {
				return auth.ErrUserExists
			}
			e.Users.Set(name, hash)
			if role != auth.RoleNone {
				e.Roles.Set(name, role)
			}
			if *revoke {
				revoked = len(e.Tokens.List(name))
				e.RevokeTokens(name)
			}
			return nil
		}
		return e.AddUser(name, hash, role)
	})
	if errors.Is(err, auth.ErrUserExists) {
		return errUserExists(name, *path)
	}
	if err == nil && *revoke {
		fmt.Fprintf(stderr, "kvmd: %d API tokens of %s revoked\n", revoked, name)
	}
	return err
}

// openStore opens the credential files at path for a command: read once,
// not watched, their malformed lines printed to stderr.
func openStore(path string, stderr io.Writer) (*auth.Store, error) {
	return auth.OpenStore(path, auth.StoreConfig{Warn: func(p string, err error) {
		fmt.Fprintf(stderr, "kvmd: warning: %s: %v\n", p, err)
	}})
}

func errUserExists(name, path string) error {
	return fmt.Errorf("user add: user %q already exists in %s (use \"kvmd user set\" to change the password)", name, path)
}

// subcommand checks the action in args[0] against actions and returns it
// with a flag set for its flags, printing usage on -h.
func subcommand(cmd string, args, actions []string, usage string, stderr io.Writer) (string, *flag.FlagSet, error) {
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%s: missing subcommand\n%s", cmd, usage)
	}
	action := args[0]
	switch {
	case slices.Contains(actions, action):
	case action == "-h" || action == "--help" || action == "help":
		fmt.Fprintln(stderr, usage)
		return "", nil, flag.ErrHelp
	default:
		return "", nil, fmt.Errorf("%s: unknown subcommand %q\n%s", cmd, action, usage)
	}
	fset := flag.NewFlagSet("kvmd "+cmd+" "+action, flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fset.PrintDefaults()
	}
	return action, fset, nil
}

// parseInterleaved parses flags that may come before, between or after
// positional arguments, which the flag package alone stops at, and returns
// the positional ones. Everything after "--" is positional.
func parseInterleaved(fset *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fset.Parse(args); err != nil {
			return nil, err
		}
		rest := fset.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func listUsers(path string, stdout, stderr io.Writer) error {
	store, err := openStore(path, stderr)
	if err != nil {
		return err
	}
	snap := store.Snapshot()
	if err := snap.Err(); err != nil {
		return err
	}
	for _, u := range snap.Users() {
		fmt.Fprintln(stdout, u)
	}
	return nil
}

// maxPasswdLine bounds what is read from a non-terminal stdin: more than a
// password can be (512 bytes) plus its line ending, so that an overlong
// one is refused rather than cut.
const maxPasswdLine = 1024

// readPassword asks for the password twice with echo off when stdin is a
// terminal, and otherwise reads the first line of stdin, so that scripts can
// pipe it in without it showing in the process list.
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		fmt.Fprint(stderr, "Password: ")
		p1, err := term.ReadPassword(fd)
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("reading password: %w", err)
		}
		fmt.Fprint(stderr, "Repeat password: ")
		p2, err := term.ReadPassword(fd)
		fmt.Fprintln(stderr)
		if err != nil {
			return "", fmt.Errorf("reading password: %w", err)
		}
		if string(p1) != string(p2) {
			return "", errors.New("the passwords do not match")
		}
		return string(p1), nil
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, maxPasswdLine)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("reading password from stdin: %w", err)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, nil
}
