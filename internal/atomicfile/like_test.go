package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWriteLike: a new file beside another takes its mode (less others')
// and, as root, its owner and group, before it is in place; an existing
// file keeps its own; without the other file, perm.
func TestWriteLike(t *testing.T) {
	dir := t.TempDir()
	like := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(like, []byte("u:h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(like, 0o644); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	const uid, gid = 4321, 8765
	if root {
		if err := os.Chown(like, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	path := like + ".roles"
	if err := WriteLike(path, []byte("u:viewer\n"), 0o600, like); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("u:viewer\n"), 0o640)
	if root {
		fi, _ := os.Stat(path)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("owner %d:%d, want the users file's %d:%d", st.Uid, st.Gid, uid, gid)
		}
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteLike(path, []byte("u:admin\n"), 0o600, like); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, []byte("u:admin\n"), 0o600)
	other := filepath.Join(dir, "x")
	if err := WriteLike(other, []byte("y"), 0o600, filepath.Join(dir, "none")); err != nil {
		t.Fatal(err)
	}
	checkFile(t, other, []byte("y"), 0o600)
}

// TestLockDir: the lock is Update's, held across writes: an Update of a
// file in the directory waits until Unlock; Remove removes.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	l, err := LockDir(path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Update(filepath.Join(dir, "g"), 0o600, func([]byte) ([]byte, error) { return []byte("g"), nil })
	}()
	select {
	case err := <-done:
		t.Fatalf("Update ran while the lock was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := Write(path, []byte("f"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Remove left %s: %v", path, err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
}
