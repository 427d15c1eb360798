package auth

import "testing"

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
