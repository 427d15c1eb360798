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
	lines []roleLine
}

type roleLine struct {
	raw  string
	user string // the user the line names; "" for a comment or a line without one
	role Role   // RoleNone: a role that is none of admin, operator, viewer
}

// ParseRoles parses a roles file. The lines that do not parse are kept
// and returned as errors so that the daemon can warn. A line that names a
// user but no role this daemon knows ("alice:admn") makes that user a
// viewer, unless a good line names it too: a typo must not leave the user
// an admin (fail closed). When good lines disagree, the last one wins.
func ParseRoles(data []byte) (*RolesFile, []error) {
	f := &RolesFile{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		l := roleLine{raw: line}
		t := strings.TrimSpace(line)
		if t != "" && t[0] != '#' {
			user, role, ok := strings.Cut(t, ":")
			user, role = strings.TrimSpace(user), strings.TrimSpace(role)
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("line %d: no colon", n))
			case ValidUser(user) != nil:
				errs = append(errs, fmt.Errorf("line %d: %w", n, ValidUser(user)))
			default:
				l.user = user
				r, err := ParseRole(role)
				if err != nil {
					errs = append(errs, fmt.Errorf("line %d: user %s: %w; a viewer until it is fixed", n, user, err))
				}
				l.role = r
			}
		}
		f.lines = append(f.lines, l)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return f, errs
}

// Role returns user's role and whether the file names it.
func (f *RolesFile) Role(user string) (Role, bool) {
	r, named := RoleNone, false
	for _, l := range f.lines {
		if l.user != user {
			continue
		}
		named = true
		if l.role != RoleNone {
			r = l.role
		}
	}
	if named && r == RoleNone {
		r = RoleViewer
	}
	return r, named
}

// Set gives user a role: its good line is replaced (the last, when there
// are several), or one is added; the others that name it go.
func (f *RolesFile) Set(user string, r Role) {
	line := roleLine{raw: user + ":" + r.String(), user: user, role: r}
	last := -1
	for i, l := range f.lines {
		if l.user == user && l.role != RoleNone {
			last = i
		}
	}
	if last < 0 {
		f.Delete(user)
		f.lines = append(f.lines, line)
		return
	}
	f.lines[last] = line
	kept := f.lines[:0]
	for i, l := range f.lines {
		if l.user != user || i == last {
			kept = append(kept, l)
		}
	}
	f.lines = kept
}

// Delete forgets user's role: every line that names it.
func (f *RolesFile) Delete(user string) {
	kept := f.lines[:0]
	for _, l := range f.lines {
		if l.user != user {
			kept = append(kept, l)
		}
	}
	clear(f.lines[len(kept):])
	f.lines = kept
}

// Map returns every user named and their role.
func (f *RolesFile) Map() map[string]Role {
	m := map[string]Role{}
	for _, u := range f.Users() {
		m[u], _ = f.Role(u)
	}
	return m
}

// Users returns the users the file names, sorted.
func (f *RolesFile) Users() []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range f.lines {
		if l.user != "" && !seen[l.user] {
			seen[l.user] = true
			out = append(out, l.user)
		}
	}
	sort.Strings(out)
	return out
}

// Bytes returns the file's text.
func (f *RolesFile) Bytes() []byte {
	var b bytes.Buffer
	for _, l := range f.lines {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
