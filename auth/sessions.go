package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// ErrBadToken is returned for a session token that is not 64 lower-case hex
// digits.
var ErrBadToken = errors.New("auth: malformed session token")

// ErrTooManySessions is a login refused because Sessions holds Max live
// sessions and none of them is the user's own to end.
var ErrTooManySessions = errors.New("auth: too many sessions")

// ValidToken checks the form of a session token.
func ValidToken(t string) error {
	if len(t) != 64 {
		return ErrBadToken
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return ErrBadToken
		}
	}
	return nil
}

// Sessions holds the logged-in sessions, in memory only. A session ends
// after Idle without use or Lifetime after login, whichever comes first
// (zero disables either): at that moment, by a timer on Clock, with the
// requests it has open, not when the next request finds it dead. A
// request uses a session; a stream it has open (a WebSocket, a log
// follow) does not keep it from idling.
//
// Sessions are found by a hash of their token under a secret seed of the
// process (hash/maphash), so the map lookup's timing says nothing about
// the token itself, nor can a client work out which tokens share a
// bucket; the token is then compared in constant time. (The key was the
// token's SHA-256 before: a fifth of a cookie check's instructions, and
// more on a Raspberry Pi without SHA instructions. A hash anyone can
// compute hid no more.)
type Sessions struct {
	Idle     time.Duration
	Lifetime time.Duration
	// MaxPerUser bounds one user's sessions: beyond it, that user's least
	// recently used session ends. Max bounds them all: at Max, a login
	// ends the user's own least recently used session, and is refused
	// (ErrTooManySessions) when the user has none. One user's logins
	// never end another user's session. Dead sessions are swept first.
	// Zero: no bound.
	MaxPerUser int
	Max        int
	// Clock runs the sessions' deadlines; nil: the real one (New gives
	// the Authenticator's).
	Clock clockwork.Clock

	mu     sync.RWMutex
	seed   maphash.Seed // made with m
	m      map[uint64]*session
	byUser map[string][]*session
}

type session struct {
	key     uint64 // in Sessions.m: maphash of token
	token   string
	tokenB  []byte // token, for the constant-time comparison
	idText  string // id(), made once
	user    string
	addr    netip.Addr
	method  Method
	created time.Time
	expires time.Time // zero: no absolute limit
	used    atomic.Int64
	// ctx ends when the session does (removed, idle, or its lifetime
	// over): the requests it let in end with it (Principal.Done).
	ctx    context.Context
	cancel context.CancelFunc
	timer  clockwork.Timer // fires at the session's next deadline; nil without one
}

// end ends the session's requests, and its timer.
func (ss *session) end() {
	ss.cancel()
	if ss.timer != nil {
		ss.timer.Stop()
	}
}

// id names a session without giving its token away: the first 16 hex
// digits of the token's SHA-256, made once.
func (s *session) id() string { return s.idText }

// key returns the map's key of token; s.mu must be held and s.m made.
func (s *Sessions) key(token string) uint64 { return maphash.String(s.seed, token) }

// is compares the session's token with token in constant time.
func (s *session) is(token string) bool {
	var buf [64]byte
	return subtle.ConstantTimeCompare(s.tokenB, append(buf[:0], token...)) == 1
}

