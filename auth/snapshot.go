package auth

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Snapshot is the credential files as the Store last read or wrote them:
// the users and their hashes, their roles, the API tokens. It never
// changes once published; a change to the files publishes a new one. The
// request path reads a Snapshot and nothing else (no stat, no parse).
type Snapshot struct {
	// usersGen counts the changes to the users' entries (hashes): the
	// password cache holds answers of one generation only.
	usersGen uint64
	// err says why the users file cannot be used: every password check
	// fails until it can.
	err   error
	users map[string]*userEntry
	order []string // the users in file order
	roles map[string]Role
	// rolesBroken: the roles file exists but cannot be read; everyone
	// is a viewer until it can (fail closed).
	rolesBroken bool
	tokens      map[[32]byte]*liveToken
	// broken: a pending change that cannot be read (pending.go): the
	// files may be halfway through a change, so every user is a viewer
	// and every API token is refused until it is cleared.
	broken error
	// live are the users either file names, each with the context the
	// requests its password let in end with; others is that of every
	// user neither file names (a user of an external backend without a
	// role line, or no user at all).
	live   map[string]*liveUser
	others *liveUser
}

// liveUser is what ends the requests a user's password let in (X-KVMD
// headers, Basic): like a liveToken, it lasts as long as the user's entry
// (its presence and password) and role do not change, and a change makes
// a new one and ends the old one's context. Sessions and API tokens have
// their own (Sessions, liveToken).
type liveUser struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func newLiveUser() *liveUser {
	ctx, cancel := context.WithCancel(context.Background())
	return &liveUser{ctx: ctx, cancel: cancel}
}

// done returns the context the requests user's password lets in now end
// with: ended by the first change to the user's entry or role.
func (s *Snapshot) done(user string) context.Context {
	if lu := s.live[user]; lu != nil {
		return lu.ctx
	}
	if s.others != nil {
		return s.others.ctx
	}
	return ended
}

// ended is a context that has ended: that of a user of a Snapshot that
// was never built (the store's placeholder before its first read).
var ended = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// sameUser reports whether what lets user in is the same in s as in old:
// the entry (present or not, and its hash) and the role.
func (s *Snapshot) sameUser(old *Snapshot, user string) bool {
	o, n := old.users[user], s.users[user]
	return (o == nil) == (n == nil) && (o == nil || o.text == n.text) && old.Role(user) == s.Role(user)
}

// named reports whether either file names user.
func (s *Snapshot) named(user string) bool {
	_, inUsers := s.users[user]
	_, inRoles := s.roles[user]
	return inUsers || inRoles
}

// buildLive gives s the live users of its names, keeping old's where
// nothing that decides what they let in changed; every one not kept is
// for publish to end (endLive).
func (s *Snapshot) buildLive(old *Snapshot) {
	s.live = make(map[string]*liveUser, len(s.users)+len(s.roles))
	keep := func(u string) {
		if lu := old.live[u]; lu != nil && s.sameUser(old, u) {
			s.live[u] = lu
		} else {
			s.live[u] = newLiveUser()
		}
	}
	newlyNamed := false
	for u := range s.users {
		keep(u)
		newlyNamed = newlyNamed || !old.named(u)
	}
	for u := range s.roles {
		if s.live[u] == nil {
			keep(u)
			newlyNamed = newlyNamed || !old.named(u)
		}
	}
	// The others' role is the default one (RoleAdmin, or RoleViewer
	// while the files cannot be trusted); one of them named now may
	// have another. Either ends them all.
	if old.others != nil && !newlyNamed && old.defaultRole() == s.defaultRole() {
		s.others = old.others
	} else {
		s.others = newLiveUser()
	}
}

// endLive ends the live users of old that s did not keep, and tells
// whether old's others were among them.
func (s *Snapshot) endLive(old *Snapshot) (others bool) {
	for u, lu := range old.live {
		if s.live[u] != lu {
			lu.cancel()
		}
	}
	if old.others != nil && old.others != s.others {
		old.others.cancel()
		return true
	}
	return false
}

// userEntry is a user's line of the users file.
type userEntry struct {
	text string // the hash as written
	hash Hash   // nil: unusable, never matches
}

