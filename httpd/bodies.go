package httpd

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"kvmd/auth"
)

// Request bodies are read only for a request that is let in: serve
// authenticates it and checks its role from the headers first, and a
// request refused then is answered with its body unread, the connection
// closed after the answer (net/http would otherwise read up to 256 KiB of
// it to keep the connection, with no deadline). An unauthenticated
// client's bodies never reach the daemon's memory: 240 of them of 1 MiB
// each, sent at once, cost the connections they came on and nothing more.
//
// The body of a request let in is read whole before its handler runs,
// within its route's limit (its row's body column) and under Config.BodyTimeout,
// into one buffer of its announced size. Bodies up to Config.MaxBody (4
// KiB) are bounded by the connections (Config.MaxConns of them); larger
// ones (a print's text, up to 1 MiB) draw their size from a budget of
// Config.MaxBodies bytes held at once, until their request ends, of which
// users below admin may hold three quarters: beyond it, a 503 in the
// envelope with Retry-After, not memory.

// DefaultMaxBodies is the default of Config.MaxBodies: four prints of the
// largest text at once, or many smaller ones.
const DefaultMaxBodies = 4 << 20

// bodyRule is how serve takes a route's request body.
type bodyRule struct {
	// limit is the most a body may be; a larger one is refused (413).
	limit int64
	// raw says the handler reads the body itself, as a stream, under
	// bounds of its own (the row's rawBody): serve neither reads nor
	// limits it.
	raw bool
}

// bodyRuleOf is the body rule of a row (its body column: Config.MaxBody
// for 0).
func (s *Server) bodyRuleOf(rt *route) bodyRule {
	switch {
	case rt.body == rawBody:
		return bodyRule{raw: true}
	case rt.body > 0:
		return bodyRule{limit: rt.body}
	}
	return bodyRule{limit: s.cfg.MaxBody}
}

// bodies is the budget of the bytes held in bodies larger than
// Config.MaxBody.
type bodies struct {
	max int64

	mu   sync.Mutex
	held int64
	peak int64 // the most held at once, for tests
}

// take reserves n bytes of the budget for a body, or refuses them: beyond
// the budget, or for a user below admin (or no user: a public route)
// beyond three quarters of it.
func (b *bodies) take(n int64, admin bool) bool {
	limit := b.max
	if !admin {
		limit -= b.max / 4
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > limit {
		return false
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return true
}

func (b *bodies) give(n int64) {
	b.mu.Lock()
	b.held -= n
	b.mu.Unlock()
}

// errBodiesBusy answers a body beyond the budget.
var errBodiesBusy = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
	Msg: "Too many large request bodies are being received at once; try again shortly", RetryAfter: time.Second}

// takeBody reads the body of a request that was let in (id), under rule,
// and returns it with what gives its share of the budget back when the
// request is over.
func (s *Server) takeBody(w http.ResponseWriter, r *http.Request, id Identity, rule bodyRule) ([]byte, func(), error) {
	size := r.ContentLength
	if size < 0 { // chunked: as much as it may be
		size = rule.limit
	}
	release := func() {}
	if size > s.cfg.MaxBody {
		if !s.bodies.take(size, id.Role >= auth.RoleAdmin) {
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			return nil, nil, errBodiesBusy
		}
		release = func() { s.bodies.give(size) }
	}
	body, err := s.readBody(w, r, rule.limit)
	if err != nil {
		release()
		return nil, nil, err
	}
	return body, release, nil
}

// readBody reads a request body of at most limit bytes under its own
// deadline, so a client that sends its body slowly is cut off: into one
// buffer of the size the request announced, or growing up to limit for a
// chunked one.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	var b []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= limit {
		// net/http's reader ends the body at its Content-Length.
		b = make([]byte, n)
		_, err = io.ReadFull(r.Body, b)
	} else {
		b, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err != nil {
		// The rest is not wanted: without these net/http drains it, with
		// no deadline, before the reply leaves and again after.
		w.Header().Set("Connection", "close")
		_ = rc.SetReadDeadline(time.Now())
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, BadRequest(errBodyTimeout.Error(), err)
		}
		return nil, BadRequest("Request body could not be read", err)
	}
	_ = rc.SetReadDeadline(time.Time{})
	return b, nil
}

// requestBody returns r's body: the bytes serve read (no copy: a print's
// text is held once), or, for a request it did not read, all of r.Body.
// The bytes are the request's: read them, never change them.
func requestBody(r *http.Request) ([]byte, error) {
	if q := requestFrom(r.Context()); q != nil && q.body != nil {
		return q.body, nil
	}
	return io.ReadAll(r.Body)
}

// forgetBody lets go of r's body for a handler that has taken what it
// needs of it and goes on for long (a print types a copy of its text for
// minutes): the body's memory is free then, though its share of the
// budget comes back only when the request ends.
func forgetBody(r *http.Request) {
	if q := requestFrom(r.Context()); q != nil {
		q.body = nil
	}
	r.Body = http.NoBody
}
