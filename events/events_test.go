package events

import "testing"

func TestPublishDropsFullSubscriber(t *testing.T) {
	var h Hub
	slow, fast := h.Subscribe(), h.Subscribe()
	for i := range QueueLen + 1 {
		h.Publish("atx", map[string]int{"n": i})
		<-fast.C // fast keeps up
	}
	select {
	case <-slow.Dropped:
	default:
		t.Fatal("a subscriber with a full queue was not dropped")
	}
	select {
	case <-fast.Dropped:
		t.Fatal("the subscriber that kept up was dropped")
	default:
	}
	if n := h.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
	if got := string(<-slow.C); got != `{"event_type":"atx","event":{"n":0}}` {
		t.Errorf("first queued event %s", got)
	}
	h.Unsubscribe(fast)
	h.Unsubscribe(slow) // already gone: no effect
	if n := h.Len(); n != 0 {
		t.Errorf("Len = %d after unsubscribing, want 0", n)
	}
}
