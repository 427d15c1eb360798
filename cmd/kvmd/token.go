package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"kvmd/auth"
)

const tokenUsage = "usage: kvmd token add NAME --user USER --users FILE [--role ROLE] [--expires DURATION]\n" +
	"       kvmd token list --users FILE [--user USER]\n" +
	"       kvmd token del NAME --user USER --users FILE"

// tokenCmd runs "kvmd token add|list|del": API tokens for scripts, kept
// as hashes in FILE.tokens. add prints the token, the only time it is
// shown.
func tokenCmd(args []string, stdout, stderr io.Writer) error {
	action, fset, err := subcommand("token", args, []string{"add", "list", "del"}, tokenUsage, stderr)
	if err != nil {
		return err
	}
	path := fset.String("users", "", "the users `FILE`; tokens are kept in FILE.tokens")
	user := fset.String("user", "", "the `USER` the token belongs to")
	roleName := fset.String("role", "", "the token's `ROLE` (add): admin, operator or viewer, at most the user's; default the user's")
	expires := fset.Duration("expires", 0, "the token's lifetime (add), e.g. 720h; 0: never expires")
	names, err := parseInterleaved(fset, args[1:])
	if err != nil {
		return err
	}
	if *path == "" {
		return fmt.Errorf("token %s: --users FILE is required\n%s", action, tokenUsage)
	}
	if *user != "" {
		if err := auth.ValidUser(*user); err != nil {
			return fmt.Errorf("token %s: %w", action, err)
		}
	}
	store, err := openStore(*path, stderr)
	if err != nil {
		return err
	}
	if action == "list" {
		if len(names) != 0 {
			return fmt.Errorf("token list: unexpected argument %q\n%s", names[0], tokenUsage)
		}
		for _, t := range store.Snapshot().Tokens(*user) {
			fmt.Fprintf(stdout, "%s\t%s\t%s\tcreated %s\texpires %s\tlast used %s\n", t.User, t.Name, t.Role,
				stamp(t.Created), stamp(t.Expires), stamp(t.LastUsed))
		}
		return nil
	}
	if len(names) != 1 {
		return fmt.Errorf("token %s: want exactly one token NAME, got %d\n%s", action, len(names), tokenUsage)
	}
	if *user == "" {
		return fmt.Errorf("token %s: --user USER is required\n%s", action, tokenUsage)
	}
	if err := auth.ValidTokenName(names[0]); err != nil {
		return fmt.Errorf("token %s: %w", action, err)
	}
	if action == "del" {
		if err := store.Edit(nil, func(e *auth.Edit) error { return e.DeleteToken(*user, names[0]) }); err != nil {
			return fmt.Errorf("token del: %w", err)
		}
		return nil
	}
	var role auth.Role
	if *roleName != "" {
		if role, err = auth.ParseRole(*roleName); err != nil {
			return fmt.Errorf("token add: %w", err)
		}
	}
	if *expires < 0 {
		return fmt.Errorf("token add: negative --expires")
	}
	now := time.Now()
	var until time.Time
	if *expires > 0 {
		until = now.Add(*expires)
	}
	if err := store.Snapshot().Err(); err != nil {
		return fmt.Errorf("token add: %w", err)
	}
	var secret string
	err = store.Edit(nil, func(e *auth.Edit) error {
		e.Now = now
		var err error
		secret, err = e.AddToken(auth.TokenRequest{User: *user, Name: names[0], Role: role, Expires: until})
		return err
	})
	if errors.Is(err, auth.ErrNoUser) {
		return fmt.Errorf("token add: no user %q in %s", *user, *path)
	}
	if err != nil {
		return fmt.Errorf("token add: %w", err)
	}
	fmt.Fprintln(stdout, secret)
	fmt.Fprintln(stderr, "kvmd: the token is shown this once; send it as \"Authorization: Bearer TOKEN\"")
	return nil
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
