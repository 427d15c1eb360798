package info

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// cached holds one category's value and its JSON for at most ttl (forever
// when ttl is 0). When it is stale, one caller rebuilds it while the
// others keep answering with the stale copy, so many clients never pile up
// work; only the very first callers wait for the first build.
type cached struct {
	ttl   time.Duration
	build func() any
	now   func() time.Time

	mu  sync.Mutex
	cur atomic.Pointer[snapshot]
}

// snapshot is one build: the value as built (shared by every reader, so
// never changed after) and its JSON.
type snapshot struct {
	val  any
	json []byte
	at   time.Time
}

func (c *cached) fresh(s *snapshot, now time.Time) bool {
	return s != nil && (c.ttl == 0 || now.Sub(s.at) < c.ttl)
}

// get returns the category's JSON.
func (c *cached) get() []byte { return c.load().json }

// value returns the category's value, from the same build as get's JSON.
func (c *cached) value() any { return c.load().val }

func (c *cached) load() *snapshot {
	now := c.now()
	s := c.cur.Load()
	if c.fresh(s, now) {
		return s
	}
	if !c.mu.TryLock() {
		if s != nil {
			return s
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if s = c.cur.Load(); c.fresh(s, c.now()) {
		return s
	}
	v := c.build()
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	s = &snapshot{val: v, json: b, at: c.now()}
	c.cur.Store(s)
	return s
}
