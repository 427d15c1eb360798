package subsystem

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Poll is kvmd's poll_state for a state that is read: Read every Every,
// and at once when Wake fires, and publish what Changes makes of each
// reading. It is the one such loop of the daemon (the GPIO and HID states,
// the virtual media, the streamer, the info's fields).
type Poll[S, E any] struct {
	Every time.Duration
	// Clock runs the ticker; nil: the real clock.
	Clock clockwork.Clock
	// Wake, when set, makes Poll read at once (the state was told to
	// have changed).
	Wake <-chan struct{}
	// Read reads the state; a reading made as ctx ends is dropped.
	Read func(ctx context.Context) S
	// Changes returns the events for the reading cur after prev, nil at
	// the first reading and after Idle (IfChanged: cur when it differs).
	Changes func(prev *S, cur S) []E
	// Idle, when set, skips the reading while it is true (nobody
	// listens: nothing is read); the next one is a first again.
	Idle func() bool
}

// Run reads and publishes until ctx ends. The first reading is made at
// once unless Idle.
func (p Poll[S, E]) Run(ctx context.Context, publish func(E)) {
	clock := p.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	t := clock.NewTicker(p.Every)
	defer t.Stop()
	var prev *S
	for {
		if p.Idle != nil && p.Idle() {
			prev = nil
		} else {
			cur := p.Read(ctx)
			if ctx.Err() != nil {
				return
			}
			for _, ev := range p.Changes(prev, cur) {
				publish(ev)
			}
			prev = &cur
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-p.Wake:
		}
	}
}

// IfChanged is Poll's Changes for a state published whole when what a
// client sees of it, its JSON, changed; nothing at the first reading.
func IfChanged[T any](prev *T, cur T) []T {
	if prev == nil {
		return nil
	}
	a, aerr := json.Marshal(*prev)
	b, berr := json.Marshal(cur)
	if aerr == nil && berr == nil && bytes.Equal(a, b) {
		return nil
	}
	return []T{cur}
}

// sinkQueue is how many changes a Sink keeps while no Watch runs.
const sinkQueue = 64

// Sink hands the changes its owner tells as they happen (Send) to the
// publish of the Watch that runs; changes told while none runs wait for
// the next, the last sinkQueue of them. The zero value is ready.
type Sink[T any] struct {
	mu      sync.Mutex
	publish func(T)
	queue   []T
}

// Send tells a change. It never blocks on a client: the publish it calls
// (events.Hub's) queues without waiting.
func (s *Sink[T]) Send(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.publish != nil {
		s.publish(v)
		return
	}
	if len(s.queue) == sinkQueue {
		s.queue = s.queue[1:]
	}
	s.queue = append(s.queue, v)
}

// Watch publishes the changes until ctx ends, the waiting ones first.
func (s *Sink[T]) Watch(ctx context.Context, publish func(T)) {
	s.mu.Lock()
	s.publish = publish
	for _, v := range s.queue {
		publish(v)
	}
	s.queue = nil
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.publish = nil
	s.mu.Unlock()
}
