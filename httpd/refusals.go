package httpd

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// refusalEvery is the least time between two log lines about the same
// kind of refusal (status and error name).
const refusalEvery = time.Minute

// maxRefusalKinds bounds the kinds tracked; the names come from the code,
// so a few dozen at most are ever seen.
const maxRefusalKinds = 64

// refusals logs the requests answered with an expected refusal: a 4xx, or
// a 5xx that is a known state of the device (Error.Expected: a subsystem
// this build lacks, a slot taken, a journal that cannot be read). They
// are no faults: each kind gets a line at info at most once per
// refusalEvery, with the number held back since, so that any viewer
// asking for /api/streamer/snapshot in a loop cannot flood the journal.
// The access log, when on, still has every request.
type refusals struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	kinds map[refusalKind]*refusalCount
}

type refusalKind struct {
	status int
	name   string
}

type refusalCount struct {
	last time.Time
	held int
}

// expected reports whether e is a refusal rather than a fault.
func expected(e *Error) bool { return e.Status < 500 || e.Expected }

// note logs the refusal of r with e, unless one of its kind was logged
// less than refusalEvery ago: then it is only counted.
func (l *refusals) note(r *http.Request, e *Error) {
	k := refusalKind{e.Status, e.Name}
	now := l.now()
	l.mu.Lock()
	if l.kinds == nil {
		l.kinds = map[refusalKind]*refusalCount{}
	}
	c := l.kinds[k]
	if c == nil {
		if len(l.kinds) >= maxRefusalKinds {
			k = refusalKind{name: "(other)"}
			c = l.kinds[k]
		}
		if c == nil {
			c = &refusalCount{}
			l.kinds[k] = c
		}
	}
	if !c.last.IsZero() && now.Sub(c.last) < refusalEvery {
		c.held++
		l.mu.Unlock()
		return
	}
	held := c.held
	c.last, c.held = now, 0
	l.mu.Unlock()

	args := []any{"status", e.Status, "error", e.Name, "method", r.Method, "path", logPath(r.URL.Path)}
	if e.Status >= 500 && e.Err != nil {
		// The known state's cause (why the journal cannot be read): worth
		// a line now and then. A 4xx's cause is the client's business.
		args = append(args, "err", e.Err)
	}
	if held > 0 {
		args = append(args, "held_back", held, "interval", refusalEvery.String())
	}
	l.log.Info("request refused", args...)
}
