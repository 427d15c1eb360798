// Package atomicfile replaces small configuration files so that a reader
// sees either the old content or the new, never a mix, and a crash or power
// cut (common on appliances that are simply unplugged) never leaves a
// truncated file behind. Update adds a lock so that concurrent editors of the
// same file do not lose each other's changes.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Write replaces the file at path with data: it writes a temporary file in
// the same directory, flushes it to disk, gives it its mode, renames it over
// path and flushes the directory. A new file gets mode perm. When path
// already exists, the new file keeps its mode, less any permission for
// others, and its owner and group if the process is allowed to set them, so
// that root editing a file the service reads (owned by the service user, or
// root:kvmd 0640) leaves it readable by the service and by nobody else. On error the temporary file is removed and path is left untouched.
//
// A symbolic link at path is followed: the file it points to is replaced and
// the link kept.
func Write(path string, data []byte, perm fs.FileMode) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	return write(target, data, perm, "")
}

// WriteLike is Write for a file kept beside another, like: a new file
// gets like's mode, less any permission for others, and like's owner and
// group where the process may give them (perm when like does not exist),
// all before it is renamed into place, so that whoever may read like may
// read it from the moment it exists. An existing file is treated as by
// Write.
func WriteLike(path string, data []byte, perm fs.FileMode, like string) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	return write(target, data, perm, like)
}

// Remove removes the file at path, if there is one, and flushes its
// directory, so that the removal survives a power cut.
func Remove(path string) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(target)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("syncing directory of %s: %w", target, err)
	}
	return nil
}

// Lock is the lock Update takes, held across several writes: one writer
// at a time for every file in a directory, among the processes that take
// it (the lock is advisory). Lock it with LockDir; Unlock releases it, as
// does the process's death.
type Lock struct{ d *os.File }

// LockDir takes the exclusive lock of the directory that holds path (the
// directory of the file a symbolic link at path points to), waiting for
// it, and removes the temporary files an earlier writer of path killed
// before its rename left there (see Update). Files written under it must
// be written with Write or WriteLike, never Update, which would wait for
// the lock held.
func LockDir(path string) (*Lock, error) {
	target, err := resolve(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(target)
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("opening directory to lock: %w", err)
	}
	if err := flock(d, unix.LOCK_EX); err != nil {
		d.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return &Lock{d: d}, nil
}

// RemoveStale removes what writers of path killed before their rename
// left in its directory (see Update). The lock must be held.
func (l *Lock) RemoveStale(path string) {
	if target, err := resolve(path); err == nil {
		removeStale(filepath.Dir(target), filepath.Base(target))
	}
}

// Unlock releases the lock.
func (l *Lock) Unlock() {
	flock(l.d, unix.LOCK_UN)
	l.d.Close()
}

// Update runs a read-modify-write of the file at path under an exclusive
// lock on its directory, so that concurrent Updates of files in the same
// directory, from this process or others, run one after the other. fn gets
// the current content, nil when the file does not exist, and returns the new
// content, which is written as by Write. An error from fn aborts the update
// without writing and is returned as is.
//
// The lock is advisory: it orders Updates, not other writers.
//
// Under the lock, Update first removes the temporary files an earlier
// writer of the same file left when it was killed before its rename: they
// hold what it was writing (a password hash, a 2FA secret), mode 0600
// from their creation until they are given the file's mode just before
// the rename. No other Update can be writing them: it would hold the lock.
func Update(path string, perm fs.FileMode, fn func(old []byte) ([]byte, error)) error {
	target, err := resolve(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory to lock: %w", err)
	}
	defer d.Close()
	if err := flock(d, unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", dir, err)
	}
	// Closing d releases the lock; the explicit unlock only makes the order
	// obvious.
	defer flock(d, unix.LOCK_UN)
	removeStale(dir, filepath.Base(target))

	old, err := os.ReadFile(target)
	if errors.Is(err, fs.ErrNotExist) {
		old = nil
	} else if err != nil {
		return fmt.Errorf("reading %s: %w", target, err)
	}
	data, err := fn(old)
	if err != nil {
		return err
	}
	return write(target, data, perm, "")
}

// tempPattern is the name of write's temporary files for the file base,
// as os.CreateTemp fills it in: the star is a run of digits.
func tempPattern(base string) string { return "." + base + ".tmp*" }

// removeStale removes the temporary files of base in dir that a killed
// writer left. Errors are ignored: a file that cannot be removed now is
// tried again next time, and the update itself does not need it gone.
func removeStale(dir, base string) {
	prefix := "." + base + ".tmp"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// resolve follows a symbolic link at path, so that the link survives the
// rename and the lock is taken on the directory the data lives in. A path
// that does not exist yet is used as is.
func resolve(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling link: create the file it names.
		if dst, rerr := os.Readlink(path); rerr == nil {
			if !filepath.IsAbs(dst) {
				dst = filepath.Join(filepath.Dir(path), dst)
			}
			return dst, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", path, err)
	}
	return target, nil
}

func write(path string, data []byte, perm fs.FileMode, like string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// os.CreateTemp makes the file 0600: whatever it holds is never
	// readable by others, even if the process dies before the rename.
	tmp, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	owner := path
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm() &^ 0o007
	} else if like != "" {
		if fi, err := os.Stat(like); err == nil {
			perm, owner = fi.Mode().Perm()&^0o007, like
		}
	}
	// Chmod, not the mode given to open, so that the umask does not apply.
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmp.Name(), err)
	}
	if err := keepOwner(tmp, owner); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	// From here on the new file is in place: a failure to flush the
	// directory is reported, but there is no temporary file left to remove.
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("syncing directory of %s: %w", path, err)
	}
	return nil
}

// keepOwner gives tmp the owner and group of the existing file at path.
// Only root may give a file away; an ordinary user may still set a group he
// belongs to. A refusal leaves the temporary file owned by the caller, which
// is what any editor run by that user would do.
func keepOwner(tmp *os.File, path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading owner of %s: %w", path, err)
	}
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	tfi, err := tmp.Stat()
	if err != nil {
		return fmt.Errorf("reading owner of %s: %w", tmp.Name(), err)
	}
	have, ok := tfi.Sys().(*syscall.Stat_t)
	if !ok || (have.Uid == want.Uid && have.Gid == want.Gid) {
		return nil
	}
	err = tmp.Chown(int(want.Uid), int(want.Gid))
	if err == nil || (os.Geteuid() != 0 && errors.Is(err, fs.ErrPermission)) {
		return nil
	}
	return fmt.Errorf("setting owner of %s: %w", tmp.Name(), err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
