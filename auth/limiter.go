package auth

import (
	"container/list"
	"net/netip"
	"sync"
	"sync/atomic"
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
//
// At most Size addresses are remembered. When the table is full, a new
// address takes the place of the unblocked one whose last failure is the
// oldest; a live block is never dropped (dropping them all, as a full
// table once did, freed every attacker at once). When every entry is a
// live block, the failures of the addresses that find no room are
// counted together in one overflow entry, which blocks them all alike
// until room returns: a spray from more networks than Size is slowed as
// one guesser rather than not at all.
type Limiter struct {
	Free   int
	Base   time.Duration
	Max    time.Duration
	Forget time.Duration
	// Size bounds the number of addresses remembered: about 200 bytes
	// each.
	Size int

	mu sync.Mutex
	m  map[netip.Prefix]*list.Element // of *strikes
	// size is len(m), read without mu: while no address has failed, as
	// on every request of a working client, Blocked and Success take no
	// lock (with Size above 0: the overflow entry is used only when m
	// holds Size).
	size atomic.Int64
	// order holds the entries by last failure, oldest first, except that
	// a search for an entry to evict moves the blocked ones it passes to
	// the back, so that no search walks past the same block twice.
	order    list.List
	overflow strikes
	// full is when the last search found every entry blocked: none can be
	// evicted before the earliest of their blocks ends.
	full time.Time
}

type strikes struct {
	key   netip.Prefix
	n     int
	last  time.Time
	until time.Time
}

// NewLimiter returns a Limiter with the defaults the daemon uses: five free
// failures, then 1 s doubling up to 15 min, forgotten after an hour, and
// 16384 addresses (about 3 MiB) remembered.
func NewLimiter() *Limiter {
	return &Limiter{Free: 5, Base: time.Second, Max: 15 * time.Minute, Forget: time.Hour, Size: 16384}
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

// lookup returns the address's entry: its own, the overflow entry when
// it has none while the table is full of blocks, or nil.
func (l *Limiter) lookup(a netip.Addr, now time.Time) *strikes {
	if e := l.m[key(a)]; e != nil {
		return e.Value.(*strikes)
	}
	if len(l.m) >= l.Size && now.Before(l.overflow.until) {
		return &l.overflow
	}
	return nil
}

// Blocked returns how long the address must still wait, or 0.
func (l *Limiter) Blocked(a netip.Addr, now time.Time) time.Duration {
	if l.Size > 0 && l.size.Load() == 0 {
		return 0 // no entry, nor the overflow's, which needs a full table
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.lookup(a, now)
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// Failures returns how many failures of the address are remembered at
// now: 0 once they are forgotten.
func (l *Limiter) Failures(a netip.Addr, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.lookup(a, now)
	if s == nil || now.Sub(s.last) > l.Forget {
		return 0
	}
	return s.n
}

// Len returns the number of addresses remembered.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// Failure records a failed attempt and returns how long the address is now
// blocked for (0 while it has free failures left).
func (l *Limiter) Failure(a netip.Addr, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[netip.Prefix]*list.Element)
	}
	k := key(a)
	var s *strikes
	if e := l.m[k]; e != nil {
		s = e.Value.(*strikes)
		l.order.MoveToBack(e)
	} else if len(l.m) < l.Size || l.evict(now) {
		s = &strikes{key: k}
		l.m[k] = l.order.PushBack(s)
		l.size.Store(int64(len(l.m)))
	} else {
		s = &l.overflow
	}
	if now.Sub(s.last) > l.Forget {
		*s = strikes{key: s.key}
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

// evict drops the unblocked entry whose last failure is the oldest, and
// reports false when every entry is blocked.
func (l *Limiter) evict(now time.Time) bool {
	if now.Before(l.full) {
		return false
	}
	var earliest time.Time
	for range l.order.Len() {
		e := l.order.Front()
		s := e.Value.(*strikes)
		if !now.Before(s.until) {
			l.order.Remove(e)
			delete(l.m, s.key)
			l.size.Store(int64(len(l.m)))
			return true
		}
		if earliest.IsZero() || s.until.Before(earliest) {
			earliest = s.until
		}
		l.order.MoveToBack(e)
	}
	l.full = earliest
	return false
}

// Success forgets the address's failures.
func (l *Limiter) Success(a netip.Addr) {
	if l.size.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[key(a)]; e != nil {
		l.order.Remove(e)
		delete(l.m, key(a))
		l.size.Store(int64(len(l.m)))
	}
}
