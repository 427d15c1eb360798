// Package usersfile reads and edits the users file (htpasswd) for the
// commands that change it, kvmd user and kvmd firstboot: every edit under
// atomicfile's lock, every line it does not touch kept as it was.
package usersfile

import (
	"fmt"
	"io"
	"os"

	"kvmd/auth"
	"kvmd/internal/atomicfile"
)

// Perm is the mode of a new users file (and of the other secret files the
// commands create): hashes stay away from other local users. A file keeps
// its owner, group and mode across edits (see atomicfile.Write).
const Perm = 0o600

// Read reads and parses the users file, printing what cannot be used in it
// to warn: the daemon ignores those lines, and an edit keeps them.
func Read(path string, warn io.Writer) (*auth.Htpasswd, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading users file: %w", err)
	}
	return parse(path, data, warn), nil
}

func parse(path string, data []byte, warn io.Writer) *auth.Htpasswd {
	f, errs := auth.ParseHtpasswd(data)
	for _, err := range errs {
		fmt.Fprintf(warn, "kvmd: warning: %s: %v\n", path, err)
	}
	return f
}

// Update applies edit to the users file under its lock. A missing file
// starts empty; an error from edit leaves the file as it was.
func Update(path string, warn io.Writer, edit func(*auth.Htpasswd) error) error {
	return atomicfile.Update(path, Perm, func(old []byte) ([]byte, error) {
		f := parse(path, old, warn)
		if err := edit(f); err != nil {
			return nil, err
		}
		return f.Bytes(), nil
	})
}
