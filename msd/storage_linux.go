package msd

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const wOK = unix.W_OK

func access(path string, mode uint32) error { return unix.Access(path, mode) }

// statFS is the size of the file system holding dir and the space free
// for this daemon (not root's reserve), as kvmd reads them (statvfs's
// f_blocks, f_bavail and f_frsize).
func statFS(dir string) (Part, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Part{}, err
	}
	bs := int64(st.Frsize)
	if bs == 0 {
		bs = int64(st.Bsize)
	}
	return Part{Size: int64(st.Blocks) * bs, Free: int64(st.Bavail) * bs}, nil
}

// preallocate reserves size bytes for f where the file system can
// (ext4, xfs, btrfs; not vfat), keeping its size at 0: a disk too full
// fails now, not half-way.
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return nil
	}
	return err
}

// startWriteback hands a range of f to the disk without waiting.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// waitWriteback waits for a range of f to be on disk, then drops it from
// the page cache.
func waitWriteback(f *os.File, off, n int64) {
	fd := int(f.Fd())
	_ = unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	_ = unix.Fadvise(fd, off, n, unix.FADV_DONTNEED)
}

// renameNoReplace renames oldpath to newpath unless newpath exists
// (ErrImageExists then). renameat2's RENAME_NOREPLACE does it in one
// step; a file system without it (EINVAL) gets a hard link and an
// unlink, and one without hard links either (vfat) a check then a
// rename, safe as this daemon is the storage's only writer.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EEXIST):
		return ErrImageExists.with(err)
	case !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSYS):
		return err
	}
	err = os.Link(oldpath, newpath)
	switch {
	case err == nil:
		return os.Remove(oldpath)
	case errors.Is(err, syscall.EEXIST):
		return ErrImageExists.with(err)
	case !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EOPNOTSUPP):
		return err
	}
	if _, err := os.Lstat(newpath); err == nil {
		return ErrImageExists
	}
	return os.Rename(oldpath, newpath)
}

// syncDir flushes a directory's entries to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
