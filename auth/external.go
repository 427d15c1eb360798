package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"kvmd/auth/backend"
)

// The defaults of ExternalConfig.
const (
	DefaultCacheTTL  = time.Minute
	DefaultTimeout   = 5 * time.Second
	DefaultMaxChecks = 8
)

// ExternalConfig configures an External.
type ExternalConfig struct {
	// Backend checks the passwords of every user not in Local.
	Backend backend.Backend
	// Local are the users checked against the users file only, never
	// against the backend: the ones who must still get in when the
	// service is down.
	Local []string
	// CacheTTL is how long a successful check is remembered (0: not at
	// all). A password changed or a user disabled at the service is
	// honoured after at most this long.
	CacheTTL time.Duration
	// Timeout bounds each check, the wait for a free slot included
	// (0: DefaultTimeout).
	Timeout time.Duration
	// MaxChecks bounds the checks in flight to the service at once
	// (0: DefaultMaxChecks). A check that finds no free slot within
	// Timeout is unavailable.
	MaxChecks int
}

// External sends the password checks of every user but the local ones to
// a backend.Backend.
//
// Successful checks are remembered for CacheTTL, in memory only, keyed by
// an HMAC of user and password under a key that never leaves the process
// (as Users does), so that per-request header or Basic authentication does
// not ask the service every time. Failures are never remembered: the
// Limiter is what slows guessing down. Identical checks that overlap (same
// user and password) are one question to the service, and at most
// MaxChecks questions are in flight at once, so a flood of requests cannot
// open unbounded connections to it.
type External struct {
	backend   backend.Backend
	local     []string
	ttl       time.Duration
	timeout   time.Duration
	slots     chan struct{}
	cacheKey  cacheKeyer
	cacheSize int

	mu       sync.Mutex
	cache    map[[32]byte]time.Time // expiry of a successful check
	swept    time.Time              // when expired entries were last dropped
	inflight map[[32]byte]*check
}

// check is one question to the service that one or more requests wait for.
type check struct {
	done    chan struct{} // closed when err is set
	err     error
	waiters int // under External.mu
	cancel  context.CancelFunc
	// remember caches a success: set when the rest of the check (the
	// 2FA code) succeeded too.
	remember bool
}

