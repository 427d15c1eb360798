// Package backoff is the daemon's one policy for starting again what
// ended on its own: a goroutine under the supervisor (package daemon) or
// a child process such as ustreamer (package streamer) or the H.264
// encoder (package h264). The first wait is
// Initial; each failure that follows within Stable of the last start
// doubles it, up to Max; a run that lasted Stable starts the count anew.
package backoff

import (
	"time"

	"github.com/jonboulle/clockwork"
)

const (
	// Initial is the wait after a first failure.
	Initial = time.Second
	// Max bounds the wait.
	Max = 30 * time.Second
	// Stable is how long a run must last for its end to count as a first
	// failure again.
	Stable = 30 * time.Second
)

// Delay is the wait before the n-th start in a row that follows a
// failure: 1 s, 2 s, 4 s... up to Max.
func Delay(n int) time.Duration {
	d := Initial
	for i := 1; i < n && d < Max; i++ {
		d *= 2
	}
	return min(d, Max)
}

// Backoff counts the failures in a row of one thing started again. The
// zero value is ready.
type Backoff struct {
	failures int
}

// Ended records an end after a run of ran (0: it did not start at all)
// and returns the wait before the next start.
func (b *Backoff) Ended(ran time.Duration) time.Duration {
	if ran >= Stable {
		b.failures = 0
	}
	b.failures++
	return Delay(b.failures)
}

// Reset forgets the failures: nothing waits for a start any more.
func (b *Backoff) Reset() { b.failures = 0 }

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
