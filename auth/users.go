package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// unknownUserHash is a bcrypt hash of 32 random bytes that were thrown away.
// Checking a password for a user that does not exist costs as much as for
// one that does, so response times do not tell which names exist.
const unknownUserHash = "$2a$10$BTe1etLpHXDlhV20Q89KpOxLvDLRF5EYT4jMZ/iGkC4/hNldPP46e"

// cacheSize bounds the verification cache; when full it starts over.
const cacheSize = 4096

// Users checks passwords against an htpasswd file, re-read when it changes.
//
// Slow hashes (bcrypt, sha-crypt) make per-request password checks costly,
// so successful checks are remembered in memory, keyed by an HMAC of user
// and password under a key that never leaves the process. The cache is
// dropped whenever the file changes. At most GOMAXPROCS slow checks run at
// once, so a flood of wrong passwords cannot take every core, and their
// turns go fairly across client addresses (hashGate).
type Users struct {
	path  string
	log   *slog.Logger
	watch fileWatch
	// rolesWatch watches the roles file next to the users file
	// (RolesPath); roles is what it says, nil when there is none.
	rolesWatch  fileWatch
	roles       map[string]Role
	rolesBroken bool // the roles file exists but cannot be read: everyone is a viewer

	// OnRoleChange is called, after a re-read of the roles file, for
	// each user whose role changed. Set it before the first Verify.
	OnRoleChange func(user string, old, new Role)

	// OnChange is called, after a re-read, for each user whose entry changed
	// or disappeared. Set it before the first Verify.
	OnChange func(user string)

	mu     sync.RWMutex
	hashes map[string]Hash   // nil value: unusable hash, never matches
	lines  map[string]string // user -> hash text, to see what changed
	err    error             // why the file could not be read, or nil

	gen      atomic.Uint64
	cacheMu  sync.RWMutex
	cache    map[[32]byte]uint64
	cacheKey cacheKeyer
	unknown  Hash
	slow     *hashGate
	hashed   atomic.Int64 // password hashes computed: the work a check did, for tests
}

// OpenUsers reads the users file at path. It fails if the file cannot be
// read now; later read errors make every check fail until the file is good
// again.
func OpenUsers(path string, log *slog.Logger) (*Users, error) {
	u := &Users{
		path:       path,
		log:        log,
		watch:      fileWatch{path: path},
		rolesWatch: fileWatch{path: RolesPath(path)},
		cache:      make(map[[32]byte]uint64),
		slow:       newHashGate(runtime.GOMAXPROCS(0)),
	}
	var err error
	if u.cacheKey, err = newCacheKeyer(); err != nil {
		return nil, err
	}
	h, err := ParseHash(unknownUserHash)
	if err != nil {
		return nil, fmt.Errorf("auth: parsing built-in hash: %w", err)
	}
	u.unknown = h
	u.Refresh(true)
	if err := u.Err(); err != nil {
		return nil, err
	}
	return u, nil
}

// Err returns why the users file cannot be used, or nil.
func (u *Users) Err() error {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.err
}

// Names returns the users in the file.
func (u *Users) Names() []string {
	u.mu.RLock()
	defer u.mu.RUnlock()
	names := make([]string, 0, len(u.lines))
	for n := range u.lines {
		names = append(names, n)
	}
	return names
}

// Refresh re-reads the file if it changed. Without force it looks at the
// file at most every watchInterval.
func (u *Users) Refresh(force bool) {
	if u.rolesWatch.changed(force) {
		u.refreshRoles()
	}
	if !u.watch.changed(force) {
		return
	}
	hashes := map[string]Hash{}
	lines := map[string]string{}
	data, err := os.ReadFile(u.path)
	if err != nil {
		err = fmt.Errorf("auth: reading users file: %w", err)
		u.log.Error("users file unusable, every password check fails", "err", err)
	} else {
		f, errs := ParseHtpasswd(data)
		for _, e := range errs {
			u.log.Warn("users file", "path", u.path, "err", e)
		}
		for _, name := range f.Users() {
			text, _ := f.Lookup(name)
			lines[name] = text
			h, herr := ParseHash(text)
			if herr != nil {
				u.log.Warn("users file: this user can never log in", "user", name, "err", herr)
			}
			hashes[name] = h
		}
	}

	u.mu.Lock()
	old := u.lines
	wasBad := u.err != nil
	u.hashes, u.lines, u.err = hashes, lines, err
	u.gen.Add(1)
	u.mu.Unlock()

	u.cacheMu.Lock()
	clear(u.cache)
	u.cacheMu.Unlock()

	if err == nil && (old != nil || wasBad) {
		u.log.Info("users file re-read", "path", u.path, "users", len(lines))
	}
	if u.OnChange != nil {
		for name, text := range old {
			if lines[name] != text {
				u.OnChange(name)
			}
		}
	}
}

