package auth

import (
	"context"
	"fmt"
	"log/slog"
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

// Users checks passwords against the users file, as its Store last read
// it (a Snapshot: no file is read on the request path).
//
// Slow hashes (bcrypt, sha-crypt) make per-request password checks costly,
// so successful checks are remembered in memory, keyed by an HMAC of user
// and password under a key that never leaves the process. The cache holds
// the answers of one version of the users' entries: any change to them
// drops it. At most GOMAXPROCS slow checks run at once, so a flood of
// wrong passwords cannot take every core, and their turns go fairly
// across client addresses (hashGate).
type Users struct {
	store *Store

	cacheMu  sync.RWMutex
	cache    map[[32]byte]uint64
	cacheGen uint64 // the users generation the cache holds answers of
	cacheKey cacheKeyer
	unknown  Hash
	slow     *hashGate
	hashed   atomic.Int64 // password hashes computed: the work a check did, for tests
}

// NewUsers checks passwords against store's users file. It fails if the
// file cannot be read now; later read errors make every check fail until
// the file is good again.
func NewUsers(store *Store) (*Users, error) {
	u := &Users{
		store: store,
		cache: make(map[[32]byte]uint64),
		slow:  newHashGate(runtime.GOMAXPROCS(0)),
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
	if err := u.Err(); err != nil {
		return nil, err
	}
	return u, nil
}

// OpenUsers opens the users file at path in a Store that follows it (on
// the real clock) and checks passwords against it.
func OpenUsers(path string, log *slog.Logger) (*Users, error) {
	store, err := OpenStore(path, StoreConfig{Log: log, Watch: true})
	if err != nil {
		return nil, err
	}
	u, err := NewUsers(store)
	if err != nil {
		store.Close()
		return nil, err
	}
	return u, nil
}

// Store returns the store the users come from.
func (u *Users) Store() *Store { return u.store }

// Err returns why the users file cannot be used, or nil.
func (u *Users) Err() error { return u.store.Snapshot().Err() }

// Names returns the users in the file.
func (u *Users) Names() []string { return u.store.Snapshot().Users() }

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
	return u.verify(ctx, nil, user, passwd, "", true)
}

// verify is Verify with more to the cache key than user and password
// (extra: the 2FA code), and a success remembered only when remember is
// set (the whole check, code included, succeeded): a password found right
// with a wrong code must not answer faster next time. turn, when set,
// gives the context to wait for a slow hash with (the address's turn,
// withTurn), and is called only for a hash; an error may also be the
// refusal of the turn's admit.
func (u *Users) verify(ctx context.Context, turn func(context.Context) context.Context, user, passwd, extra string, remember bool) (ok, cached bool, err error) {
	snap := u.store.Snapshot()
	gen := snap.usersGen
	k := u.cacheKey.key(user, withCode(passwd, extra))
	u.cacheMu.RLock()
	g, hit := u.cache[k]
	u.cacheMu.RUnlock()
	if hit && g == gen {
		return true, true, nil
	}

	var h Hash
	e, known := snap.users[user]
	if known {
		h = e.hash
	}
	if h == nil {
		h = u.unknown
	}
	if turn != nil {
		ctx = turn(ctx)
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
	if u.store.Snapshot().usersGen == gen {
		if len(u.cache) >= cacheSize || u.cacheGen != gen {
			clear(u.cache)
			u.cacheGen = gen
		}
		u.cache[k] = gen
	}
	u.cacheMu.Unlock()
	return true, false, nil
}

// Has reports whether user is in the users file.
func (u *Users) Has(user string) bool { return u.store.Snapshot().Has(user) }

// Role returns user's role: the roles file's, and admin for a user it
// does not name (every user was an admin before roles); viewer for
// everyone while the file cannot be read. It is a map lookup in the
// Snapshot: cheap enough for every request. It does not say whether the
// user exists (Has).
func (u *Users) Role(user string) Role { return u.store.Snapshot().Role(user) }
