package streamer

import (
	"sync"
	"testing"
	"time"
)

// TestPreviewsShared: previews asked for at once of one picture (each
// request's own snapshot, with the same bytes) are one scaling; previews
// of different pictures are scaled side by side, not one at a time (300
// took 20 s).
func TestPreviewsShared(t *testing.T) {
	s := &Streamer{}
	c := &s.preview
	c.slots = make(chan struct{}, 2)
	entered := make(chan []byte, 16)
	release := make(chan struct{})
	c.scale = func(data []byte, w, h, q int) ([]byte, error) {
		entered <- data
		<-release
		return append([]byte("preview of "), data...), nil
	}
	snap := func(data string) *Snapshot {
		return &Snapshot{Width: 100, Height: 100, Data: []byte(data)}
	}

	// Ten at once of one picture.
	var wg sync.WaitGroup
	results := make([][]byte, 10)
	for i := range results {
		wg.Go(func() {
			data, err := s.Preview(snap("picture A"), 20, 20, 80)
			if err != nil {
				t.Error(err)
			}
			results[i] = data
		})
	}
	<-entered
	time.Sleep(50 * time.Millisecond) // the others find it being made
	close(release)
	wg.Wait()
	for _, r := range results {
		if string(r) != "preview of picture A" {
			t.Fatalf("a preview: %q", r)
		}
	}
	if n := c.scaled.Load(); n != 1 {
		t.Errorf("%d scalings for ten previews of one picture", n)
	}
	// Asked again: the last one.
	if data, _ := s.Preview(snap("picture A"), 20, 20, 80); string(data) != "preview of picture A" || c.scaled.Load() != 1 {
		t.Errorf("the same preview again: %q after %d scalings", data, c.scaled.Load())
	}

	// Two pictures: both scalings run at once.
	release = make(chan struct{})
	for _, p := range []string{"picture B", "picture C"} {
		wg.Go(func() { s.Preview(snap(p), 20, 20, 80) })
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case d := <-entered:
			got[string(d)] = true
		case <-time.After(2 * time.Second):
			t.Fatalf("scaled one at a time: only %v began", got)
		}
	}
	close(release)
	wg.Wait()
	if len(got) != 2 {
		t.Errorf("began: %v", got)
	}
}
