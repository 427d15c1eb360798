package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/auth/backend"
)

// Method names how a request proved who it is. The names are the ones
// kvmd uses in its logs.
type Method string

// The authentication methods, in the order they are tried.
const (
	MethodHeader Method = "xhdr"
	MethodCookie Method = "cookie"
	MethodBasic  Method = "basic"
	MethodPeer   Method = "peer"
	MethodLogin  Method = "login"
	MethodToken  Method = "token"
	// MethodVNC is a password sent by a VNC client (VeNCrypt's Plain).
	MethodVNC Method = "vnc"
)

// Methods lists every Method, in the order they are tried (login aside).
var Methods = [...]Method{MethodHeader, MethodCookie, MethodToken, MethodBasic, MethodPeer, MethodLogin, MethodVNC}

// Principal is who a password, a session or an API token lets in.
type Principal struct {
	User string
	Role Role
	// Done ends when the session or the token ends (logout, DELETE,
	// expiry, revocation, the user removed or given another role), or,
	// for a password, when the user's entry or role changes (removed,
	// another password, another role): the requests it let in, log
	// follows and WebSockets, end with it.
	Done context.Context
	// Session is the session's id (SessionInfo.ID); Token the API
	// token's name.
	Session, Token string
	// Recheck, set for the password of a user an External checks, asks
	// again whether the password is still right (from the cache while
	// its answer lasts, then the backend) and returns the user's role
	// now: a change at the backend is seen only by asking. Its 2FA code
	// is not asked for again. A request that lasts calls it every
	// RecheckEvery, and ends when it fails or the role changed.
	Recheck      func(ctx context.Context) (Role, error)
	RecheckEvery time.Duration
}

// Result is how an authentication attempt ended, for the counters.
type Result uint8

// The results an attempt is counted under.
const (
	// ResultOK is an attempt let in.
	ResultOK Result = iota
	// ResultFailed is a wrong user, password, 2FA code or session (403).
	ResultFailed
	// ResultBlocked is a password not even checked: its address is
	// blocked after too many failures (429).
	ResultBlocked
	// ResultUnavailable is a password that could not be checked: the
	// authentication service is down or slow, or the request ended
	// while waiting for its turn (503).
	ResultUnavailable
	numResults
)

