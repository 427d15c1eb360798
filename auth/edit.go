package auth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"kvmd/internal/atomicfile"
)

var (
	// ErrUserExists is an add of a user that exists.
	ErrUserExists = errors.New("auth: the user exists")
	// ErrNoUser is a change of a user that does not exist.
	ErrNoUser = errors.New("auth: no such user")
	// ErrNeedsPassword is a new user without a password.
	ErrNeedsPassword = errors.New("auth: a new user needs a password")
	// ErrLastAdmin is a change through the API that would leave the
	// users file without an admin.
	ErrLastAdmin = errors.New("auth: that would leave no admin")
	// ErrTooManyTokens is a token asked for by a user who has
	// MaxTokensPerUser already.
	ErrTooManyTokens = errors.New("auth: the user has as many API tokens as a user may have")
)

// MaxTokensPerUser bounds one user's API tokens: each is a line of the
// tokens file, which every token change rewrites and flushes whole.
const MaxTokensPerUser = 32

// Edit is a change of the credential files in the making: the three files
// parsed, to be edited in memory. Store.Edit writes what changed.
type Edit struct {
	Users  *Htpasswd
	Roles  *RolesFile
	Tokens *TokensFile
	// Now is the time of the change.
	Now time.Time
	// KeepAdmin refuses the change (ErrLastAdmin) if it takes the last
	// admin of the users file away: set for the API's changes.
	KeepAdmin bool
	// revoked are the tokens the edit removed, for the log.
	revoked []TokenInfo
}

// Role returns user's role as the edit stands: the roles file's, admin
// for a user it does not name.
func (e *Edit) Role(user string) Role {
	if r, ok := e.Roles.Role(user); ok {
		return r
	}
	return RoleAdmin
}

// admins counts the users of the users file who are admins.
func (e *Edit) admins() int {
	n := 0
	for _, u := range e.Users.Users() {
		if e.Role(u) == RoleAdmin {
			n++
		}
	}
	return n
}

// AddUser adds user with hash and role (RoleNone: no role line, an
// admin). A name that is not in the users file inherits nothing: a role
// line or API tokens left with the name (by an editor, or a command of
// before this store) go in the same change.
func (e *Edit) AddUser(user, hash string, role Role) error {
	if _, ok := e.Users.Lookup(user); ok {
		return ErrUserExists
	}
	if hash == "" {
		return ErrNeedsPassword
	}
	e.forget(user)
	e.Users.Set(user, hash)
	if role != RoleNone {
		e.Roles.Set(user, role)
	}
	return nil
}

// DeleteUser removes user, its role and its API tokens.
func (e *Edit) DeleteUser(user string) error {
	if !e.Users.Delete(user) {
		return ErrNoUser
	}
	e.forget(user)
	return nil
}

// forget removes user's role line and API tokens.
func (e *Edit) forget(user string) {
	e.Roles.Delete(user)
	e.RevokeTokens(user)
}

// RevokeTokens removes every API token of user.
func (e *Edit) RevokeTokens(user string) {
	e.revoked = append(e.revoked, e.Tokens.List(user)...)
	e.Tokens.DeleteUser(user)
}

// TokenRequest is an API token to make.
type TokenRequest struct {
	User, Name string
	// Role is the token's role; RoleNone: its user's.
	Role    Role
	Expires time.Time // zero: never
	// External: the user's password is checked by an external backend,
	// so it need not be in the users file, and its role is the caller's
	// to check.
	External bool
}

// AddToken makes an API token and returns its secret. A user of the users
// file must be in it, and the token's role no higher than the user's
// (ErrRoleTooHigh); a user has at most MaxTokensPerUser tokens.
func (e *Edit) AddToken(r TokenRequest) (string, error) {
	if !r.External {
		if _, ok := e.Users.Lookup(r.User); !ok {
			return "", fmt.Errorf("%w: %s", ErrNoUser, r.User)
		}
		have := e.Role(r.User)
		if r.Role == RoleNone {
			r.Role = have
		}
		if r.Role > have {
			return "", fmt.Errorf("%w: %s is %s", ErrRoleTooHigh, r.User, have)
		}
	}
	if len(e.Tokens.List(r.User)) >= MaxTokensPerUser {
		return "", fmt.Errorf("%w (%d)", ErrTooManyTokens, MaxTokensPerUser)
	}
	return e.Tokens.Add(r.User, r.Name, r.Role, r.Expires, e.Now)
}

