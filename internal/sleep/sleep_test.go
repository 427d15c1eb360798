package sleep

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Errorf("For: %v", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("For(20ms) returned after %v", took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := For(ctx, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("For with a context ending: %v, want %v", err, context.DeadlineExceeded)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("For(1 min) with a 10 ms context returned after %v", took)
	}

}
