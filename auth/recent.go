package auth

import (
	"sync"
	"time"
)

// recentMinutes is how far back FailuresSince can count.
const recentMinutes = 60

// recentFailures counts the failed attempts of the last hour by the
// minute, so that a support bundle can say how many there were without
// reading (and parsing) the log: a fixed ring of 60 counters.
type recentFailures struct {
	mu     sync.Mutex
	minute [recentMinutes]int64 // the Unix minute each slot counts
	n      [recentMinutes]int
}

func (r *recentFailures) add(now time.Time) {
	m := now.Unix() / 60
	i := m % recentMinutes
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.minute[i] != m {
		r.minute[i], r.n[i] = m, 0
	}
	r.n[i]++
}

// since sums the slots of t's minute and later. A slot is reused an hour
// after its minute, so what is older than an hour is never counted.
func (r *recentFailures) since(t time.Time) int {
	from := t.Unix() / 60
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for i, m := range r.minute {
		if m >= from && r.n[i] > 0 {
			total += r.n[i]
		}
	}
	return total
}

// FailuresSince returns the failed authentication attempts (a wrong user,
// password, 2FA code, session or API token: what the "auth failed" lines
// and their held-back summaries report) from t's minute on. It counts the
// last hour at most.
func (a *Authenticator) FailuresSince(t time.Time) int { return a.recent.since(t) }
