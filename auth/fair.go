package auth

import (
	"container/heap"
	"context"
	"net/netip"
	"slices"
	"sync"
)

// hashGate hands out turns at the slow hashes, at most n at once, fairly
// across client addresses:
//
//   - one address has at most one check at the gate at a time; its other
//     requests wait behind it, and are looked at again (admit: is the
//     address blocked now?) when their turn comes, so that requests queued
//     before a block was set are refused without a hash;
//   - among the addresses waiting, the one with the fewest failures
//     remembered (rank) goes first, first come first served among equals;
//   - with two turns or more, one is kept for addresses without failures
//     (rank 0): addresses that have failed share the others.
//
// Under a flood of wrong passwords from many addresses, each flooding
// address soon has failures: they wait behind a real user, whose address
// has none, and cannot take the last turn, so a real login starts at once
// instead of waiting for the queue (first come first served made it wait
// for all of it: 2.4 to 6.4 s under 48 addresses).
type hashGate struct {
	mu     sync.Mutex
	n      int // turns in all
	free   int
	ranked int // turns held by addresses with failures
	queue  waitHeap
	seq    uint64
	perKey map[netip.Prefix]*keyLine
}

// turn says who asks for a hash: put in the context by the Authenticator.
type turn struct {
	key   netip.Prefix
	rank  func() int   // lower goes first
	admit func() error // a refusal now, before the hash
}

type turnKey struct{}

func withTurn(ctx context.Context, t *turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

// keyLine is one address's requests: the one at the gate, and the others
// in order.
type keyLine struct {
	busy    bool
	waiters []*waiter
}

type waiter struct {
	ranked  bool // holds, or will hold, a turn counted in hashGate.ranked
	rank    int
	seq     uint64
	index   int           // in the heap; -1 when not in it
	ready   chan struct{} // closed when the turn is given
	granted bool
}

func newHashGate(n int) *hashGate {
	return &hashGate{n: n, free: n, perKey: map[netip.Prefix]*keyLine{}}
}

// mayTake reports whether a request of rank may take a free turn now.
// g.mu must be held.
func (g *hashGate) mayTake(rank int) bool {
	return g.free > 0 && (rank == 0 || g.n < 2 || g.ranked < g.n-1)
}

// acquire waits for a turn. It returns the function that gives the turn
// back, or ctx's error, or admit's refusal.
func (g *hashGate) acquire(ctx context.Context) (release func(), err error) {
	t, _ := ctx.Value(turnKey{}).(*turn)
	if t != nil {
		if err := g.enterKey(ctx, t.key); err != nil {
			return nil, err
		}
		if t.admit != nil {
			if err := t.admit(); err != nil {
				g.leaveKey(t.key)
				return nil, err
			}
		}
	}
	rank := 0
	if t != nil && t.rank != nil {
		rank = t.rank()
	}
	if err := g.enterSlot(ctx, rank); err != nil {
		if t != nil {
			g.leaveKey(t.key)
		}
		return nil, err
	}
	return func() {
		g.leaveSlot(rank > 0)
		if t != nil {
			g.leaveKey(t.key)
		}
	}, nil
}

// enterKey waits until no other request of the address is at the gate.
func (g *hashGate) enterKey(ctx context.Context, k netip.Prefix) error {
	g.mu.Lock()
	line := g.perKey[k]
	if line == nil {
		line = &keyLine{}
		g.perKey[k] = line
	}
	if !line.busy {
		line.busy = true
		g.mu.Unlock()
		return nil
	}
	w := &waiter{ready: make(chan struct{}), index: -1}
	line.waiters = append(line.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		g.mu.Unlock()
		g.leaveKey(k) // handed over meanwhile: pass it on
	} else {
		line.waiters = slices.DeleteFunc(line.waiters, func(x *waiter) bool { return x == w })
		g.mu.Unlock()
	}
	return ctx.Err()
}

// leaveKey hands the address's place at the gate to its next request.
func (g *hashGate) leaveKey(k netip.Prefix) {
	g.mu.Lock()
	defer g.mu.Unlock()
	line := g.perKey[k]
	if line == nil {
		return
	}
	if len(line.waiters) == 0 {
		delete(g.perKey, k)
		return
	}
	w := line.waiters[0]
	line.waiters = line.waiters[1:]
	w.granted = true
	close(w.ready)
}

// enterSlot waits for one of the n turns, by rank.
func (g *hashGate) enterSlot(ctx context.Context, rank int) error {
	g.mu.Lock()
	if g.mayTake(rank) && (g.queue.Len() == 0 || rank < g.queue[0].rank) {
		g.take(rank > 0)
		g.mu.Unlock()
		return nil
	}
	g.seq++
	w := &waiter{rank: rank, ranked: rank > 0, seq: g.seq, ready: make(chan struct{})}
	heap.Push(&g.queue, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	granted := w.granted
	if !granted {
		heap.Remove(&g.queue, w.index)
	}
	g.mu.Unlock()
	if granted {
		g.leaveSlot(w.ranked)
	}
	return ctx.Err()
}

// take counts a turn taken. g.mu must be held.
func (g *hashGate) take(ranked bool) {
	g.free--
	if ranked {
		g.ranked++
	}
}

// leaveSlot gives a turn back, and hands it to the first waiter that may
// take it: the turn kept for addresses without failures stays free when
// only addresses with failures wait.
func (g *hashGate) leaveSlot(ranked bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.free++
	if ranked {
		g.ranked--
	}
	for g.queue.Len() > 0 && g.mayTake(g.queue[0].rank) {
		w := heap.Pop(&g.queue).(*waiter)
		g.take(w.ranked)
		w.granted = true
		close(w.ready)
	}
}

// waitHeap orders waiters by rank, then arrival.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].seq < h[j].seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