// withCode is what a cache key is made of: the password, and the 2FA code
// when there is one, so that the password alone never answers from the
// cache for a code it was not checked with. Passwords are printable ASCII:
// the NUL cannot be part of one.
func withCode(passwd, code string) string {
	if code == "" {
		return passwd
	}
	return passwd + "\x00" + code
}

// Verify reports whether passwd is user's password, and whether the answer
// came from the cache. It returns an error only when ctx ends while waiting
// for a turn at a slow hash.
func (u *Users) Verify(ctx context.Context, user, passwd string) (ok, cached bool, err error) {
	return u.verify(ctx, user, passwd, "", true)
}

// verify is Verify with more to the cache key than user and password
// (extra: the 2FA code), and a success remembered only when remember is
// set (the whole check, code included, succeeded): a password found right
// with a wrong code must not answer faster next time. An error may also
// be the refusal of the turn's admit (turn, in ctx).
func (u *Users) verify(ctx context.Context, user, passwd, extra string, remember bool) (ok, cached bool, err error) {
	u.Refresh(false)
	gen := u.gen.Load()
	k := u.cacheKey.key(user, withCode(passwd, extra))
	u.cacheMu.RLock()
	g, hit := u.cache[k]
	u.cacheMu.RUnlock()
	if hit && g == gen {
		return true, true, nil
	}

	u.mu.RLock()
	h, known := u.hashes[user]
	u.mu.RUnlock()
	if h == nil {
		h = u.unknown
	}
	release, err := u.slow.acquire(ctx)
	if err != nil {
		return false, false, err
	}
	match := h.Verify(passwd)
	release()
	u.hashed.Add(1)
	if !match || !known || h == u.unknown {
		return false, false, nil
	}
	if !remember {
		return true, false, nil
	}

	u.cacheMu.Lock()
	if u.gen.Load() == gen {
		if len(u.cache) >= cacheSize {
			clear(u.cache)
		}
		u.cache[k] = gen
	}
	u.cacheMu.Unlock()
	return true, false, nil
}

// Has reports whether user is in the users file.
func (u *Users) Has(user string) bool {
	u.mu.RLock()
	_, ok := u.lines[user]
	u.mu.RUnlock()
	return ok
}

// Role returns user's role: the roles file's, and admin for a user it
// does not name (every user was an admin before roles). It is a map
// lookup under a read lock: cheap enough for every request. It does not
// say whether the user exists (Has).
func (u *Users) Role(user string) Role {
	u.mu.RLock()
	r, ok := u.roles[user]
	broken := u.rolesBroken
	u.mu.RUnlock()
	switch {
	case broken:
		return RoleViewer
	case !ok:
		return RoleAdmin
	}
	return r
}

// refreshRoles re-reads the roles file. A file that is missing gives every
// user the admin role; one that cannot be read makes every user a viewer
// until it can (fail closed: a role taken away must not come back because
// the file was unreadable for a moment).
func (u *Users) refreshRoles() {
	path := RolesPath(u.path)
	var roles map[string]Role
	broken := false
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		u.log.Error("roles file unreadable: every user is a viewer until it is", "path", path, "err", err)
		broken = true
	default:
		f, errs := ParseRoles(data)
		for _, e := range errs {
			u.log.Warn("roles file", "path", path, "err", e)
		}
		roles = f.Map()
	}
	u.mu.Lock()
	old := u.roles
	wasBroken := u.rolesBroken
	u.roles, u.rolesBroken = roles, broken
	names := make([]string, 0, len(u.lines))
	for name := range u.lines {
		names = append(names, name)
	}
	u.mu.Unlock()
	if u.OnRoleChange == nil || wasBroken == broken && broken {
		return
	}
	if broken {
		// Everyone is a viewer now: end what the others had open.
		for _, name := range names {
			if r, ok := old[name]; !ok || r != RoleViewer {
				u.OnRoleChange(name, cmp.Or(r, RoleAdmin), RoleViewer)
			}
		}
		return
	}
	if wasBroken {
		old = map[string]Role{}
		for _, name := range names {
			old[name] = RoleViewer
		}
	}
	get := func(m map[string]Role, user string) Role {
		if r, ok := m[user]; ok {
			return r
		}
		return RoleAdmin
	}
	seen := map[string]bool{}
	for _, m := range []map[string]Role{old, roles} {
		for user := range m {
			if seen[user] {
				continue
			}
			seen[user] = true
			if o, n := get(old, user), get(roles, user); o != n {
				u.OnRoleChange(user, o, n)
			}
		}
	}
}
