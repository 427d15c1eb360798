package backoff

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestDelay(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// TestBackoff: failures in a row double the wait; a run that lasted
// Stable, or Reset, starts again from Initial.
func TestBackoff(t *testing.T) {
	var b Backoff
	for i, c := range []struct {
		ran  time.Duration
		want time.Duration
	}{
		{0, time.Second},
		{time.Second, 2 * time.Second},
		{Stable - time.Millisecond, 4 * time.Second},
		{Stable, time.Second},
		{0, 2 * time.Second},
	} {
		if got := b.Ended(c.ran); got != c.want {
			t.Errorf("end %d after %v: wait %v, want %v", i, c.ran, got, c.want)
		}
	}
	b.Reset()
	if got := b.Ended(0); got != time.Second {
		t.Errorf("after Reset: wait %v, want 1s", got)
	}
}

func TestTimer(t *testing.T) {
	var tm Timer
	if tm.Set() || tm.C() != nil {
		t.Fatal("the zero Timer is set")
	}
	c := clockwork.NewFakeClock()
	tm.Start(c, time.Second)
	if !tm.Set() {
		t.Fatal("not set after Start")
	}
	c.Advance(time.Second)
	select {
	case <-tm.C():
		tm.Fired()
	case <-time.After(time.Second):
		t.Fatal("did not fire")
	}
	if tm.Set() {
		t.Error("set after it fired")
	}
	tm.Start(c, time.Second)
	tm.Stop()
	if tm.Set() || tm.C() != nil {
		t.Error("set after Stop")
	}
}
