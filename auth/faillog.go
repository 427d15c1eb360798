package auth

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// DefaultFailLogEvery is Authenticator.FailLogEvery's default.
const DefaultFailLogEvery = 10 * time.Second

// maxFailKeys bounds the address-user pairs whose failures are held back
// at once; beyond it, the rest share one summary.
const maxFailKeys = 1024

// failLog writes the audit log's failure lines at a bounded rate: for each
// client address (IPv6 by /64) and user, the first failure gets its full
// line at once, and the failures that follow within every are counted and
// written as one summary line when the interval ends. A flood of wrong
// passwords or forged cookies used to write a line per request (9 MB in
// 10 s); now it writes two lines per interval per address and user.
type failLog struct {
	mu sync.Mutex
	m  map[failKey]*failCount
	// afterFunc is time.AfterFunc, or a test's stand-in that ends the
	// intervals when the test says.
	afterFunc func(time.Duration, func()) *time.Timer
}

type failKey struct {
	net  netip.Prefix
	user string
}

type failCount struct {
	n      int
	method Method
	reason string
	addr   netip.Addr // the last one, for the summary
}

// failKeyOverflow is the key of the failures that find the table full.
var failKeyOverflow = failKey{user: "\x00"}

// allow reports whether the failure gets its full line now; if not, it
// is counted for the summary.
func (f *failLog) allow(log *slog.Logger, every time.Duration, user string, m Method, addr netip.Addr, reason string) bool {
	k := failKey{key(addr), user}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[failKey]*failCount{}
	}
	if c := f.m[k]; c != nil {
		c.n, c.method, c.reason, c.addr = c.n+1, m, reason, addr
		return false
	}
	c := &failCount{}
	if len(f.m) >= maxFailKeys {
		k = failKeyOverflow
		if c := f.m[k]; c != nil {
			c.n, c.method, c.reason, c.addr = c.n+1, m, reason, addr
			return false
		}
		c = &failCount{n: 1, method: m, reason: reason, addr: addr}
	}
	f.m[k] = c
	after := f.afterFunc
	if after == nil {
		after = time.AfterFunc
	}
	after(every, func() { f.flush(log, k, every) })
	return k != failKeyOverflow
}

// flush ends an interval: the failures held back in it get one line.
func (f *failLog) flush(log *slog.Logger, k failKey, every time.Duration) {
	f.mu.Lock()
	c := f.m[k]
	delete(f.m, k)
	f.mu.Unlock()
	if c == nil || c.n == 0 {
		return
	}
	user, addr := LogName(k.user), addrString(c.addr)
	if k == failKeyOverflow {
		user, addr = "(many)", "(many)"
	}
	log.Warn("auth failures held back", "user", user, "addr", addr, "count", c.n,
		"last_method", string(c.method), "last_reason", c.reason, "interval", every.String())
}
