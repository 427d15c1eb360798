package auth

import (
	"net/netip"
	"testing"
	"time"
)

func v4(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }

// TestLimiterFullOfBlocks: a table full of live blocks evicts none of them
// (it used to clear everything, unblocking every attacker); further
// addresses share one overflow entry, which blocks too.
func TestLimiterFullOfBlocks(t *testing.T) {
	l := NewLimiter()
	l.Size, l.Free = 50, 1
	now := time.Unix(1_700_000_000, 0)
	for i := range 50 {
		l.Failure(v4(i), now)
		l.Failure(v4(i), now) // the second blocks
	}
	for i := 50; i < 60; i++ {
		now = now.Add(time.Millisecond)
		l.Failure(v4(i), now)
	}
	for i := range 50 {
		if l.Blocked(v4(i), now) == 0 {
			t.Fatalf("%s unblocked by a spray while the table was full", v4(i))
		}
	}
	if n := l.Len(); n > l.Size {
		t.Errorf("%d entries, bound %d", n, l.Size)
	}
	// The ten untracked addresses' failures went to the overflow entry:
	// past its free failure, every untracked address is blocked.
	if l.Blocked(v4(1000), now) == 0 {
		t.Error("the overflow entry did not block after ten failures")
	}
	// Once the blocks end, new addresses get entries of their own again.
	later := now.Add(l.Max + time.Second)
	l.Failure(v4(2000), later)
	if got := l.Failures(v4(2000), later); got != 1 {
		t.Errorf("a new address after the blocks ended: %d failures, want 1", got)
	}
}

// TestLimiterEvictsOldestUnblocked: when full, the entry whose last
// failure is the oldest among the unblocked goes first; blocked ones stay.
func TestLimiterEvictsOldestUnblocked(t *testing.T) {
	l := NewLimiter()
	l.Size, l.Free = 4, 2
	now := time.Unix(1_700_000_000, 0)
	tick := func() time.Time { now = now.Add(time.Second); return now }
	blocked := v4(1)
	for range 3 {
		l.Failure(blocked, tick()) // oldest of all, but blocked for a long time
	}
	l.Max, l.Base = time.Hour, time.Hour
	l.Failure(blocked, tick())
	l.Failure(v4(2), tick()) // oldest unblocked
	l.Failure(v4(3), tick())
	l.Failure(v4(4), tick())
	l.Failure(v4(2), tick()) // v4(2) is now the newest; v4(3) the oldest unblocked
	l.Failure(v4(5), tick())
	for _, tt := range []struct {
		a    netip.Addr
		want int
	}{{blocked, 4}, {v4(2), 2}, {v4(3), 0}, {v4(4), 1}, {v4(5), 1}} {
		if got := l.Failures(tt.a, now); got != tt.want {
			t.Errorf("%s: %d failures remembered, want %d", tt.a, got, tt.want)
		}
	}
	if l.Blocked(blocked, now) == 0 {
		t.Error("the blocked address was evicted")
	}
}

// TestLimiterMemoryBounded: a spray of a million IPv6 /64s and IPv4
// addresses keeps the table at its bound, and a blocked /64 stays blocked.
func TestLimiterMemoryBounded(t *testing.T) {
	l := NewLimiter()
	l.Size = 1000
	now := time.Unix(1_700_000_000, 0)
	guesser := netip.MustParseAddr("2001:db8:aaaa:bbbb::1")
	for range 6 {
		l.Failure(guesser, now)
	}
	for i := range 200_000 {
		var b [16]byte
		b[0], b[1], b[4], b[5], b[6], b[7] = 0x20, 0x01, byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		b[15] = byte(i) // hosts of one /64 count as one
		l.Failure(netip.AddrFrom16(b), now)
		l.Failure(v4(i), now)
		if l.Len() > l.Size {
			t.Fatalf("after %d addresses: %d entries, bound %d", i, l.Len(), l.Size)
		}
	}
	// Another host of the guesser's /64 is the guesser.
	if l.Blocked(netip.MustParseAddr("2001:db8:aaaa:bbbb:ffff::2"), now) == 0 {
		t.Error("the blocked /64 was freed by the spray")
	}
}