func (r Result) String() string {
	switch r {
	case ResultOK:
		return "ok"
	case ResultFailed:
		return "failed"
	case ResultBlocked:
		return "blocked"
	case ResultUnavailable:
		return "unavailable"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// counters counts attempts by method and result. Counting is one atomic
// add, so the hot path (a cookie or a cached password) pays nothing
// measurable for it.
type counters [len(Methods)][numResults]atomic.Uint64

func (c *counters) add(m Method, r Result) {
	for i, mm := range Methods {
		if mm == m {
			c[i][r].Add(1)
			return
		}
	}
}

// Count is one counter: the attempts of Method that ended in Result since
// the daemon started.
type Count struct {
	Method Method
	Result Result
	N      uint64
}

var (
	// ErrForbidden is a wrong user, password, 2FA code or session.
	ErrForbidden = errors.New("auth: forbidden")
	// ErrUnavailable is a check that could not be made now: the request
	// ended while waiting for its turn, or the authentication service is
	// down or did not answer in time (then the error wraps
	// ErrServiceUnavailable too).
	ErrUnavailable = errors.New("auth: unavailable")
	// ErrServiceUnavailable is the authentication service (an External's
	// backend) down, slow past its timeout, or answering what does not
	// parse. It is backend.ErrUnavailable, the backends' own, given here
	// so that callers of auth need not import package backend.
	ErrServiceUnavailable = backend.ErrUnavailable
)

// RateLimitedError says an address must wait before trying again.
type RateLimitedError struct{ Wait time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("auth: too many failures, retry in %s", e.Wait.Round(time.Second))
}

// Authenticator decides who a request is. It logs every decision it makes
// to Log (the audit log): failures always, successes of a login or of a
// password actually checked against its hash. Repeated per-request
// successes answered from the cache are left to the access log. Every
// decision, logged or not, is counted (Counts).
//
// With External set, the passwords of every user but External's local
// ones go to its backend instead of the users file; 2FA, sessions, the
// Limiter, the log and the counters work the same for both. The users file
// is not a fallback: a user who is not local is never checked against it.
type Authenticator struct {
	Users    *Users
	TOTP     *TOTP     // nil: 2FA not configured
	External *External // nil: the users file for everyone
	Sessions *Sessions
	Tokens   *Tokens // nil: no API tokens
	Limiter  *Limiter
	Log      *slog.Logger
	// Clock is the time the checks and the deadlines run on: the users'
	// Store's (New sets it, and the Sessions' when they have none).
	Clock clockwork.Clock
	// FailLogEvery is the interval of failure lines per address and
	// user (failLog); 0: DefaultFailLogEvery.
	FailLogEvery time.Duration

	counts      counters
	unavailable logLimit
	failures    failLog
	recent      recentFailures // for FailuresSince
}

// New wires an Authenticator: each change of the credential files ends
// the sessions of the users whose entry changed or vanished, or whose role
// changed, as soon as the users' Store publishes it. (The Store itself
// ends the requests of the API tokens such a change touches.)
func New(users *Users, tfa *TOTP, sessions *Sessions, limiter *Limiter, log *slog.Logger) *Authenticator {
	clock := users.Store().Clock()
	a := &Authenticator{Users: users, TOTP: tfa, Sessions: sessions, Limiter: limiter, Log: log, Clock: clock}
	if sessions.Clock == nil {
		sessions.Clock = clock
	}
	users.Store().OnChange(func(c Change) {
		for _, user := range c.Ended {
			if n := sessions.EndUser(user); n > 0 {
				log.Info("sessions ended: user changed or removed", "user", user, "sessions", n)
			}
		}
		// A stream opened with the old role (a WebSocket that switches
		// ATX) must not outlive it. Requests check the role anew.
		for _, rc := range c.Roles {
			if n := sessions.EndUser(rc.User); n > 0 {
				log.Info("sessions ended: role changed", "user", rc.User, "sessions", n)
			}
		}
		// The users neither file names (an external backend's without a
		// role line) had the default role, which changed for them.
		if c.Others {
			if n := sessions.EndWhere(func(u string) bool { return !c.New.named(u) }); n > 0 {
				log.Info("sessions ended: the role of users without a role line changed", "sessions", n)
			}
		}
	})
	return a
}

// now is the time on a's clock.
func (a *Authenticator) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// Local tells whether user's password is the users file's: no External,
// or one of its local users.
func (a *Authenticator) Local(user string) bool { return a.External == nil || a.External.Local(user) }

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "local"
	}
	return a.Unmap().String()
}

func (a *Authenticator) fail(user string, m Method, addr netip.Addr, reason string, extra ...any) error {
	now := a.now()
	wait := a.Limiter.Failure(addr, now)
	a.logFailure(user, m, addr, reason, wait, extra...)
	a.counts.add(m, ResultFailed)
	a.recent.add(now)
	return ErrForbidden
}

// logFailure writes a failure's line, unless one for the same address and
// user went out less than FailLogEvery ago and this one sets no block:
// then it is only counted.
func (a *Authenticator) logFailure(user string, m Method, addr netip.Addr, reason string, wait time.Duration, extra ...any) {
	every := a.FailLogEvery
	if every <= 0 {
		every = DefaultFailLogEvery
	}
	// A failure that sets a block always gets its line: blocks come at
	// most once per backoff, and the admin wants to see each one.
	if wait == 0 && !a.failures.allow(a.Log, every, user, m, addr, reason) {
		return
	}
	args := []any{"user", LogName(user), "method", string(m), "addr", addrString(addr), "reason", reason}
	if wait > 0 {
		args = append(args, "blocked", wait.Round(time.Second).String())
	}
	a.Log.Warn("auth failed", append(args, extra...)...)
}

