package auth

import (
	"net/netip"
	"testing"
	"time"
)

func TestLimiterBackoff(t *testing.T) {
	l := NewLimiter()
	a := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1_700_000_000, 0)
	want := []time.Duration{0, 0, 0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := l.Failure(a, now); got != w {
			t.Fatalf("failure %d: blocked %s, want %s", i+1, got, w)
		}
		if got := l.Blocked(a, now); got != w {
			t.Fatalf("after failure %d: Blocked %s, want %s", i+1, got, w)
		}
	}
	if got := l.Blocked(a, now.Add(8*time.Second)); got != 0 {
		t.Errorf("block outlived its 8 s: %s left", got)
	}
	for range 40 {
		l.Failure(a, now)
	}
	if got := l.Blocked(a, now); got != l.Max {
		t.Errorf("after many failures: %s, want the cap %s", got, l.Max)
	}
	l.Success(a)
	if got := l.Blocked(a, now); got != 0 {
		t.Errorf("after a success: %s, want 0", got)
	}
}

func TestLimiterForgets(t *testing.T) {
	l := NewLimiter()
	a := netip.MustParseAddr("192.0.2.1")
	now := time.Unix(1_700_000_000, 0)
	for range 5 {
		l.Failure(a, now)
	}
	if got := l.Failure(a, now.Add(l.Forget+time.Second)); got != 0 {
		t.Errorf("a failure after a quiet hour blocks for %s: the old ones were not forgotten", got)
	}
}

func TestLimiterKeys(t *testing.T) {
	l := NewLimiter()
	now := time.Unix(1_700_000_000, 0)
	block := func(s string) {
		for range 6 {
			l.Failure(netip.MustParseAddr(s), now)
		}
	}
	block("2001:db8:1:2:aaaa::1")
	block("198.51.100.7")
	tests := []struct {
		addr    string
		blocked bool
	}{
		{"2001:db8:1:2:bbbb::9", true}, // same /64
		{"2001:db8:1:3::1", false},     // next /64
		{"198.51.100.7", true},         // same v4 address
		{"::ffff:198.51.100.7", true},  // v4-mapped is the same host
		{"198.51.100.8", false},        // v4 neighbours are other hosts
		{"2001:db8:1:2:aaaa::1", true}, // the guesser itself
		{"2001:db8:ffff:2:aaaa::1", false},
	}
	for _, tt := range tests {
		if got := l.Blocked(netip.MustParseAddr(tt.addr), now) > 0; got != tt.blocked {
			t.Errorf("%s: blocked %v, want %v", tt.addr, got, tt.blocked)
		}
	}
	if l.Blocked(netip.Addr{}, now) > 0 {
		t.Error("local peers blocked by others' failures")
	}
}

func TestLimiterBounded(t *testing.T) {
	l := NewLimiter()
	l.Size = 100
	now := time.Unix(1_700_000_000, 0)
	guesser := netip.MustParseAddr("203.0.113.9")
	for range 6 {
		l.Failure(guesser, now)
	}
	// A spray of single failures from many addresses.
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.Failure(a, now)
	}
	if n := len(l.m); n > l.Size {
		t.Errorf("%d addresses remembered, bound is %d", n, l.Size)
	}
	if l.Blocked(guesser, now) == 0 {
		t.Error("the spray freed the blocked guesser")
	}
}
