package auth

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestLoginUnderFlood: 48 addresses send wrong passwords as fast as they
// are answered, two at a time each; a real login from another address
// must not wait for their queue. With first come first served it waited
// for about half the queue's hashes (a core each): 2.4 to 6.4 s on a
// device with cost-10 hashes. make bench measures the same over HTTP.
func TestLoginUnderFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of slow hashes")
	}
	path := filepath.Join(t.TempDir(), "htpasswd")
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), 6)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "admin:"+string(h)+"\n")
	users, err := OpenUsers(path, testLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	a := New(users, nil, &Sessions{Max: 100}, NewLimiter(), testLogger(nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One hash's time here, from a login with nothing else running.
	login := func(src netip.Addr) time.Duration {
		users.cacheMu.Lock()
		clear(users.cache) // a real hash, as for a login after a restart
		users.cacheMu.Unlock()
		start := time.Now()
		if _, _, err := a.Login(ctx, "admin", "secret", 0, src); err != nil {
			t.Fatalf("login from %s: %v", src, err)
		}
		return time.Since(start)
	}
	hash := login(netip.MustParseAddr("198.51.100.1"))
	for i := range 2 {
		hash = min(hash, login(netip.MustParseAddr("198.51.100."+string(rune('2'+i)))))
	}

	var wg sync.WaitGroup
	var hashed atomic.Int64
	for i := range 48 {
		src := netip.AddrFrom4([4]byte{203, 0, 113, byte(i + 1)})
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					err := a.Password(ctx, "admin", "wrong", MethodLogin, src)
					var rl *RateLimitedError
					if errors.As(err, &rl) {
						time.Sleep(10 * time.Millisecond) // a refusal costs the client a round trip
						continue
					}
					hashed.Add(1)
				}
			})
		}
	}
	// A sustained flood: every flooding address has failed at least
	// once. Before that (its first round), nothing tells a flooder from a
	// user, and the login waits its turn among them.
	for deadline := time.Now().Add(time.Minute); hashed.Load() < 2*48 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	took := login(netip.MustParseAddr("198.51.100.50"))
	cancel()
	wg.Wait()
	t.Logf("one hash %v; a login under the flood %v; %d wrong passwords hashed", hash, took, hashed.Load())
	if took > 10*hash+50*time.Millisecond {
		t.Errorf("a login under a 48-address flood took %v, %.0f hashes' time", took, float64(took)/float64(hash))
	}
}

// TestHashGateOrder: the address with the fewest failures goes first,
// first come first served among equals; one address has one request at
// the gate at a time, and its next one is looked at again (admit) when
// its turn comes.
func TestHashGateOrder(t *testing.T) {
	g := newHashGate(1)
	ctx := context.Background()
	hold, err := g.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	ask := func(name string, k netip.Prefix, rank int, admit func() error) {
		wg.Go(func() {
			release, err := g.acquire(withTurn(ctx, &turn{key: k, rank: func() int { return rank }, admit: admit}))
			mu.Lock()
			if err != nil {
				order = append(order, name+" refused")
			} else {
				order = append(order, name)
			}
			mu.Unlock()
			if err == nil {
				release()
			}
		})
		time.Sleep(20 * time.Millisecond) // arrive in this order
	}
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	var blocked atomic.Bool
	ask("flood1", p("203.0.113.1/32"), 3, nil)
	ask("flood2", p("203.0.113.2/32"), 5, nil)
	ask("flood1-again", p("203.0.113.1/32"), 0, func() error {
		if blocked.Load() {
			return errors.New("blocked")
		}
		return nil
	})
	ask("user", p("198.51.100.1/32"), 0, nil)
	ask("flood3", p("203.0.113.3/32"), 3, nil)
	blocked.Store(true)
	hold()
	wg.Wait()
	// flood1-again's refusal comes when flood1 leaves, while flood3
	// takes the turn: the two race, so it is checked apart.
	refused := slices.Index(order, "flood1-again refused")
	if refused < 0 {
		t.Fatalf("order %q: flood1-again not refused", order)
	}
	order = slices.Delete(order, refused, refused+1)
	want := []string{"user", "flood1", "flood3", "flood2"}
	if len(order) != len(want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %q, want %q", order, want)
		}
	}
}

// TestHashGateCancel: a request that ends while waiting leaves no trace:
// the turns all come back.
func TestHashGateCancel(t *testing.T) {
	g := newHashGate(2)
	k := netip.MustParsePrefix("192.0.2.1/32")
	var releases []func()
	for range 2 {
		r, err := g.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if _, err := g.acquire(withTurn(ctx, &turn{key: k})); err == nil {
				t.Error("a turn after the request ended")
			}
		})
	}
	wg.Wait()
	for _, r := range releases {
		r()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free != 2 || g.queue.Len() != 0 || len(g.perKey) != 0 {
		t.Errorf("after the cancels: free %d, queued %d, addresses %d; want 2, 0, 0", g.free, g.queue.Len(), len(g.perKey))
	}
}

// TestHashGateReserve: with two turns, addresses with failures share one;
// the other stays for an address without failures, which gets it at once.
func TestHashGateReserve(t *testing.T) {
	g := newHashGate(2)
	ctx := context.Background()
	ranked := func(k string) context.Context {
		return withTurn(ctx, &turn{key: netip.MustParsePrefix(k), rank: func() int { return 3 }})
	}
	r1, err := g.acquire(ranked("203.0.113.1/32"))
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan func())
	go func() {
		r, err := g.acquire(ranked("203.0.113.2/32"))
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	select {
	case <-second:
		t.Fatal("a second address with failures took the turn kept for clean ones")
	case <-time.After(50 * time.Millisecond):
	}
	done := make(chan struct{})
	go func() {
		r, err := g.acquire(withTurn(ctx, &turn{key: netip.MustParsePrefix("198.51.100.1/32")}))
		if err != nil {
			t.Error(err)
		}
		r()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("an address without failures waited behind the flood")
	}
	r1()
	(<-second)()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free != 2 || g.ranked != 0 || g.queue.Len() != 0 {
		t.Errorf("after all: free %d, ranked %d, queued %d; want 2, 0, 0", g.free, g.ranked, g.queue.Len())
	}
}
