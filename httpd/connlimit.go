package httpd

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// The defaults of Config.MaxConns and Config.MaxConnsPerAddr.
//
// DefaultMaxConns is sized for the smallest board, a Raspberry Pi Zero W
// (512 MB, of which the GPU keeps 64 to 256 MB for the camera and the
// video streamer needs most of the rest): an idle keep-alive connection
// costs this daemon about 21 KiB over plain HTTP, as much as a bare
// net/http server (make bench: BENCHMARKS.md, "Under load"), and 30 to
// 40 KiB over TLS, so 1024 of them stay under 48 MiB even over TLS,
// inside the unit's MemoryMax=. A KVM has a handful of users; 1024 is
// still far above what they open.
//
// DefaultMaxConnsPerAddr leaves a browser its six connections per host
// for every tab of a few users behind one NAT address, and stops one host
// from taking more than a sixteenth of the whole.
const (
	DefaultMaxConns        = 1024
	DefaultMaxConnsPerAddr = 64
)

// connTable counts the open connections, in total and per client address,
// and knows which ones are between requests, oldest first: when the table
// is full, a new connection takes the place of the one that has waited
// longest without a request in a handler (a slow client still sending its
// headers, or an idle keep-alive), so that a flood of slow connections
// cannot keep a normal request out. Only when every connection is in a
// handler is the new one refused. Refusing and evicting is closing: fast,
// and nothing is read or written.
//
// The per-address cap counts TCP peers by address (IPv6 by /64, as the
// Limiter does); the unix socket and trusted proxies carry every client of
// the proxy and are not capped per address.
type connTable struct {
	max, perAddr int
	trusted      func(netip.Addr) bool
	// log gets a line when a connection is refused, once a minute at
	// most for each reason (refusedLog).
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	n      int
	byAddr map[netip.Prefix]int
	idle   idleList // the conns between requests, oldest first
	// refused and evicted count what the caps did, for tests and logs.
	refused, evicted int
	// logged is when each reason of refusal was last logged, and how
	// many were refused since.
	logged [2]struct {
		last time.Time
		held int
	}
}

// The reasons a connection is refused, as indexes of connTable.logged.
const (
	refusedPerAddr = iota // the address holds --max-connections-per-address
	refusedBusy           // the table is full, every connection in a request
)

// connRefusalLogEvery is the least time between two log lines about
// refused connections of one reason.
const connRefusalLogEvery = time.Minute

func newConnTable(max, perAddr int, trusted func(netip.Addr) bool, log *slog.Logger) *connTable {
	if max <= 0 {
		max = DefaultMaxConns
	}
	if perAddr <= 0 {
		perAddr = DefaultMaxConnsPerAddr
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &connTable{max: max, perAddr: perAddr, trusted: trusted, log: log, now: time.Now, byAddr: map[netip.Prefix]int{}}
}

// refuseLocked counts a refusal and returns the log line to write, if one
// is due; t.mu must be held, and the line written after unlocking.
func (t *connTable) refuseLocked(reason int, raw net.Conn) func() {
	t.refused++
	l := &t.logged[reason]
	now := t.now()
	if !l.last.IsZero() && now.Sub(l.last) < connRefusalLogEvery {
		l.held++
		return func() {}
	}
	held := l.held
	l.last, l.held = now, 0
	open := t.n
	return func() {
		args := []any{"addr", raw.RemoteAddr().String(), "open", open, "max", t.max}
		msg := "connection refused: every connection is busy in a request (--max-connections)"
		if reason == refusedPerAddr {
			msg = "connection refused: the address holds its share (--max-connections-per-address)"
			args = append(args, "per_address", t.perAddr)
		}
		if held > 0 {
			args = append(args, "held_back", held, "interval", connRefusalLogEvery.String())
		}
		t.log.Warn(msg, args...)
	}
}

// connSlot is a conn's place in the table.
type connSlot struct {
	table *connTable
	raw   net.Conn // the socket, closed directly to evict (never a TLS alert)
	key   netip.Prefix
	keyed bool
	// prev and next link the conn into table.idle while it is between
	// requests (inIdle): a request takes it out and puts it back with no
	// allocation.
	prev, next *conn
	inIdle     bool
	gone       bool // released: its counts are given back
}

// addrPrefix groups addresses as the limiter does: IPv4 alone, IPv6 by /64.
func addrPrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// admit takes a slot for a new connection, evicting the oldest idle one
// when the table is full. It reports false when c must be closed instead.
func (t *connTable) admit(c *conn, raw net.Conn, unix bool) bool {
	s := &c.slot
	s.table, s.raw = t, raw
	if !unix {
		if ap, err := netip.ParseAddrPort(raw.RemoteAddr().String()); err == nil {
			if a := ap.Addr().Unmap(); !t.trusted(a) {
				s.key, s.keyed = addrPrefix(a), true
			}
		}
	}
	var victim net.Conn
	t.mu.Lock()
	if s.keyed && t.byAddr[s.key] >= t.perAddr {
		logLine := t.refuseLocked(refusedPerAddr, raw)
		t.mu.Unlock()
		logLine()
		return false
	}
	if t.n >= t.max {
		v := t.idle.front()
		if v == nil {
			logLine := t.refuseLocked(refusedBusy, raw)
			t.mu.Unlock()
			logLine()
			return false
		}
		t.releaseLocked(v)
		victim = v.slot.raw
		t.evicted++
	}
	t.n++
	if s.keyed {
		t.byAddr[s.key]++
	}
	t.idle.pushBack(c)
	t.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
	return true
}

// busy marks c as in a handler: it cannot be evicted until done.
func (c *conn) busy() {
	t := c.slot.table
	if t == nil {
		return
	}
	t.mu.Lock()
	t.idle.remove(c)
	t.mu.Unlock()
}

// done puts c back among the idle connections, the newest of them.
func (c *conn) done() {
	t := c.slot.table
	if t == nil {
		return
	}
	t.mu.Lock()
	if !c.slot.gone && !c.slot.inIdle {
		t.idle.pushBack(c)
	}
	t.mu.Unlock()
}

// release gives c's slot back; later calls do nothing.
func (c *conn) release() {
	t := c.slot.table
	if t == nil {
		return
	}
	t.mu.Lock()
	t.releaseLocked(c)
	t.mu.Unlock()
}

func (t *connTable) releaseLocked(c *conn) {
	s := &c.slot
	if s.gone {
		return
	}
	s.gone = true
	t.idle.remove(c)
	t.n--
	if s.keyed {
		if t.byAddr[s.key]--; t.byAddr[s.key] <= 0 {
			delete(t.byAddr, s.key)
		}
	}
}

// idleList is a list of conns linked through their slots.
type idleList struct{ head, tail *conn }

func (l *idleList) front() *conn { return l.head }

func (l *idleList) pushBack(c *conn) {
	s := &c.slot
	s.prev, s.next, s.inIdle = l.tail, nil, true
	if l.tail != nil {
		l.tail.slot.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// remove takes c out of the list, if it is in.
func (l *idleList) remove(c *conn) {
	s := &c.slot
	if !s.inIdle {
		return
	}
	if s.prev != nil {
		s.prev.slot.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.slot.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next, s.inIdle = nil, nil, false
}

// counts returns the open connections and what the caps did.
func (t *connTable) counts() (open, refused, evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.refused, t.evicted
}
