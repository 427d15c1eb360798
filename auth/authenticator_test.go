package auth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

func newTestAuthenticator(t testing.TB) *Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\n")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	users, err := OpenUsers(path, log)
	if err != nil {
		t.Fatal(err)
	}
	lim := NewLimiter()
	lim.Free = 1
	return New(users, nil, &Sessions{Max: 10}, lim, log)
}

// TestCounts checks that every decision is counted once, under its
// method and result, and that Counts lists every combination in order.
func TestCounts(t *testing.T) {
	a := newTestAuthenticator(t)
	ctx := context.Background()
	here, there := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")

	a.Password(ctx, "admin", "secret", MethodBasic, here)
	a.Password(ctx, "admin", "secret", MethodBasic, here) // cached: counted all the same
	a.Password(ctx, "admin", "wrong", MethodHeader, there)
	a.Password(ctx, "admin", "wrong", MethodHeader, there) // blocks there
	a.Password(ctx, "admin", "secret", MethodHeader, there)
	token, _, err := a.Login(ctx, "admin", "secret", 0, here)
	if err != nil {
		t.Fatal(err)
	}
	a.Session(token, here)
	other := token[:63] + "0"
	if other == token {
		other = token[:63] + "1"
	}
	a.Session(other, here)
	a.Peer()
	if n := a.ActiveSessions(); n != 1 {
		t.Errorf("ActiveSessions() = %d, want 1", n)
	}

	// A request that ends while waiting for a slow-hash turn.
	for a.Users.slow.free > 0 {
		if _, err := a.Users.slow.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Password(ended, "admin", "other", MethodLogin, here); !errors.Is(err, ErrUnavailable) {
		t.Errorf("ended request: %v, want ErrUnavailable", err)
	}

	want := map[Method][numResults]uint64{
		MethodHeader: {0, 2, 1, 0},
		MethodCookie: {1, 1, 0, 0},
		MethodBasic:  {2, 0, 0, 0},
		MethodPeer:   {1, 0, 0, 0},
		MethodLogin:  {1, 0, 0, 1},
	}
	counts := a.Counts()
	const nr = int(numResults)
	if len(counts) != len(Methods)*nr {
		t.Fatalf("%d counts, want %d", len(counts), len(Methods)*nr)
	}
	for i, c := range counts {
		if m, r := Methods[i/nr], Result(i%nr); c.Method != m || c.Result != r {
			t.Errorf("count %d is %s/%s, want %s/%s", i, c.Method, c.Result, m, r)
		}
		if c.N != want[c.Method][c.Result] {
			t.Errorf("%s/%s = %d, want %d", c.Method, c.Result, c.N, want[c.Method][c.Result])
		}
	}
	for r, s := range map[Result]string{ResultOK: "ok", ResultFailed: "failed", ResultBlocked: "blocked", ResultUnavailable: "unavailable", 7: "Result(7)"} {
		if r.String() != s {
			t.Errorf("Result(%d).String() = %q, want %q", r, r.String(), s)
		}
	}
}

func TestSessionsLive(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := &Sessions{Idle: time.Minute, Max: 10}
	s.New("a", 0, now)
	s.New("b", 0, now.Add(30*time.Second))
	if n := s.Live(now.Add(45 * time.Second)); n != 2 {
		t.Errorf("Live = %d, want 2", n)
	}
	if n := s.Live(now.Add(75 * time.Second)); n != 1 {
		t.Errorf("Live after a's idle timeout = %d, want 1 (Len %d)", n, s.Len())
	}
}

// BenchmarkSession is the hot path of a cookie request, counter included;
// BenchmarkCount is the counter alone, from every core at once.
func BenchmarkSession(b *testing.B) {
	a := newTestAuthenticator(b)
	token, _, err := a.Login(context.Background(), "admin", "secret", 0, netip.Addr{})
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Session(token, netip.Addr{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCount(b *testing.B) {
	var c counters
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.add(MethodCookie, ResultOK)
		}
	})
}