// DeleteToken revokes user's token name.
func (e *Edit) DeleteToken(user, name string) error {
	for _, ti := range e.Tokens.List(user) {
		if ti.Name == name {
			e.revoked = append(e.revoked, ti)
		}
	}
	return e.Tokens.Delete(user, name)
}

// Edit makes a change of the credential files: fn edits them as they are
// now, under the lock of their directory, and what it changed is written
// (a change of more than one file through FILE.pending, pending.go) before
// the lock is let go. An error from fn writes nothing. The new Snapshot is
// published, and the OnChange functions have run, when Edit returns. by,
// when set, is who asked, for the log.
func (s *Store) Edit(by *Actor, fn func(*Edit) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, l, err := s.readLocked(true)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if raw.usersErr != nil && !errors.Is(raw.usersErr, fs.ErrNotExist) {
		// A users file that exists but cannot be read is not edited as
		// if it were empty; a missing one is created.
		return raw.usersErr
	}
	for _, err := range []error{raw.rolesErr, raw.tokensErr} {
		if err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	e := &Edit{Now: s.clock.Now()}
	e.Users, _ = ParseHtpasswd(raw.users)
	e.Roles, _ = ParseRoles(raw.roles)
	e.Tokens, _ = ParseTokens(raw.tokens)
	before := map[string][]byte{"users": e.Users.Bytes(), "roles": e.Roles.Bytes(), "tokens": e.Tokens.Bytes()}
	adminsBefore := e.admins()
	if err := fn(e); err != nil {
		s.publish(raw, nil, false) // what was read is news all the same
		return err
	}
	if e.KeepAdmin && adminsBefore > 0 && e.admins() == 0 {
		s.publish(raw, nil, false)
		return ErrLastAdmin
	}
	after := map[string][]byte{"users": e.Users.Bytes(), "roles": e.Roles.Bytes(), "tokens": e.Tokens.Bytes()}
	changed := map[string][]byte{}
	for name, b := range after {
		if !bytes.Equal(b, before[name]) {
			changed[name] = b
		}
	}
	old := map[string][]byte{"users": raw.users, "roles": raw.roles, "tokens": raw.tokens}
	if err := s.commit(changed, old); err != nil {
		// The files are as before, or a FILE.pending finishes the
		// change at the next read.
		s.publish(s.reread(), by, false)
		return err
	}
	s.stamps = s.statAll()
	for name, b := range changed {
		switch name {
		case "users":
			raw.users, raw.usersErr = b, nil
		case "roles":
			raw.roles = b
		case "tokens":
			raw.tokens = b
		}
	}
	s.logRevoked(e.revoked, by)
	s.publish(raw, by, true)
	return nil
}

// reread reads the files again under the lock held by Edit. s.mu and the
// lock must be held.
func (s *Store) reread() rawFiles {
	raw := rawFiles{}
	raw.users, raw.usersErr = readUsers(s.users)
	raw.roles, raw.rolesErr = readOptional(s.roles)
	raw.tokens, raw.tokensErr = readOptional(s.tokens)
	if p, err := readOptional(s.pending); err != nil || p != nil {
		raw = s.finishPending(nil, p, err, raw)
	}
	s.stamps = s.statAll()
	return raw
}

// commit writes the changed files; more than one through FILE.pending.
// When a file cannot be written once FILE.pending is, the files are put
// back as they were (old; nil: absent) and FILE.pending removed: the
// change is undone and its error returned. If even that fails, FILE.pending
// stays, and the next reader that can write finishes the change. The lock
// must be held.
func (s *Store) commit(changed, old map[string][]byte) error {
	switch len(changed) {
	case 0:
		return nil
	case 1:
		for name, b := range changed {
			return s.writeFile(s.pathOf(name), b)
		}
	}
	if err := atomicfile.WriteLike(s.pending, encodePending(changed), UsersPerm, s.users); err != nil {
		return fmt.Errorf("writing %s: %w", s.pending, err)
	}
	err := s.step("wrote pending")
	if err == nil {
		err = s.applyPending(changed)
	}
	if err == nil {
		return nil
	}
	for _, name := range pendingFiles {
		if _, ok := changed[name]; !ok {
			continue
		}
		var uerr error
		if b := old[name]; b != nil {
			uerr = s.writeFile(s.pathOf(name), b)
		} else {
			uerr = atomicfile.Remove(s.pathOf(name))
		}
		if uerr != nil {
			return fmt.Errorf("%w (and undoing it: %w; %s finishes it once the files can be written)", err, uerr, s.pending)
		}
	}
	if rerr := atomicfile.Remove(s.pending); rerr != nil {
		return fmt.Errorf("%w (and removing %s: %w)", err, s.pending, rerr)
	}
	return err
}

// logRevoked logs the tokens a change removed.
func (s *Store) logRevoked(revoked []TokenInfo, by *Actor) {
	for _, ti := range revoked {
		args := []any{"user", ti.User, "token", ti.Name}
		s.log.Info("token revoked", append(args, by.logArgs()...)...)
	}
}

// logArgs are the log's fields of who made a change.
func (a *Actor) logArgs() []any {
	if a == nil {
		return []any{"by", "-", "method", "file", "addr", "local"}
	}
	return []any{"by", a.User, "method", string(a.Method), "addr", addrString(a.Addr)}
}

// UserInfo is a user of the users file and its role.
type UserInfo struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// List returns the users, in the file's order, with their roles: what
// GET /api/auth/users shows.
func (s *Store) List() ([]UserInfo, error) {
	snap := s.Snapshot()
	if err := snap.Err(); err != nil {
		return nil, err
	}
	var out []UserInfo
	for _, name := range snap.order {
		out = append(out, UserInfo{Name: name, Role: snap.Role(name).String()})
	}
	return out, nil
}

// UserChange is the API's change of a user (POST and PATCH
// /api/auth/users).
type UserChange struct {
	// Passwd, when not "", is the new password; Role, when not RoleNone,
	// the new role.
	Passwd string
	Role   Role
	// Create says whether the user must be new (ErrUserExists) or must
	// exist (ErrNoUser).
	Create bool
	// RevokeTokens revokes every API token of the user in the same
	// change: after a compromise, no crash may leave the old tokens
	// under a new password.
	RevokeTokens bool
	// By is who asked, for the log; nil: the files' editor.
	By *Actor
}

// Set makes the change c of user and returns how many API tokens it
// revoked. A new user inherits nothing a former user of the name left. No
// change leaves the file without an admin (ErrLastAdmin).
func (s *Store) Set(user string, c UserChange) (revoked int, err error) {
	var hash string
	if c.Passwd != "" {
		if hash, err = NewHash(c.Passwd); err != nil {
			return 0, err
		}
	}
	err = s.Edit(c.By, func(e *Edit) error {
		e.KeepAdmin = true
		if c.Create {
			return e.AddUser(user, hash, c.Role)
		}
		if _, ok := e.Users.Lookup(user); !ok {
			return ErrNoUser
		}
		if hash != "" {
			e.Users.Set(user, hash)
		}
		if c.Role != RoleNone {
			e.Roles.Set(user, c.Role)
		}
		if c.RevokeTokens {
			revoked = len(e.Tokens.List(user))
			e.RevokeTokens(user)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return revoked, nil
}

// Delete is the API's removal of a user (DELETE /api/auth/users): its
// entry, role line and API tokens, in one change. The last admin is not
// removed (ErrLastAdmin).
func (s *Store) Delete(user string) error {
	return s.Edit(nil, func(e *Edit) error {
		e.KeepAdmin = true
		return e.DeleteUser(user)
	})
}
