package auth

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

func TestRecentFailuresRing(t *testing.T) {
	var r recentFailures
	t0 := time.Date(2026, 1, 2, 3, 0, 30, 0, time.UTC)
	r.add(t0)
	r.add(t0.Add(10 * time.Second))
	r.add(t0.Add(30 * time.Minute))
	r.add(t0.Add(59 * time.Minute))
	now := t0.Add(59 * time.Minute)
	for _, tc := range []struct {
		since time.Time
		want  int
	}{
		{now.Add(-time.Hour), 4},
		{t0.Add(time.Minute), 2},
		{now, 1},
		{now.Add(time.Minute), 0},
	} {
		if got := r.since(tc.since); got != tc.want {
			t.Errorf("since(%v) = %d, want %d", tc.since.Sub(t0), got, tc.want)
		}
	}
	// An hour on, the first minute's slot is reused: its two are gone.
	r.add(t0.Add(time.Hour))
	if got := r.since(t0.Add(-time.Hour)); got != 3 {
		t.Errorf("after the slot's reuse: %d, want 3", got)
	}
}

// TestFailuresSince: every failure counts, a wrong password, a forged
// session and an unknown API token alike; a success does not.
func TestFailuresSince(t *testing.T) {
	a := newTestAuthenticator(t)
	ctx := context.Background()
	start := time.Now()
	a.Password(ctx, "admin", "secret", MethodBasic, netip.MustParseAddr("192.0.2.1"))
	a.Password(ctx, "admin", "wrong", MethodHeader, netip.MustParseAddr("192.0.2.2"))
	a.Password(ctx, "nobody", "wrong", MethodBasic, netip.MustParseAddr("192.0.2.3"))
	a.Session("0000000000000000000000000000000000000000000000000000000000000000", netip.MustParseAddr("192.0.2.4"))
	a.Token(TokenPrefix+"0000000000000000000000000000000000000000000000000000000000000000", netip.MustParseAddr("192.0.2.5"))
	if n := a.FailuresSince(start.Add(-time.Hour)); n != 4 {
		t.Errorf("FailuresSince = %d, want 4", n)
	}
	if n := a.FailuresSince(start.Add(2 * time.Minute)); n != 0 {
		t.Errorf("FailuresSince(later) = %d, want 0", n)
	}
}
