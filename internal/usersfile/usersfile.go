// Package usersfile reads and edits the users file (htpasswd) for the
// commands that change it, kvmd user and kvmd firstboot: every edit under
// atomicfile's lock, every line it does not touch kept as it was.
package usersfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

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

// updateBeside is atomicfile.Update of a file kept next to the users file
// (the roles file, the tokens file): created with the users file's owner,
// group and mode, so that whoever may read the one reads the other.
func updateBeside(usersPath, path string, fn func(old []byte) ([]byte, error)) error {
	_, statErr := os.Stat(path)
	if err := atomicfile.Update(path, Perm, fn); err != nil {
		return err
	}
	if statErr == nil {
		return nil
	}
	fi, err := os.Stat(usersPath)
	if err != nil {
		return nil
	}
	if err := os.Chmod(path, fi.Mode().Perm()&0o770); err != nil {
		return fmt.Errorf("giving %s the users file's mode: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Getuid() == 0 {
		if err := os.Chown(path, int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("giving %s the users file's owner: %w", path, err)
		}
	}
	return nil
}

// Role returns the role of user: the roles file's, admin when it does not
// name the user (or there is none).
func Role(usersPath, user string) (auth.Role, error) {
	data, err := os.ReadFile(auth.RolesPath(usersPath))
	if errors.Is(err, fs.ErrNotExist) {
		return auth.RoleAdmin, nil
	}
	if err != nil {
		return auth.RoleNone, fmt.Errorf("reading roles file: %w", err)
	}
	f, _ := auth.ParseRoles(data)
	if r, ok := f.Role(user); ok {
		return r, nil
	}
	return auth.RoleAdmin, nil
}

// SetRole gives user role in the roles file next to the users file. An
// admin role is written too (not just the line removed), so that the file
// says what each user is.
func SetRole(usersPath, user string, role auth.Role, warn io.Writer) error {
	path := auth.RolesPath(usersPath)
	return updateBeside(usersPath, path, func(old []byte) ([]byte, error) {
		f, errs := auth.ParseRoles(old)
		for _, err := range errs {
			fmt.Fprintf(warn, "kvmd: warning: %s: %v\n", path, err)
		}
		f.Set(user, role)
		return f.Bytes(), nil
	})
}

// Forget removes user's role and API tokens: kvmd user del.
func Forget(usersPath, user string) error {
	rp := auth.RolesPath(usersPath)
	if _, err := os.Stat(rp); err == nil {
		err := atomicfile.Update(rp, Perm, func(old []byte) ([]byte, error) {
			f, _ := auth.ParseRoles(old)
			f.Delete(user)
			return f.Bytes(), nil
		})
		if err != nil {
			return err
		}
	}
	tp := auth.TokensPath(usersPath)
	if _, err := os.Stat(tp); err == nil {
		return auth.UpdateTokens(tp, func(f *auth.TokensFile) error {
			f.DeleteUser(user)
			return nil
		})
	}
	return nil
}

// AddToken makes an API token for user, a user of the users file, with a
// role no higher than the user's, and returns its secret.
func AddToken(usersPath, user, name string, role auth.Role, expires, now time.Time) (string, error) {
	users, err := Read(usersPath, io.Discard)
	if err != nil {
		return "", err
	}
	if _, ok := users.Lookup(user); !ok {
		return "", fmt.Errorf("no user %q in %s", user, usersPath)
	}
	have, err := Role(usersPath, user)
	if err != nil {
		return "", err
	}
	if role == auth.RoleNone {
		role = have
	}
	if role > have {
		return "", fmt.Errorf("%w: %s is %s", auth.ErrRoleTooHigh, user, have)
	}
	var secret string
	err = updateBeside(usersPath, auth.TokensPath(usersPath), func(old []byte) ([]byte, error) {
		f, _ := auth.ParseTokens(old)
		var err error
		secret, err = f.Add(user, name, role, expires, now)
		if err != nil {
			return nil, err
		}
		return f.Bytes(), nil
	})
	return secret, err
}

// Tokens lists the API tokens of user (everyone's for "").
func Tokens(usersPath, user string) ([]auth.TokenInfo, error) {
	data, err := os.ReadFile(auth.TokensPath(usersPath))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	f, _ := auth.ParseTokens(data)
	return f.List(user), nil
}

// DelToken revokes user's token name.
func DelToken(usersPath, user, name string) error {
	return auth.UpdateTokens(auth.TokensPath(usersPath), func(f *auth.TokensFile) error {
		return f.Delete(user, name)
	})
}

// UserInfo is a user of the users file and its role.
type UserInfo struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Store is the users file at Path as the daemon's user management API
// edits it: the same atomic, locked edits as kvmd user.
type Store struct {
	Path string
	// Changed, when set, is called after each edit (the daemon re-reads
	// the file at once: a removed user's sessions end before the reply).
	Changed func()
}

func (s *Store) changed() {
	if s.Changed != nil {
		s.Changed()
	}
}

// ErrExists and ErrNoUser are an add of a user that exists and an edit of
// one that does not.
var (
	ErrExists = errors.New("usersfile: the user exists")
	ErrNoUser = errors.New("usersfile: no such user")
)

// List returns the users, in the file's order, with their roles.
func (s *Store) List() ([]UserInfo, error) {
	f, err := Read(s.Path, io.Discard)
	if err != nil {
		return nil, err
	}
	var out []UserInfo
	for _, name := range f.Users() {
		r, err := Role(s.Path, name)
		if err != nil {
			return nil, err
		}
		out = append(out, UserInfo{Name: name, Role: r.String()})
	}
	return out, nil
}

// Set changes user's password (when passwd is not "") and role (when not
// auth.RoleNone); create says whether the user must be new (add) or must
// exist (set).
func (s *Store) Set(user, passwd string, role auth.Role, create bool) error {
	defer s.changed()
	var hash string
	if passwd != "" {
		var err error
		if hash, err = auth.NewHash(passwd); err != nil {
			return err
		}
	}
	err := Update(s.Path, io.Discard, func(f *auth.Htpasswd) error {
		_, ok := f.Lookup(user)
		switch {
		case create && ok:
			return ErrExists
		case !create && !ok:
			return ErrNoUser
		case hash != "":
			f.Set(user, hash)
		case create:
			return errors.New("usersfile: a new user needs a password")
		default:
			return errNoChange
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return err
	}
	if role != auth.RoleNone {
		return SetRole(s.Path, user, role, io.Discard)
	}
	return nil
}

var errNoChange = errors.New("no change")

// Delete removes user, its role and its tokens.
func (s *Store) Delete(user string) error {
	defer s.changed()
	err := Update(s.Path, io.Discard, func(f *auth.Htpasswd) error {
		if !f.Delete(user) {
			return ErrNoUser
		}
		return nil
	})
	if err != nil {
		return err
	}
	return Forget(s.Path, user)
}
