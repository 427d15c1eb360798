// Package subsystem is the one shape of the daemon's device subsystems, as
// kvmd's server holds its plugins (kvmd/apps/kvmd/server.py in
// github.com/pikvm/kvmd, read at f14596e8: _Subsystem, with get_state and
// poll_state), typed: a name, which is the event type of its changes on
// /api/ws and the path of its state (GET /api/<name>); its state, a Go
// type of its own; and its changes.
//
// A subsystem's package implements Typed[T] for its state T (atx.State,
// msd.State, ...); the daemon registers it, as Of(it), in one list
// (daemon/subsystems.go) in the order of kvmd's greeting, and runs its
// Watch under the supervisor, each change published as an event of its
// name; httpd sends a new WebSocket client each one's Greeting and answers
// GET of its state. Nothing else is wired for a subsystem: no case in a
// switch over names, no field of httpd's Config.
//
// Two helpers make the changes: Poll, for a state that is read (kvmd's
// poll_state loops: read, compare, publish what changed), and Sink, for a
// state whose owner tells its changes as they happen (the ATX board's
// LEDs, the streamer's clients).
package subsystem

import (
	"context"
	"net/http"
)

// Typed is a subsystem whose state is a T.
type Typed[T any] interface {
	// Name is kvmd's name of the subsystem: "atx", "gpio", "hid", ...
	Name() string
	// State is the state now (kvmd's get_state): the result of GET
	// /api/<name>, and what a new WebSocket client is sent first.
	State(ctx context.Context) T
	// Watch calls publish with each change until ctx ends (kvmd's
	// poll_state): the new state, or the part of it that changed (the
	// streamer's). One Watch runs at a time.
	Watch(ctx context.Context, publish func(T))
}

// Greeter is a Typed whose greeting of a new WebSocket client is not one
// event of its State: the info's one event per field, the streamer's last
// state seen (its State asks ustreamer).
type Greeter[T any] interface {
	Greeting(ctx context.Context) []T
}

// Handler answers a request of one of a subsystem's own routes, once
// httpd let it in by its row of the route table (httpd/routes.go: the
// role, the credentials, the body); its error becomes kvmd's envelope
// there (an *httpd.Error says its status; any other is a 500).
type Handler func(w http.ResponseWriter, r *http.Request) error

// Router is a Typed with routes of its own: their handlers by "METHOD
// /path" (the path without /api). Each must have its row in httpd's
// route table, with the condition sub(its name) and a nil handler, and
// each such row a handler here: httpd.New refuses either alone, so that
// no route is served whose policy was not reviewed there.
type Router interface {
	Handlers() map[string]Handler
}

// Subsystem is a Typed with its type left behind, as the registry holds
// it: what httpd and the daemon see of every subsystem alike.
type Subsystem interface {
	Name() string
	State(ctx context.Context) any
	// Greeting is the events a new WebSocket client is sent: its
	// Greeter's, else its State.
	Greeting(ctx context.Context) []any
	Watch(ctx context.Context, publish func(any))
	// Handlers are its Router's handlers; nil without.
	Handlers() map[string]Handler
}

// Of is s in the registry's form.
func Of[T any](s Typed[T]) Subsystem { return erased[T]{s} }

type erased[T any] struct{ s Typed[T] }

func (e erased[T]) Name() string                  { return e.s.Name() }
func (e erased[T]) State(ctx context.Context) any { return e.s.State(ctx) }

func (e erased[T]) Greeting(ctx context.Context) []any {
	g, ok := e.s.(Greeter[T])
	if !ok {
		return []any{e.s.State(ctx)}
	}
	var out []any
	for _, v := range g.Greeting(ctx) {
		out = append(out, v)
	}
	return out
}

func (e erased[T]) Handlers() map[string]Handler {
	if r, ok := e.s.(Router); ok {
		return r.Handlers()
	}
	return nil
}

func (e erased[T]) Watch(ctx context.Context, publish func(any)) {
	e.s.Watch(ctx, func(v T) { publish(v) })
}

// Publisher takes the events of every subsystem (events.Hub).
type Publisher interface {
	Publish(eventType string, event any)
}

// Watch runs s's Watch until ctx ends, each change published on p as an
// event of s's name: what the daemon's supervisor runs for each
// subsystem.
func Watch(ctx context.Context, s Subsystem, p Publisher) {
	name := s.Name()
	s.Watch(ctx, func(ev any) { p.Publish(name, ev) })
}