// SessionInfo is what a person may see of a session: never its token.
type SessionInfo struct {
	ID       string    `json:"id"`
	User     string    `json:"user"`
	Addr     string    `json:"addr"`
	Method   Method    `json:"method"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// Expires is zero when the session has no absolute limit.
	Expires time.Time `json:"expires,omitzero"`
}

func (s *session) info() SessionInfo {
	return SessionInfo{ID: s.id(), User: s.user, Addr: addrString(s.addr), Method: s.method,
		Created: s.created, LastUsed: time.Unix(0, s.used.Load()), Expires: s.expires}
}

func (s *session) alive(now time.Time, idle time.Duration) bool {
	if !s.expires.IsZero() && !now.Before(s.expires) {
		return false
	}
	return idle <= 0 || now.UnixNano()-s.used.Load() < int64(idle)
}

// New starts a session for user and returns its token and its lifetime (0
// when it has none). A positive expire shortens the lifetime; it never
// lengthens it.
func (s *Sessions) New(user string, expire time.Duration, now time.Time) (string, time.Duration, error) {
	return s.Start(user, netip.Addr{}, MethodLogin, expire, now)
}

// Start is New for a session started from addr by method m, which the
// session list shows.
func (s *Sessions) Start(user string, addr netip.Addr, m Method, expire time.Duration, now time.Time) (string, time.Duration, error) {
	life := s.Lifetime
	if expire > 0 && (life <= 0 || expire < life) {
		life = expire
	}
	ss := &session{user: user, addr: addr, method: m, created: now}
	if life > 0 {
		ss.expires = now.Add(life)
	}
	ss.used.Store(now.UnixNano())

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.seed = maphash.MakeSeed()
		s.m = make(map[uint64]*session)
		s.byUser = make(map[string][]*session)
	}
	// A token whose key another session has is drawn again (one in 2^64
	// per session held): each key finds one session.
	for ss.token == "" || s.m[ss.key] != nil {
		var raw [32]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return "", 0, err
		}
		ss.token = hex.EncodeToString(raw[:])
		ss.key = s.key(ss.token)
	}
	ss.tokenB = []byte(ss.token)
	sum := sha256.Sum256(ss.tokenB)
	ss.idText = hex.EncodeToString(sum[:8])
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	if s.MaxPerUser > 0 && len(s.byUser[user]) >= s.MaxPerUser {
		s.sweep(s.byUser[user], now)
		if len(s.byUser[user]) >= s.MaxPerUser {
			s.endLeastUsed(user)
		}
	}
	if s.Max > 0 && len(s.m) >= s.Max {
		for _, list := range s.byUser {
			s.sweep(list, now)
		}
		if len(s.m) >= s.Max {
			if len(s.byUser[user]) == 0 {
				return "", 0, ErrTooManySessions
			}
			s.endLeastUsed(user)
		}
	}
	s.m[ss.key] = ss
	s.byUser[user] = append(s.byUser[user], ss)
	s.arm(ss, now)
	return ss.token, life, nil
}

func (s *Sessions) clock() clockwork.Clock {
	if s.Clock == nil {
		return clockwork.NewRealClock()
	}
	return s.Clock
}

// deadline is when ss ends if it is not used again; zero: never.
func (s *Sessions) deadline(ss *session) time.Time {
	d := ss.expires
	if s.Idle > 0 {
		if idle := time.Unix(0, ss.used.Load()).Add(s.Idle); d.IsZero() || idle.Before(d) {
			d = idle
		}
	}
	return d
}

// arm sets ss's timer for its deadline as of now. s.mu must be held.
func (s *Sessions) arm(ss *session, now time.Time) {
	d := s.deadline(ss)
	if d.IsZero() {
		return
	}
	ss.timer = s.clock().AfterFunc(d.Sub(now), func() { s.expire(ss) })
}

// expire runs at ss's deadline: it ends ss if it is dead by then, or sets
// the timer again for the deadline a use has moved.
func (s *Sessions) expire(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[ss.key] != ss {
		return
	}
	now := s.clock().Now()
	if !ss.alive(now, s.Idle) {
		s.remove(ss)
		return
	}
	s.arm(ss, now)
}

// sweep ends the dead sessions among list (one user's). s.mu must be held.
func (s *Sessions) sweep(list []*session, now time.Time) {
	for _, ss := range slices.Clone(list) {
		if !ss.alive(now, s.Idle) {
			s.remove(ss)
		}
	}
}

// endLeastUsed ends the user's session unused the longest. s.mu must be
// held.
func (s *Sessions) endLeastUsed(user string) {
	list := s.byUser[user]
	if len(list) == 0 {
		return
	}
	lru := list[0]
	for _, ss := range list[1:] {
		if ss.used.Load() < lru.used.Load() {
			lru = ss
		}
	}
	s.remove(lru)
}

// remove forgets a session. s.mu must be held.
func (s *Sessions) remove(ss *session) {
	if s.m[ss.key] != ss {
		return
	}
	ss.end()
	delete(s.m, ss.key)
	list := s.byUser[ss.user]
	if i := slices.Index(list, ss); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(s.byUser, ss.user)
	} else {
		s.byUser[ss.user] = list
	}
}

// Check returns the user of a live session and marks it used.
func (s *Sessions) Check(token string, now time.Time) (string, bool) {
	ss := s.check(token, now)
	if ss == nil {
		return "", false
	}
	return ss.user, true
}

// Context returns the context of a live session, which ends when the
// session does, and marks it used; nil when token has none.
func (s *Sessions) Context(token string, now time.Time) context.Context {
	if ss := s.check(token, now); ss != nil {
		return ss.ctx
	}
	return nil
}

func (s *Sessions) check(token string, now time.Time) *session {
	s.mu.RLock()
	var ss *session
	if s.m != nil {
		ss = s.m[s.key(token)]
	}
	s.mu.RUnlock()
	if ss == nil || !ss.is(token) {
		return nil
	}
	if !ss.alive(now, s.Idle) {
		s.mu.Lock()
		s.remove(ss)
		s.mu.Unlock()
		return nil
	}
	ss.used.Store(now.UnixNano())
	return ss
}

// List returns the live sessions of user, or of everyone when user is
// "", oldest first.
func (s *Sessions) List(user string, now time.Time) []SessionInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []SessionInfo
	add := func(list []*session) {
		for _, ss := range list {
			if ss.alive(now, s.Idle) {
				out = append(out, ss.info())
			}
		}
	}
	if user != "" {
		add(s.byUser[user])
	} else {
		for _, list := range s.byUser {
			add(list)
		}
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return a.Created.Compare(b.Created) })
	return out
}

// EndID ends the session with id, if it is one of user's (any user's when
// user is ""), and returns its user.
func (s *Sessions) EndID(id, user string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, list := range s.byUser {
		for _, ss := range list {
			if ss.id() == id && (user == "" || ss.user == user) {
				s.remove(ss)
				return ss.user, true
			}
		}
	}
	return "", false
}

// End ends the session of token and reports whether there was one.
func (s *Sessions) End(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		return false
	}
	ss := s.m[s.key(token)]
	if ss == nil || !ss.is(token) {
		return false
	}
	s.remove(ss)
	return true
}

// EndUser ends every session of user and returns how many there were.
func (s *Sessions) EndUser(user string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.byUser[user]
	for _, ss := range list {
		ss.end()
		delete(s.m, ss.key)
	}
	delete(s.byUser, user)
	return len(list)
}

// EndWhere ends every session of the users for whom end is true and
// returns how many there were.
func (s *Sessions) EndWhere(end func(user string) bool) int {
	s.mu.Lock()
	var users []string
	for u := range s.byUser {
		if end(u) {
			users = append(users, u)
		}
	}
	s.mu.Unlock()
	n := 0
	for _, u := range users {
		n += s.EndUser(u)
	}
	return n
}

// Live returns the number of sessions alive at now. It walks them all
// (at most Max) under the read lock: for a metrics scrape, not per request.
func (s *Sessions) Live(now time.Time) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, ss := range s.m {
		if ss.alive(now, s.Idle) {
			n++
		}
	}
	return n
}

// Len returns the number of sessions held, live or not yet swept.
func (s *Sessions) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}
