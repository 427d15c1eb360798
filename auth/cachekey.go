package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
)

// A cacheKeyer turns a user and password into the key under which a
// successful check is remembered (Users' and External's caches): an
// HMAC-SHA256 under a random secret that never leaves the process, so a
// cache holds neither passwords nor anything to test guesses against.
type cacheKeyer []byte

// newCacheKeyer returns a cacheKeyer with a fresh secret.
func newCacheKeyer() (cacheKeyer, error) {
	k := make(cacheKeyer, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// key returns the cache key of user and passwd.
func (k cacheKeyer) key(user, passwd string) [32]byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(passwd))
	var sum [32]byte
	m.Sum(sum[:0])
	return sum
}
