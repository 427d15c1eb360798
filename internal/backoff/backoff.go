// Package backoff is what the daemon's managed children share (ustreamer,
// the H.264 encoder): the wait before a start that follows failures, and
// a timer that may be unset, for their run loops' selects.
package backoff

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// The restart backoff after a child failed: First, doubled at each
// failure that follows within StableAfter of its start, up to Max.
const (
	First       = time.Second
	Max         = 30 * time.Second
	StableAfter = 30 * time.Second
)

// Delay is the wait before the n-th start in a row that follows a
// failure: 1 s, 2 s, 4 s... up to Max.
func Delay(n int) time.Duration {
	d := First
	for i := 1; i < n && d < Max; i++ {
		d *= 2
	}
	return min(d, Max)
}

// Timer is a timer of a clock that may be unset: its C is then nil, which
// a select never takes. The zero Timer is unset.
type Timer struct {
	t clockwork.Timer
}

// Start sets the timer to fire after d, unsetting it first.
func (t *Timer) Start(c clockwork.Clock, d time.Duration) {
	t.Stop()
	t.t = c.NewTimer(d)
}

// Stop unsets the timer.
func (t *Timer) Stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}

// Set says whether the timer is set (started, not yet fired or stopped).
func (t *Timer) Set() bool { return t.t != nil }

// C fires once when the set timer's time comes; nil when unset.
func (t *Timer) C() <-chan time.Time {
	if t.t == nil {
		return nil
	}
	return t.t.Chan()
}

// Fired unsets the timer after its C fired.
func (t *Timer) Fired() { t.t = nil }
