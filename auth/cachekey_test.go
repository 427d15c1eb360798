package auth

import (
	"strings"
	"testing"
)

func TestCacheKeyer(t *testing.T) {
	k1, err := newCacheKeyer()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := newCacheKeyer()
	if err != nil {
		t.Fatal(err)
	}
	first, again := k1.key("alice", "pw"), k1.key("alice", "pw")
	if first != again {
		t.Error("the same user and password give two keys")
	}
	if k1.key("alice", "pw") == k2.key("alice", "pw") {
		t.Error("two processes' secrets give the same key")
	}
	// The separator keeps where the name ends.
	if k1.key("ab", "c") == k1.key("a", "bc") {
		t.Error(`("ab", "c") and ("a", "bc") share a key`)
	}
}

// TestCacheKeyerHMAC: the key is HMAC-SHA256 of user, NUL, password,
// under the secret, whether its HMAC is new or from the pool; and a key
// costs no allocation.
func TestCacheKeyerHMAC(t *testing.T) {
	k, err := newCacheKeyer()
	if err != nil {
		t.Fatal(err)
	}
	m := k.pool.Get().(*keyHMAC)
	k.pool.Put(m)
	for _, up := range [][2]string{{"alice", "pw"}, {"bob", ""}, {"", "x"}, {"alice", strings.Repeat("p", 2000)}, {"alice", "pw"}} {
		m.mac.Reset()
		m.mac.Write([]byte(up[0] + "\x00" + up[1]))
		var want [32]byte
		m.mac.Sum(want[:0])
		if got := k.key(up[0], up[1]); got != want {
			t.Errorf("key(%q, %d bytes) = %x, want %x", up[0], len(up[1]), got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { k.key("alice", "a password") }); n != 0 {
		t.Errorf("key: %v allocations, want 0", n)
	}
}
