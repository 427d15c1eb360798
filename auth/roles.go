package auth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Role is what a user may do. Roles are ordered: each has everything the
// ones below it have.
type Role uint8

// The roles, lowest first. RoleNone is no role at all: a public route
// needs it, and no user holds it.
const (
	RoleNone Role = iota
	// RoleViewer reads: info, log, read-only state, its own sessions
	// and tokens.
	RoleViewer
	// RoleOperator also switches: ATX power, GPIO outputs.
	RoleOperator
	// RoleAdmin does everything: users, every session, diagnostics. A
	// user without a role in the roles file is an admin, as every user
	// was before roles existed.
	RoleAdmin
)

// ErrBadRole is a role name that is none of admin, operator, viewer.
var ErrBadRole = errors.New("auth: role is not admin, operator or viewer")

func (r Role) String() string {
	switch r {
	case RoleViewer:
		return "viewer"
	case RoleOperator:
		return "operator"
	case RoleAdmin:
		return "admin"
	case RoleNone:
		return "none"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	switch s {
	case "admin":
		return RoleAdmin, nil
	case "operator":
		return RoleOperator, nil
	case "viewer":
		return RoleViewer, nil
	}
	return RoleNone, ErrBadRole
}

// RolesPath is where the roles of the users in the users file at
// usersPath are kept: next to it, so that an htpasswd file of before roles
// keeps working unchanged (no roles file: every user an admin).
func RolesPath(usersPath string) string { return usersPath + ".roles" }

// RolesFile is a parsed roles file: one "user:role" a line; blank lines
// and lines starting with # are comments. Like Htpasswd it keeps every
// line it does not change, so an edit leaves comments alone.
type RolesFile struct {
	lines []string
	index map[string]int // user -> line
	roles map[string]Role
}

// ParseRoles parses a roles file. Lines that do not parse are kept but
// give no role (their user stays an admin only if no good line names
// it); they are returned as errors so that the daemon can warn.
func ParseRoles(data []byte) (*RolesFile, []error) {
	f := &RolesFile{index: map[string]int{}, roles: map[string]Role{}}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		f.lines = append(f.lines, line)
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		user, role, ok := strings.Cut(t, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: no colon", n))
			continue
		}
		user, role = strings.TrimSpace(user), strings.TrimSpace(role)
		if err := ValidUser(user); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		r, err := ParseRole(role)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: user %s: %w", n, user, err))
			continue
		}
		f.index[user] = len(f.lines) - 1
		f.roles[user] = r
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return f, errs
}

// Role returns user's role and whether the file names it.
func (f *RolesFile) Role(user string) (Role, bool) {
	r, ok := f.roles[user]
	return r, ok
}

// Set gives user a role.
func (f *RolesFile) Set(user string, r Role) {
	line := user + ":" + r.String()
	if i, ok := f.index[user]; ok {
		f.lines[i] = line
	} else {
		f.index[user] = len(f.lines)
		f.lines = append(f.lines, line)
	}
	f.roles[user] = r
}

// Delete forgets user's role.
func (f *RolesFile) Delete(user string) {
	i, ok := f.index[user]
	if !ok {
		return
	}
	f.lines = append(f.lines[:i], f.lines[i+1:]...)
	delete(f.index, user)
	delete(f.roles, user)
	for u, j := range f.index {
		if j > i {
			f.index[u] = j - 1
		}
	}
}

// Map returns every user named and their role.
func (f *RolesFile) Map() map[string]Role {
	m := make(map[string]Role, len(f.roles))
	for u, r := range f.roles {
		m[u] = r
	}
	return m
}

// Users returns the users the file names, sorted.
func (f *RolesFile) Users() []string {
	out := make([]string, 0, len(f.roles))
	for u := range f.roles {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Bytes returns the file's text.
func (f *RolesFile) Bytes() []byte {
	var b bytes.Buffer
	for _, l := range f.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
