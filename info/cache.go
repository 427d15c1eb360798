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
// work; only the very first callers wait for the first build. T is the
// category's own type, so that a reader of the value (Hardware) gets it
// as built, with no type assertion that could fail unnoticed.
type cached[T any] struct {
	ttl   time.Duration
	build func() T
	now   func() time.Time
	// built, when set, is called after each build (the Source's
	// generation: Result's cache).
	built func()

	mu  sync.Mutex
	cur atomic.Pointer[snapshot[T]]
}

func newCached[T any](ttl time.Duration, now func() time.Time, build func() T) *cached[T] {
	return &cached[T]{ttl: ttl, build: build, now: now}
}

// snapshot is one build: the value as built (shared by every reader, so
// never changed after) and its JSON.
type snapshot[T any] struct {
	val  T
	json []byte
	at   time.Time
}

func (c *cached[T]) fresh(s *snapshot[T], now time.Time) bool {
	return s != nil && (c.ttl == 0 || now.Sub(s.at) < c.ttl)
}

// get returns the category's JSON.
func (c *cached[T]) get() []byte { return c.load().json }

// value returns the category's value, from the same build as get's JSON.
func (c *cached[T]) value() T { return c.load().val }

func (c *cached[T]) load() *snapshot[T] {
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
	s = &snapshot[T]{val: v, json: b, at: c.now()}
	c.cur.Store(s)
	if c.built != nil {
		c.built()
	}
	return s
}
