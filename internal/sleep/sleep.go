// Package sleep waits for a while unless a context ends first, for the
// client's wait for a fresh 2FA code, kvmbench's pauses and the test
// backend's delay (auth/backend/backendtest).
package sleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, when it returns ctx.Err().
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