// unavailableLogEvery is the least time between two log lines about
// checks that could not be made: a flood while the service is down gives
// one line and a count of the others, not a line per request.
const unavailableLogEvery = 10 * time.Second

// logLimit lets one line through per unavailableLogEvery and counts the
// ones it holds back.
type logLimit struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// allow reports whether to log now, and how many lines were held back
// since the last one.
func (l *logLimit) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.next, l.suppressed = now.Add(unavailableLogEvery), 0
	return true, n
}

// unavailableErr counts and logs a check that could not be made. It is no
// failure for the Limiter: the password was not found wrong.
func (a *Authenticator) unavailableErr(user string, m Method, addr netip.Addr, via string, err error) error {
	a.counts.add(m, ResultUnavailable)
	if ok, held := a.unavailable.allow(a.now()); ok {
		args := []any{"user", user, "method", string(m), "addr", addrString(addr), "err", err.Error()}
		if via != "" {
			args = append(args, "backend", via)
		}
		if held > 0 {
			args = append(args, "suppressed", held)
		}
		a.Log.Warn("auth unavailable", args...)
	}
	if !errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Counts returns the attempts counted since the start, by method and
// result: every combination, zeros included, in a fixed order.
func (a *Authenticator) Counts() []Count {
	out := make([]Count, 0, len(Methods)*int(numResults))
	for i, m := range Methods {
		for r := range numResults {
			out = append(out, Count{Method: m, Result: r, N: a.counts[i][r].Load()})
		}
	}
	return out
}

// Peer counts a request let in by its unix-socket peer credentials, which
// the HTTP layer decides (it holds the connection). Like a cached password
// check it is not logged here: the access log has it.
func (a *Authenticator) Peer() { a.counts.add(MethodPeer, ResultOK) }

// ActiveSessions returns the number of live sessions.
func (a *Authenticator) ActiveSessions() int { return a.Sessions.Live(a.now()) }

// TwoFactor reports whether passwords must end with a 2FA code.
func (a *Authenticator) TwoFactor() bool {
	if a.TOTP == nil {
		return false
	}
	on, err := a.TOTP.State()
	return on || err != nil
}

// Password checks user's password (with the 2FA code at its end when 2FA
// is on), against the users file or External's backend. It returns nil,
// ErrForbidden, an error wrapping ErrUnavailable, or a *RateLimitedError.
//
// The password is checked whether or not the code is right, missing or
// the 2FA secret unusable: the time an answer takes must not tell an
// attacker that the code was right (a wrong code used to be refused in
// microseconds, a right one after the hash). A success is cached under
// the password and the code together, and only when both were right.
func (a *Authenticator) Password(ctx context.Context, user, passwd string, m Method, addr netip.Addr) error {
	now := a.now()
	if wait := a.Limiter.Blocked(addr, now); wait > 0 {
		a.counts.add(m, ResultBlocked)
		return &RateLimitedError{Wait: wait}
	}
	var reason, code string // why the 2FA part failed; the code
	if a.TOTP != nil {
		on, err := a.TOTP.State()
		switch {
		case err != nil:
			reason = "2FA secret unusable (fail closed)"
		case on && len(passwd) < CodeLen:
			reason = "no 2FA code"
		case on:
			code = passwd[len(passwd)-CodeLen:]
			passwd = passwd[:len(passwd)-CodeLen]
			if !a.TOTP.Check(code, now) {
				reason = "wrong or expired 2FA code"
			}
		}
	}
	// The address's turn at the slow hashes: fair across addresses, and
	// refused without a hash when a block was set while it waited. Made
	// only for a hash: an answer from the verification cache needs none.
	turnCtx := func(ctx context.Context) context.Context {
		return withTurn(ctx, &turn{
			key:  key(addr),
			rank: func() int { return a.Limiter.Failures(addr, a.now()) },
			admit: func() error {
				if wait := a.Limiter.Blocked(addr, a.now()); wait > 0 {
					return &RateLimitedError{Wait: wait}
				}
				return nil
			},
		})
	}
	var (
		ok, cached bool
		err        error
		name       string // the backend's, "" for the users file
		via        []any  // the backend, for the log
	)
	if a.External != nil && !a.External.Local(user) {
		name = a.External.Name()
		via = []any{"backend", name}
		cached, err = a.External.verify(ctx, user, passwd, code, reason == "", now)
		if errors.Is(err, backend.ErrRejected) {
			if reason == "" {
				reason = "wrong user or password"
			}
			return a.fail(user, m, addr, reason, append(via, "detail", err.Error())...)
		}
		ok = err == nil
	} else {
		ok, cached, err = a.Users.verify(ctx, turnCtx, user, passwd, code, reason == "")
	}
	if err != nil {
		// (errors.As only here: its target would be allocated on every
		// request otherwise.)
		var rl *RateLimitedError
		if errors.As(err, &rl) {
			a.counts.add(m, ResultBlocked)
			return rl
		}
		return a.unavailableErr(user, m, addr, name, err)
	}
	switch {
	case reason != "":
		return a.fail(user, m, addr, reason)
	case !ok:
		return a.fail(user, m, addr, "wrong user or password")
	}
	a.Limiter.Success(addr)
	a.counts.add(m, ResultOK)
	if !cached || m == MethodLogin {
		a.Log.Info("auth ok", append([]any{"user", user, "method", string(m), "addr", addrString(addr)}, via...)...)
	}
	return nil
}

// Authenticate checks user's password as Password does and returns who it
// lets in: the user's role now, and the context its requests end with
// (Principal.Done, and Recheck for a user of an External).
func (a *Authenticator) Authenticate(ctx context.Context, user, passwd string, m Method, addr netip.Addr) (Principal, error) {
	// The Snapshot before the check: a change after it ends its
	// context, whether or not the check saw the change.
	snap := a.Users.store.Snapshot()
	if err := a.Password(ctx, user, passwd, m, addr); err != nil {
		return Principal{}, err
	}
	p := Principal{User: user, Role: a.Role(user), Done: snap.done(user)}
	if !a.Local(user) {
		p.Recheck, p.RecheckEvery = a.recheck(user, passwd), a.External.recheckEvery()
	}
	return p, nil
}

// recheck returns Principal.Recheck for a password of an External's
// user: the password part (the 2FA code cut off as Password cut it) asked
// again, neither limited nor counted as an attempt (it is no guess), and
// the role then.
func (a *Authenticator) recheck(user, passwd string) func(ctx context.Context) (Role, error) {
	code := ""
	if a.TwoFactor() && len(passwd) >= CodeLen {
		passwd, code = passwd[:len(passwd)-CodeLen], passwd[len(passwd)-CodeLen:]
	}
	return func(ctx context.Context) (Role, error) {
		_, err := a.External.verify(ctx, user, passwd, code, true, a.now())
		switch {
		case errors.Is(err, backend.ErrRejected):
			return RoleNone, fmt.Errorf("%w: %w", ErrForbidden, err)
		case err != nil:
			return RoleNone, err
		}
		return a.Role(user), nil
	}
}

// Login checks the password and starts a session. expire, when positive,
// shortens the session's lifetime. It returns the token and the session's
// lifetime (0: none).
func (a *Authenticator) Login(ctx context.Context, user, passwd string, expire time.Duration, addr netip.Addr) (string, time.Duration, error) {
	if err := a.Password(ctx, user, passwd, MethodLogin, addr); err != nil {
		return "", 0, err
	}
	return a.Sessions.Start(user, addr, MethodLogin, expire, a.now())
}

// Role returns user's role: for a user of an external backend that gives
// roles (LDAP role groups), the backend's; otherwise the roles file's
// (Users.Role), admin for a user it does not name.
func (a *Authenticator) Role(user string) Role {
	if a.External != nil && !a.External.Local(user) {
		if name, ok := a.External.Role(user); ok {
			if r, err := ParseRole(name); err == nil {
				return r
			}
		}
	}
	return a.Users.Role(user)
}

// Session returns who a session token lets in. The token must have passed
// ValidToken.
func (a *Authenticator) Session(token string, addr netip.Addr) (Principal, error) {
	now := a.now()
	ss := a.Sessions.check(token, now)
	if ss == nil {
		a.logFailure("-", MethodCookie, addr, "unknown or expired session", 0)
		a.counts.add(MethodCookie, ResultFailed)
		a.recent.add(now)
		return Principal{}, ErrForbidden
	}
	a.counts.add(MethodCookie, ResultOK)
	return Principal{User: ss.user, Role: a.Role(ss.user), Done: ss.ctx, Session: ss.id()}, nil
}

// tokenLogEvery is the least time between two "token used" lines of one
// token: its first use is logged, then one line an hour at most.
const tokenLogEvery = time.Hour

// Token returns who an API token lets in. The token must have passed
// ValidAPIToken. It is refused once revoked, expired, or its user gone
// from the users file; its role is the lower of its own and its user's
// present one.
func (a *Authenticator) Token(secret string, addr netip.Addr) (Principal, error) {
	now := a.now()
	if wait := a.Limiter.Blocked(addr, now); wait > 0 {
		a.counts.add(MethodToken, ResultBlocked)
		return Principal{}, &RateLimitedError{Wait: wait}
	}
	if a.Tokens == nil {
		return Principal{}, a.fail("-", MethodToken, addr, "API tokens not configured")
	}
	lt, ctx := a.Tokens.check(secret, now)
	if lt == nil {
		return Principal{}, a.fail("-", MethodToken, addr, "unknown, revoked or expired API token")
	}
	user := lt.info.User
	if a.Local(user) && !a.Users.Has(user) {
		return Principal{}, a.fail(user, MethodToken, addr, "API token of a user no longer in the users file", "token", lt.info.Name)
	}
	role := min(lt.role, a.Role(user))
	a.counts.add(MethodToken, ResultOK)
	if last := lt.announce.Load(); now.UnixNano()-last >= int64(tokenLogEvery) && lt.announce.CompareAndSwap(last, now.UnixNano()) {
		a.Log.Info("token used", "user", user, "token", lt.info.Name, "role", role.String(), "method", string(MethodToken), "addr", addrString(addr))
	}
	return Principal{User: user, Role: role, Done: ctx, Token: lt.info.Name}, nil
}

// Logout ends the session of token, if there is one.
func (a *Authenticator) Logout(token, user string, addr netip.Addr) {
	if a.Sessions.End(token) {
		a.Log.Info("logout", "user", user, "method", string(MethodCookie), "addr", addrString(addr))
	}
}

// Sessions lists the live sessions of user, everyone's for "".
func (a *Authenticator) SessionList(user string) []SessionInfo {
	return a.Sessions.List(user, a.now())
}

// EndSession ends the session id when it is one of user's (any user's
// for ""), logging who did it from where.
func (a *Authenticator) EndSession(id, user, by string, m Method, addr netip.Addr) bool {
	owner, ok := a.Sessions.EndID(id, user)
	if ok {
		a.Log.Info("session ended", "user", owner, "session", id, "by", by, "method", string(m), "addr", addrString(addr))
	}
	return ok
}

// EndSessions ends every session of user, logging who did it.
func (a *Authenticator) EndSessions(user, by string, m Method, addr netip.Addr) int {
	n := a.Sessions.EndUser(user)
	if n > 0 {
		a.Log.Info("sessions ended", "user", user, "sessions", n, "by", by, "method", string(m), "addr", addrString(addr))
	}
	return n
}
