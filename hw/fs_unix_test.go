//go:build unix

package hw

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadFileOneRead reads a file whose writer never closes it, as a
// driver that never reports EOF: ReadFile must return what one read gives
// rather than wait for an end that does not come.
func TestReadFileOneRead(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "get_throttled")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	release := make(chan struct{})
	defer close(release)
	go func() {
		w, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		w.Write([]byte("50000\n"))
		<-release // no EOF until the test ends
	}()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := New(root).ReadFile("get_throttled")
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil || string(r.b) != "50000\n" {
			t.Errorf("ReadFile = %q, %v; want %q", r.b, r.err, "50000\n")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile waited for an EOF the writer never sent")
	}
}
