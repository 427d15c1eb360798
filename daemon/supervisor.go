package daemon

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jonboulle/clockwork"

	"kvmd/internal/backoff"
)

// Restart is what the Supervisor does when a child returns before it was
// asked to stop.
type Restart int

const (
	// Permanent children are started again after a backoff (package
	// backoff: 1 s, doubling while they keep ending early): a watcher
	// or a poller the daemon cannot do without.
	Permanent Restart = iota
	// Temporary children are left ended; an error they return is logged.
	Temporary
	// Critical children stop the daemon when they return: the HTTP
	// server. Run returns the error of the first that did.
	Critical
)

// Child is one long-running part of the daemon: Run works until its
// context ends, then releases what it holds and returns.
type Child struct {
	Name    string
	Run     func(ctx context.Context) error
	Restart Restart
}

// Loop makes a Run of a function that returns nothing (most Run methods
// here: they end only when their context does).
func Loop(run func(ctx context.Context)) func(ctx context.Context) error {
	return func(ctx context.Context) error { run(ctx); return nil }
}

// Supervisor runs the daemon's children, as one tree: it starts them in
// the order they were added and stops them in the reverse order, each
// once the one added after it has returned, so that nothing is stopped
// while what uses it still runs (the HTTP server, added last, is stopped
// first; the ATX board, added before it, releases its buttons before the
// keyboard and the tokens file are let go). A child that panics takes
// the process with it, as any goroutine's panic does: systemd restarts
// the daemon whole.
type Supervisor struct {
	// Log receives the children's early ends; nil: discarded.
	Log *slog.Logger
	// Clock times the restart backoff; nil: the real clock.
	Clock clockwork.Clock
	// Started, when set, is called once every child has been started;
	// Stopping when the supervisor begins to stop them.
	Started, Stopping func()

	children []Child
}

// Add adds a child, to be started after those added before it.
func (s *Supervisor) Add(c Child) { s.children = append(s.children, c) }

// Run starts the children and waits until ctx ends or a Critical child
// returns; then it stops them, last to first, and returns that child's
// error (nil when ctx ended first).
func (s *Supervisor) Run(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := s.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	var (
		once     sync.Once
		critical = make(chan struct{})
		critErr  error
	)
	type running struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	// The children's contexts are not ctx's: each ends only when its
	// turn to stop comes.
	base := context.WithoutCancel(ctx)
	runs := make([]running, len(s.children))
	for i, c := range s.children {
		cctx, cancel := context.WithCancel(base)
		runs[i] = running{cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(runs[i].done)
			var restarts backoff.Backoff
			for {
				start := clock.Now()
				err := c.Run(cctx)
				if cctx.Err() != nil {
					return
				}
				switch c.Restart {
				case Critical:
					once.Do(func() { critErr = err; close(critical) })
					return
				case Temporary:
					if err != nil {
						log.Warn("daemon part ended", "part", c.Name, "err", err)
					}
					return
				}
				wait := restarts.Ended(clock.Since(start))
				log.Warn("daemon part ended on its own: starting it again", "part", c.Name, "err", err, "restart_in", wait.String())
				t := clock.NewTimer(wait)
				select {
				case <-cctx.Done():
					t.Stop()
					return
				case <-t.Chan():
				}
			}
		}()
	}
	if s.Started != nil {
		s.Started()
	}
	select {
	case <-ctx.Done():
	case <-critical:
	}
	if s.Stopping != nil {
		s.Stopping()
	}
	for i := len(runs) - 1; i >= 0; i-- {
		runs[i].cancel()
		<-runs[i].done
	}
	select {
	case <-critical:
		return critErr
	default:
		return nil
	}
}
