package httpd

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
)

// request is what the server keeps of a request while it runs, in one
// allocation: the reply's recorder, the client's address (worked out
// once), who the request is, its query (parsed once). It is also the
// request's context, which handlers get from r.Context(): the one
// net/http made, ended besides by the session or API token that let the
// request in (end).
//
// The two are joined only when a handler asks for Done or Err: a
// context.WithCancel and an AfterFunc on the session's context, which
// most requests (a check, /api/info) would make for nothing. A handler
// that streams (a WebSocket, a log follow, a print) waits on Done, and
// from then on the request ends when its session does, as a context made
// up front would.
type request struct {
	context.Context // net/http's

	rec  recorder
	addr netip.Addr
	// addrText is addr as the log shows it, when the connection had it
	// made already ("" otherwise).
	addrText string
	id       Identity
	query    url.Values // set by checkQuery; nil (no parameters) without a query string
	// routed says the path is a route's: the access log shows it as it
	// is (no token can be in it, logPath).
	routed bool
	// body is the request's body as serve read it (requestBody).
	body []byte

	// end is the context of the session or API token that let the
	// request in, nil for any other; set before the handler runs and
	// never after.
	end    context.Context
	once   sync.Once
	joined atomic.Pointer[joined]
}

// joined is the request's context joined with end.
type joined struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
}

type requestKey struct{}

// requestFrom returns the request of a context the server made, or nil.
func requestFrom(ctx context.Context) *request {
	q, _ := ctx.Value(requestKey{}).(*request)
	return q
}

// ctx is the context Done and Err are those of.
func (q *request) ctx() context.Context {
	if q.end == nil {
		return q.Context
	}
	if j := q.joined.Load(); j != nil {
		return j.ctx
	}
	q.once.Do(q.join)
	if j := q.joined.Load(); j != nil {
		return j.ctx
	}
	// Asked after release: the request is over, and net/http's context
	// ends with it.
	return q.Context
}

func (q *request) join() {
	ctx, cancel := context.WithCancel(q.Context)
	q.joined.Store(&joined{ctx: ctx, cancel: cancel, stop: context.AfterFunc(q.end, cancel)})
}

// Done is closed when the request ends: the client left, the server is
// shutting down, or the session or API token that let it in ended.
func (q *request) Done() <-chan struct{} { return q.ctx().Done() }

// Err is Done's reason, nil until it is closed.
func (q *request) Err() error { return q.ctx().Err() }

// Value finds the request itself, and the rest in the context Done is
// that of: so that a context derived from this one (WithCancel,
// AfterFunc) finds its parent's cancelCtx there and attaches to it,
// rather than starting a goroutine to wait on Done.
func (q *request) Value(key any) any {
	if key == (requestKey{}) {
		return q
	}
	if j := q.joined.Load(); j != nil {
		return j.ctx.Value(key)
	}
	return q.Context.Value(key)
}

// revoke ends the request as its session's end would: for a request let
// in by a password whose recheck failed (holdStream). It needs end, which
// every password's request has.
func (q *request) revoke() {
	if q.end == nil {
		return
	}
	q.once.Do(q.join)
	if j := q.joined.Load(); j != nil {
		j.cancel()
	}
}

// release lets go of the session's context once the handler has
// returned: the AfterFunc registered on it, if Done or Err was asked. A
// goroutine the handler left behind that asks later gets net/http's
// context, which ends with the request.
func (q *request) release() {
	q.once.Do(func() {})
	if j := q.joined.Load(); j != nil {
		j.stop()
		j.cancel()
	}
}

// query returns r's query parameters: those checkQuery parsed (once for
// the request; nil, which reads as empty, without a query string), or
// parsed now for a request the server did not make. The values are
// shared by every caller: read them, never change them.
func query(r *http.Request) url.Values {
	if q := requestFrom(r.Context()); q != nil {
		return q.query
	}
	return r.URL.Query()
}
