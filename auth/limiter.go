package auth

import (
	"net/netip"
	"sync"
	"time"
)

// Limiter slows down password guessing per client address. IPv4 addresses
// count alone, IPv6 addresses by their /64, since one host usually owns a
// whole /64. Only the guessing address is slowed: an attacker cannot lock a
// user out from anywhere else.
//
// The first Free failures cost nothing; every failure after them blocks the
// address for Base, then twice that, up to Max. An address that stays quiet
// for Forget starts over.
type Limiter struct {
	Free   int
	Base   time.Duration
	Max    time.Duration
	Forget time.Duration
	// Size bounds the number of addresses remembered.
	Size int

	mu sync.Mutex
	m  map[netip.Prefix]*strikes
}

type strikes struct {
	n     int
	last  time.Time
	until time.Time
}

// NewLimiter returns a Limiter with the defaults the daemon uses: five free
// failures, then 1 s doubling up to 15 min, forgotten after an hour.
func NewLimiter() *Limiter {
	return &Limiter{Free: 5, Base: time.Second, Max: 15 * time.Minute, Forget: time.Hour, Size: 65536}
}

// key groups addresses: the zero Addr (a local peer without a forwarded
// address) is one key of its own.
func key(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	} else if !a.IsValid() {
		return netip.Prefix{}
	}
	p, _ := a.Prefix(bits)
	return p
}

// Blocked returns how long the address must still wait, or 0.
func (l *Limiter) Blocked(a netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.m[key(a)]
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// Failure records a failed attempt and returns how long the address is now
// blocked for (0 while it has free failures left).
func (l *Limiter) Failure(a netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[netip.Prefix]*strikes)
	}
	k := key(a)
	s := l.m[k]
	if s == nil {
		if len(l.m) >= l.Size {
			l.prune(now)
		}
		s = &strikes{}
		l.m[k] = s
	} else if now.Sub(s.last) > l.Forget {
		*s = strikes{}
	}
	s.n++
	s.last = now
	if s.n <= l.Free {
		return 0
	}
	d := l.Max
	if shift := s.n - l.Free - 1; shift < 32 {
		if b := l.Base << shift; b > 0 && b < l.Max {
			d = b
		}
	}
	s.until = now.Add(d)
	return d
}

// Success forgets the address's failures.
func (l *Limiter) Success(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, key(a))
}

// prune drops forgotten entries; if none are, it drops everything that is
// not blocked right now, so the map stays bounded under a spray of
// addresses while blocked addresses stay blocked.
func (l *Limiter) prune(now time.Time) {
	for k, s := range l.m {
		if now.Sub(s.last) > l.Forget {
			delete(l.m, k)
		}
	}
	if len(l.m) < l.Size {
		return
	}
	for k, s := range l.m {
		if !now.Before(s.until) {
			delete(l.m, k)
		}
	}
	if len(l.m) >= l.Size {
		clear(l.m)
	}
}
