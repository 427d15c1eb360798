package backoff

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestDelay(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 60: 30 * time.Second} {
		if got := Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
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
