package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"hash"
	"sync"
)

// A cacheKeyer turns a user and password into the key under which a
// successful check is remembered (Users' and External's caches): an
// HMAC-SHA256 under a random secret that never leaves the process, so a
// cache holds neither passwords nor anything to test guesses against.
//
// Every request with a password (X-KVMD-User, Basic) makes a key, so the
// HMACs, keyed once, are kept in a pool with a buffer for their input:
// Reset takes an HMAC back to its keyed state without hashing the key
// again, and a key costs no allocation.
type cacheKeyer struct {
	pool *sync.Pool // of *keyHMAC
}

type keyHMAC struct {
	mac hash.Hash
	in  []byte
	out [32]byte
}

// newCacheKeyer returns a cacheKeyer with a fresh secret.
func newCacheKeyer() (cacheKeyer, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return cacheKeyer{}, err
	}
	return cacheKeyer{pool: &sync.Pool{New: func() any {
		return &keyHMAC{mac: hmac.New(sha256.New, secret)}
	}}}, nil
}

// key returns the cache key of user and passwd.
func (k cacheKeyer) key(user, passwd string) [32]byte {
	m := k.pool.Get().(*keyHMAC)
	m.mac.Reset()
	m.in = append(append(append(m.in[:0], user...), 0), passwd...)
	m.mac.Write(m.in)
	m.mac.Sum(m.out[:0])
	sum := m.out
	clear(m.in) // no password left in the pool
	if cap(m.in) <= 1<<10 {
		k.pool.Put(m)
	}
	return sum
}
