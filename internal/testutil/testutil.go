// Package testutil holds the few helpers that tests of several packages
// share: a buffer a child process and a test may use at once, and a free
// loopback address.
package testutil

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads (a
// process's output read by a test while it runs).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a loopback host:port whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