// liveToken is an API token as the daemon holds it. It lasts as long as
// the token, its user's entry and role, and its expiry do not change: a
// change makes a new one and ends the old one's context, so the requests
// it let in end.
type liveToken struct {
	hash     [32]byte
	info     TokenInfo
	role     Role
	used     *atomic.Int64 // unix nanos of the last use; 0: never (shared by successors)
	announce atomic.Int64  // unix nanos of the last "token used" log line
	// ctx ends when the token is revoked, expires, or its user changes
	// (removed, given another role or password): the requests it let in
	// end with it.
	ctx    context.Context
	cancel context.CancelFunc
	timer  clockwork.Timer // ends ctx at the expiry; nil without one
}

// Err returns why the users file cannot be used now, or nil.
func (s *Snapshot) Err() error { return s.err }

// Has reports whether user is in the users file.
func (s *Snapshot) Has(user string) bool {
	_, ok := s.users[user]
	return ok
}

// Users returns the users of the users file, in its order.
func (s *Snapshot) Users() []string { return slices.Clone(s.order) }

// Role returns user's role by the roles file: the role its line gives,
// admin for a user it does not name (every user was an admin before
// roles), viewer for everyone while the file cannot be read or a change
// cannot be told finished (fail closed). It does not say whether the user
// exists (Has).
func (s *Snapshot) Role(user string) Role {
	if r, ok := s.roles[user]; ok && !s.rolesBroken && s.broken == nil {
		return r
	}
	return s.defaultRole()
}

// defaultRole is the role of a user the roles file does not name: admin,
// or viewer while the file cannot be read or a change cannot be told
// finished (and then everyone's).
func (s *Snapshot) defaultRole() Role {
	if s.rolesBroken || s.broken != nil {
		return RoleViewer
	}
	return RoleAdmin
}

// Tokens returns the API tokens of user, everyone's for "", sorted by
// user and name, with their last-used times as the daemon knows them.
func (s *Snapshot) Tokens(user string) []TokenInfo {
	var out []TokenInfo
	for _, lt := range s.tokens {
		if user == "" || lt.info.User == user {
			ti := lt.info
			if n := lt.used.Load(); n != 0 {
				ti.LastUsed = time.Unix(0, n).UTC().Truncate(time.Second)
			}
			out = append(out, ti)
		}
	}
	slices.SortFunc(out, func(a, b TokenInfo) int {
		return cmp.Or(strings.Compare(a.User, b.User), strings.Compare(a.Name, b.Name))
	})
	return out
}

// token returns the live token of hash, or nil.
func (s *Snapshot) token(h [32]byte) *liveToken {
	if s.broken != nil {
		return nil
	}
	return s.tokens[h]
}

// RoleChange is a user whose role changed.
type RoleChange struct {
	User     string
	Old, New Role
}

// Change is what a new Snapshot changed, for those who end what it ends
// (Store.OnChange): the sessions of Ended and of the users in Roles.
type Change struct {
	Old, New *Snapshot
	// Ended are the users whose entry changed (a new password) or went.
	Ended []string
	// Roles are the users whose role changed.
	Roles []RoleChange
	// Others says the role of every user neither file names may have
	// changed (one was named, or the files became trusted or untrusted):
	// the users of an external backend without a role line.
	Others bool
	// By is who made the change through the daemon; nil for a change of
	// the files (the commands, an editor).
	By *Actor
}

// diff returns what changed from old to s.
func (s *Snapshot) diff(old *Snapshot) Change {
	c := Change{Old: old, New: s}
	for _, u := range old.order {
		if n, ok := s.users[u]; !ok || n.text != old.users[u].text {
			c.Ended = append(c.Ended, u)
		}
	}
	// Every name either snapshot gives a role to, or has in the users
	// file: a role line of a user who is not (yet) in the file counts too,
	// for users of an external backend.
	names := map[string]bool{}
	for _, m := range []map[string]Role{old.roles, s.roles} {
		for u := range m {
			names[u] = true
		}
	}
	for _, o := range []*Snapshot{old, s} {
		for _, u := range o.order {
			names[u] = true
		}
	}
	for _, u := range slices.Sorted(func(yield func(string) bool) {
		for u := range names {
			if !yield(u) {
				return
			}
		}
	}) {
		if old.Has(u) && !s.Has(u) {
			continue // gone: Ended, whatever its role line says
		}
		if o, n := old.Role(u), s.Role(u); o != n {
			c.Roles = append(c.Roles, RoleChange{User: u, Old: o, New: n})
		}
	}
	return c
}

func (c Change) empty() bool { return len(c.Ended) == 0 && len(c.Roles) == 0 && !c.Others }
