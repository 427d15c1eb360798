package info

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// cached holds one category's JSON for at most ttl (forever when ttl is
// 0). When it is stale, one caller rebuilds it while the others keep
// answering with the stale copy, so many clients never pile up work; only
// the very first callers wait for the first build.
type cached struct {
	ttl   time.Duration
	build func() any
	now   func() time.Time

	mu  sync.Mutex
	cur atomic.Pointer[snapshot]
}

type snapshot struct {
	json []byte
	at   time.Time
}

func (c *cached) fresh(s *snapshot, now time.Time) bool {
	return s != nil && (c.ttl == 0 || now.Sub(s.at) < c.ttl)
}

func (c *cached) get() []byte {
	now := c.now()
	s := c.cur.Load()
	if c.fresh(s, now) {
		return s.json
	}
	if !c.mu.TryLock() {
		if s != nil {
			return s.json
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if s = c.cur.Load(); c.fresh(s, c.now()) {
		return s.json
	}
	b, err := json.Marshal(c.build())
	if err != nil {
		b = []byte("null")
	}
	c.cur.Store(&snapshot{json: b, at: c.now()})
	return b
}
