package msd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"kvmd/internal/testutil"
)

// smallFS mounts a tmpfs of size bytes for the test (the kernel's own
// full-disk errors need a real small file system): as root, which a
// test that is not gets from testutil.AsRoot.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		testutil.Missing(t, fmt.Sprintf("cannot mount a tmpfs here: %v", err))
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	return dir
}

// TestFullDisk: the storage's free space bounds an upload before it
// starts; a disk that fills after the check fails the upload with
// MsdNoSpaceError and leaves no file; so does a write that hits ENOSPC
// where the file system cannot reserve space.
func TestFullDisk(t *testing.T) {
	if testutil.AsRoot(t) {
		return
	}
	dir := smallFS(t, "1m")
	m, err := New(Config{Dir: dir, Drive: nopDrive{}})
	if err != nil {
		t.Fatal(err)
	}
	free := m.State().Storage.Parts[""].Free
	if free <= 0 || free > 1<<20 {
		t.Fatalf("free %d", free)
	}
	if _, err := m.Begin("big.img", free+1); !errors.Is(err, ErrNoSpace) {
		t.Errorf("over the free space: %v", err)
	}
	// Someone else fills the disk after the state was read.
	filler, _ := os.Create(filepath.Join(dir, "filler"))
	filler.Write(make([]byte, free-64<<10))
	filler.Close()
	if _, err := m.Begin("late.img", 512<<10); !errors.Is(err, ErrNoSpace) {
		t.Errorf("disk filled after the check: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left %d entries", len(ents))
	}
	// Without preallocation (vfat has none) the write itself fails.
	st := &storage{dir: dir, log: slog.New(slog.DiscardHandler)}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	tf := newTmpFile(f)
	_, err = copyInto(context.Background(), tf, strings.NewReader(strings.Repeat("x", 256<<10)), 0, 256<<10, func(int64) {})
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("write on a full disk: %v", err)
	}
	tf.abort()
	if err := st.removeIncomplete(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left %d entries", len(ents))
	}
}

// nopDrive is a LUN that is there and holds nothing.
type nopDrive struct{}

func (nopDrive) Present() bool          { return true }
func (nopDrive) Get() (LUNState, error) { return LUNState{}, nil }
func (nopDrive) SetRO(bool) error       { return nil }
func (nopDrive) SetCDROM(bool) error    { return nil }
func (nopDrive) SetFile(string) error   { return nil }
func (nopDrive) Eject() error           { return nil }
