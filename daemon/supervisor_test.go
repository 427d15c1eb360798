package daemon

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"kvmd/internal/testutil"

	"github.com/jonboulle/clockwork"
)

// eventLog records what the children did, in order.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (j *eventLog) add(e string) {
	j.mu.Lock()
	j.events = append(j.events, e)
	j.mu.Unlock()
}

func (j *eventLog) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// waitFor waits until the eventLog holds e.
func (j *eventLog) waitFor(t *testing.T, e string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(j.list(), e) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 5 s: %q", e, j.list())
		}
		time.Sleep(time.Millisecond)
	}
}

// worker is a child that runs until its context ends; it takes a while
// to stop, so that a stop not waited for shows in the order.
func worker(j *eventLog, name string) Child {
	return Child{Name: name, Run: func(ctx context.Context) error {
		j.add("start " + name)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		j.add("stop " + name)
		return nil
	}}
}

// TestSupervisorOrder: the children start in the order they were added,
// Started comes after them all, and they stop in the reverse order, each
// only once the one after it has returned.
func TestSupervisorOrder(t *testing.T) {
	j := &eventLog{}
	s := &Supervisor{Started: func() { j.add("started") }, Stopping: func() { j.add("stopping") }}
	for _, n := range []string{"a", "b", "c"} {
		s.Add(worker(j, n))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	j.waitFor(t, "start c")
	j.waitFor(t, "started")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := j.list()
	// The goroutines start in order; they may log their start in any.
	starts := slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(got), func(e string) bool { return len(e) < 6 || e[:6] != "start " })))
	if want := []string{"start a", "start b", "start c"}; !slices.Equal(starts, want) {
		t.Errorf("starts %q, want %q", starts, want)
	}
	i := slices.Index(got, "stopping")
	if want := []string{"stopping", "stop c", "stop b", "stop a"}; i < 0 || !slices.Equal(got[i:], want) {
		t.Errorf("events %q, want them to end with %q", got, want)
	}
}

// TestSupervisorRestart: a Permanent child that ends on its own is started
// again after 1 s, then 2 s (on the supervisor's clock); a Temporary one
// is not.
func TestSupervisorRestart(t *testing.T) {
	clock := clockwork.NewFakeClock()
	j := &eventLog{}
	runs := 0
	s := &Supervisor{Clock: clock}
	s.Add(Child{Name: "once", Restart: Temporary, Run: func(ctx context.Context) error {
		j.add("once")
		return errors.New("done")
	}})
	s.Add(Child{Name: "flaky", Run: func(ctx context.Context) error {
		runs++
		j.add("run " + string(rune('0'+runs)))
		if runs < 3 {
			return errors.New("broke")
		}
		<-ctx.Done()
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	j.waitFor(t, "run 1")
	for n, wait := range []time.Duration{time.Second, 2 * time.Second} {
		testutil.BlockUntil(t, clock, 1)
		clock.Advance(wait - time.Millisecond)
		time.Sleep(10 * time.Millisecond)
		next := "run " + string(rune('2'+n))
		if slices.Contains(j.list(), next) {
			t.Fatalf("%s before %v", next, wait)
		}
		clock.Advance(time.Millisecond)
		j.waitFor(t, next)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := slices.Index(j.list(), "once"); n < 0 || slices.Contains(j.list()[n+1:], "once") {
		t.Errorf("the Temporary child ran other than once: %q", j.list())
	}
}

// TestSupervisorCritical: a Critical child that returns stops the others,
// last to first, and Run returns its error.
func TestSupervisorCritical(t *testing.T) {
	j := &eventLog{}
	failed := errors.New("listener closed")
	s := &Supervisor{}
	s.Add(worker(j, "a"))
	s.Add(worker(j, "b"))
	s.Add(Child{Name: "http", Restart: Critical, Run: func(ctx context.Context) error {
		j.add("start http")
		return failed
	}})
	s.Add(worker(j, "c"))
	err := s.Run(context.Background())
	if !errors.Is(err, failed) {
		t.Fatalf("Run: %v, want %v", err, failed)
	}
	got := j.list()
	if want := []string{"stop c", "stop b", "stop a"}; !slices.Equal(got[len(got)-3:], want) {
		t.Errorf("events %q, want them to end with %q", got, want)
	}
}
