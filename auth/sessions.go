package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadToken is returned for a session token that is not 64 lower-case hex
// digits.
var ErrBadToken = errors.New("auth: malformed session token")

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
// (zero disables either).
//
// Sessions are found by the SHA-256 of their token, so the map lookup's
// timing says nothing about the token itself, and the token is then
// compared in constant time.
type Sessions struct {
	Idle     time.Duration
	Lifetime time.Duration
	// Max bounds the number of live sessions; beyond it the oldest ends.
	Max int

	mu sync.RWMutex
	m  map[[32]byte]*session
}

type session struct {
	token   string
	user    string
	created time.Time
	expires time.Time // zero: no absolute limit
	used    atomic.Int64
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
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", 0, err
	}
	life := s.Lifetime
	if expire > 0 && (life <= 0 || expire < life) {
		life = expire
	}
	ss := &session{token: hex.EncodeToString(raw[:]), user: user, created: now}
	if life > 0 {
		ss.expires = now.Add(life)
	}
	ss.used.Store(now.UnixNano())

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[[32]byte]*session)
	}
	if s.Max > 0 && len(s.m) >= s.Max {
		s.sweep(now)
	}
	s.m[sha256.Sum256([]byte(ss.token))] = ss
	return ss.token, life, nil
}

// sweep drops dead sessions and, if that is not enough, the oldest one.
// s.mu must be held.
func (s *Sessions) sweep(now time.Time) {
	var oldest [32]byte
	var first time.Time
	for k, ss := range s.m {
		if !ss.alive(now, s.Idle) {
			delete(s.m, k)
			continue
		}
		if first.IsZero() || ss.created.Before(first) {
			oldest, first = k, ss.created
		}
	}
	if len(s.m) >= s.Max {
		delete(s.m, oldest)
	}
}

// Check returns the user of a live session and marks it used.
func (s *Sessions) Check(token string, now time.Time) (string, bool) {
	k := sha256.Sum256([]byte(token))
	s.mu.RLock()
	ss := s.m[k]
	s.mu.RUnlock()
	if ss == nil || subtle.ConstantTimeCompare([]byte(ss.token), []byte(token)) != 1 {
		return "", false
	}
	if !ss.alive(now, s.Idle) {
		s.mu.Lock()
		delete(s.m, k)
		s.mu.Unlock()
		return "", false
	}
	ss.used.Store(now.UnixNano())
	return ss.user, true
}

// End ends the session of token and reports whether there was one.
func (s *Sessions) End(token string) bool {
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	if ss == nil || subtle.ConstantTimeCompare([]byte(ss.token), []byte(token)) != 1 {
		return false
	}
	delete(s.m, k)
	return true
}

// EndUser ends every session of user and returns how many there were.
func (s *Sessions) EndUser(user string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, ss := range s.m {
		if ss.user == user {
			delete(s.m, k)
			n++
		}
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
