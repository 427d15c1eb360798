package subsystem

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// counter is a subsystem whose state is a number, told through a Sink.
type counter struct {
	n       atomic.Int64
	changes Sink[int64]
}

func (c *counter) Name() string                                   { return "counter" }
func (c *counter) State(context.Context) int64                    { return c.n.Load() }
func (c *counter) Watch(ctx context.Context, publish func(int64)) { c.changes.Watch(ctx, publish) }
func (c *counter) set(n int64) {
	c.n.Store(n)
	c.changes.Send(n)
}

// greeter is a counter that greets with two events.
type greeter struct{ counter }

func (g *greeter) Greeting(context.Context) []int64 { return []int64{-1, g.n.Load()} }

// events records what a Publisher was given.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Publish(typ string, ev any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf("%s=%v", typ, ev))
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

// TestOf: the registry's form keeps the name, the state and the changes,
// and greets with the State, or the Greeter's events.
func TestOf(t *testing.T) {
	c := &counter{}
	c.n.Store(3)
	s := Of[int64](c)
	if s.Name() != "counter" || s.State(context.Background()) != int64(3) {
		t.Errorf("name %q state %v", s.Name(), s.State(context.Background()))
	}
	if g := s.Greeting(context.Background()); !slices.Equal(g, []any{int64(3)}) {
		t.Errorf("greeting %v, want the state", g)
	}
	g := &greeter{}
	g.n.Store(4)
	if got := Of[int64](g).Greeting(context.Background()); !slices.Equal(got, []any{int64(-1), int64(4)}) {
		t.Errorf("greeter's greeting %v", got)
	}

	// Changes told before the watcher runs wait for it; then each one
	// is published as it is told, as an event of the subsystem's name.
	c.set(5)
	ev := &events{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Watch(ctx, s, ev) }()
	eventually(t, "the waiting change", func() bool { return len(ev.list()) == 1 })
	c.set(6)
	c.set(7)
	eventually(t, "two more", func() bool { return len(ev.list()) == 3 })
	cancel()
	<-done
	if got, want := ev.list(), []string{"counter=5", "counter=6", "counter=7"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestSinkQueue: with no watcher, only the last sinkQueue changes wait.
func TestSinkQueue(t *testing.T) {
	var s Sink[int]
	for i := range sinkQueue + 10 {
		s.Send(i)
	}
	var got []int
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Watch(ctx, func(v int) { got = append(got, v) })
	if len(got) != sinkQueue || got[0] != 10 || got[len(got)-1] != sinkQueue+9 {
		t.Errorf("%d waiting changes from %v to %v, want %d from 10", len(got), got[0], got[len(got)-1], sinkQueue)
	}
	s.Send(1) // after the watcher: waits again
	if len(s.queue) != 1 {
		t.Errorf("a change after the watcher ended: %d waiting, want 1", len(s.queue))
	}
}

// TestPoll: the first reading is no event; one that differs is, one that
// does not is not; Wake reads at once; while Idle nothing is read, and
// the reading after it is a first again; a reading made as ctx ends is
// dropped.
func TestPoll(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var state, reads atomic.Int64
	var idle atomic.Bool
	wake := make(chan struct{}, 1)
	got := make(chan int64, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p := Poll[int64, int64]{Every: time.Second, Clock: clock, Wake: wake, Changes: IfChanged[int64],
		Read: func(context.Context) int64 { reads.Add(1); return state.Load() },
		Idle: idle.Load}
	go func() { defer close(done); p.Run(ctx, func(v int64) { got <- v }) }()
	eventually(t, "the first reading", func() bool { return reads.Load() == 1 })
	clock.BlockUntil(1)
	clock.Advance(time.Second)
	eventually(t, "the second reading", func() bool { return reads.Load() == 2 })
	state.Store(1)
	wake <- struct{}{}
	if v := <-got; v != 1 {
		t.Errorf("event %d, want 1", v)
	}
	idle.Store(true)
	clock.Advance(time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := reads.Load(); n != 3 {
		t.Errorf("%d readings, want 3: none while idle", n)
	}
	state.Store(2)
	idle.Store(false)
	clock.Advance(time.Second)
	eventually(t, "a reading after idle", func() bool { return reads.Load() == 4 })
	select {
	case v := <-got:
		t.Errorf("event %d after idle, want none: a first reading again", v)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	<-done
}