// NewExternal returns an External for cfg.
func NewExternal(cfg ExternalConfig) (*External, error) {
	if cfg.Backend == nil {
		return nil, errors.New("auth: no backend")
	}
	if cfg.CacheTTL < 0 || cfg.Timeout < 0 || cfg.MaxChecks < 0 {
		return nil, errors.New("auth: negative cache TTL, timeout or bound on checks")
	}
	for _, u := range cfg.Local {
		if err := ValidUser(u); err != nil {
			return nil, fmt.Errorf("auth: local user %q: %w", u, err)
		}
	}
	e := &External{
		backend:   cfg.Backend,
		local:     slices.Clone(cfg.Local),
		ttl:       cfg.CacheTTL,
		timeout:   orDefault(cfg.Timeout, DefaultTimeout),
		slots:     make(chan struct{}, orDefault(cfg.MaxChecks, DefaultMaxChecks)),
		cacheSize: cacheSize,
		cache:     make(map[[32]byte]time.Time),
		inflight:  make(map[[32]byte]*check),
	}
	var err error
	if e.cacheKey, err = newCacheKeyer(); err != nil {
		return nil, err
	}
	return e, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// recheckEvery is how often a request that lasts asks again whether its
// password is still right: the cache's TTL, after which a new request
// would ask the backend (at least a second; a minute without a cache, so
// that long requests do not ask it more often than the cache would).
func (e *External) recheckEvery() time.Duration {
	if e.ttl <= 0 {
		return DefaultCacheTTL
	}
	return max(e.ttl, time.Second)
}

// Name is the backend's kind: "ldap", "radius", "http".
func (e *External) Name() string { return e.backend.Name() }

// Local reports whether user is checked against the users file only.
func (e *External) Local(user string) bool { return slices.Contains(e.local, user) }

// Verify asks the backend whether passwd is user's password, unless a
// success less than the TTL old answers it. It returns nil, an error
// wrapping backend.ErrRejected, or one wrapping ErrUnavailable (and, when
// the service is what failed, ErrServiceUnavailable too). It returns
// within the timeout, and sooner when ctx ends. now is the
// Authenticator's clock, which the cache's expiry follows.
func (e *External) Verify(ctx context.Context, user, passwd string, now time.Time) (cached bool, err error) {
	return e.verify(ctx, user, passwd, "", true, now)
}

// verify is Verify with extra in the cache key (the 2FA code), and a
// success remembered only when remember is set, as Users.verify.
func (e *External) verify(ctx context.Context, user, passwd, extra string, remember bool, now time.Time) (cached bool, err error) {
	k := e.cacheKey.key(user, withCode(passwd, extra))
	e.mu.Lock()
	if exp, hit := e.cache[k]; hit {
		if now.Before(exp) {
			e.mu.Unlock()
			return true, nil
		}
		delete(e.cache, k)
	}
	c := e.inflight[k]
	if c == nil {
		// The question runs on its own context, not the request's: it
		// is shared, and ends when its last waiter leaves.
		cctx, cancel := context.WithTimeout(context.Background(), e.timeout)
		c = &check{done: make(chan struct{}), cancel: cancel, remember: remember}
		e.inflight[k] = c
		go e.ask(cctx, k, c, user, passwd, now)
	}
	c.waiters++
	e.mu.Unlock()

	// The waiter's own bound too: a backend that overruns its context
	// keeps its slot, never the request.
	t := time.NewTimer(e.timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return false, c.err
	case <-ctx.Done():
		err = fmt.Errorf("%w: the request ended while its password was being checked: %w", ErrUnavailable, ctx.Err())
	case <-t.C:
		err = fmt.Errorf("%w: %w: no answer within %s", ErrUnavailable, backend.ErrUnavailable, e.timeout)
	}
	e.mu.Lock()
	c.waiters--
	if c.waiters == 0 {
		c.cancel()
		if e.inflight[k] == c {
			delete(e.inflight, k)
		}
	}
	e.mu.Unlock()
	select {
	case <-c.done: // answered meanwhile: take the answer
		return false, c.err
	default:
		return false, err
	}
}

// ask puts one question to the backend and hands the answer to every
// waiter.
func (e *External) ask(ctx context.Context, k [32]byte, c *check, user, passwd string, now time.Time) {
	defer c.cancel()
	var err error
	select {
	case e.slots <- struct{}{}:
		err = e.backend.Verify(ctx, user, passwd)
		<-e.slots
		switch {
		case err == nil:
		case errors.Is(err, backend.ErrRejected):
			err = fmt.Errorf("%s: %w", e.backend.Name(), err)
		case errors.Is(err, backend.ErrUnavailable):
			err = fmt.Errorf("%w: %s: %w", ErrUnavailable, e.backend.Name(), err)
		default:
			// Neither yes nor no: fail closed, as unavailable.
			err = fmt.Errorf("%w: %s: %w: %w", ErrUnavailable, e.backend.Name(), backend.ErrUnavailable, err)
		}
	case <-ctx.Done():
		err = fmt.Errorf("%w: %s: %w: all %d checks in flight, none finished within %s",
			ErrUnavailable, e.backend.Name(), backend.ErrUnavailable, cap(e.slots), e.timeout)
	}

	e.mu.Lock()
	if err == nil && e.ttl > 0 && c.remember {
		e.remember(k, now)
	}
	if e.inflight[k] == c {
		delete(e.inflight, k)
	}
	c.err = err
	close(c.done)
	e.mu.Unlock()
}

// remember caches a success. Expired entries are dropped at most once a
// TTL; a cache still full after that starts over. e.mu must be held.
func (e *External) remember(k [32]byte, now time.Time) {
	if !now.Before(e.swept.Add(e.ttl)) || len(e.cache) >= e.cacheSize {
		for kk, exp := range e.cache {
			if !now.Before(exp) {
				delete(e.cache, kk)
			}
		}
		e.swept = now
		if len(e.cache) >= e.cacheSize {
			clear(e.cache)
		}
	}
	e.cache[k] = now.Add(e.ttl)
}

// cached returns the number of entries in the cache, expired or not.
func (e *External) cached() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.cache)
}

// Role returns the role the backend gave user at its last accepted
// check (LDAP role groups), and false when it gives none.
func (e *External) Role(user string) (string, bool) {
	if r, ok := e.backend.(backend.Roler); ok {
		return r.Role(user)
	}
	return "", false
}
