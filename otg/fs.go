package otg

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// cfs is what the gadget does to the file system: configfs's directories,
// attributes and links, sysfs's controllers and the device nodes. Paths
// are slash-separated, relative to the root. osFS is the machine; the
// tests have a model of configfs's rules.
type cfs interface {
	ReadDir(rel string) ([]fs.DirEntry, error)
	ReadFile(rel string) ([]byte, error)
	Readlink(rel string) (string, error)
	Exists(rel string) bool
	// OwnedBy reports whether rel belongs to uid with permission bits
	// mode.
	OwnedBy(rel string, uid int, mode fs.FileMode) bool
	Mkdir(rel string) error
	// WriteFile writes an attribute that exists, in one write (configfs
	// takes an attribute's value from a single write).
	WriteFile(rel string, data []byte) error
	// Symlink links the directory target into link's directory.
	Symlink(target, link string) error
	// Remove removes a directory (rmdir) or a link.
	Remove(rel string) error
	Chown(rel string, uid, gid int) error
	Chmod(rel string, mode fs.FileMode) error
}

// osFS is the machine's file system below root.
type osFS struct{ root string }

func (f osFS) path(rel string) string { return filepath.Join(f.root, filepath.FromSlash(rel)) }

func (f osFS) ReadDir(rel string) ([]fs.DirEntry, error) { return os.ReadDir(f.path(rel)) }

// ReadFile reads an attribute in one bounded read, as hw.FS does (a page
// at most; report_desc is binary).
func (f osFS) ReadFile(rel string) ([]byte, error) {
	fh, err := os.Open(f.path(rel))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b := make([]byte, 4096)
	n, err := fh.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

func (f osFS) Readlink(rel string) (string, error) { return os.Readlink(f.path(rel)) }

func (f osFS) Exists(rel string) bool {
	_, err := os.Lstat(f.path(rel))
	return err == nil
}

func (f osFS) OwnedBy(rel string, uid int, mode fs.FileMode) bool {
	fi, err := os.Stat(f.path(rel))
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid && fi.Mode().Perm() == mode
}

func (f osFS) Mkdir(rel string) error { return os.Mkdir(f.path(rel), 0o755) }

func (f osFS) WriteFile(rel string, data []byte) error {
	fh, err := os.OpenFile(f.path(rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f osFS) Symlink(target, link string) error { return os.Symlink(f.path(target), f.path(link)) }

// Remove is rmdir for a directory and unlink for a link: never a
// recursive removal (configfs refuses what it does not allow, and a
// mistake must not take anything else along).
func (f osFS) Remove(rel string) error { return os.Remove(f.path(rel)) }

func (f osFS) Chown(rel string, uid, gid int) error { return os.Chown(f.path(rel), uid, gid) }

func (f osFS) Chmod(rel string, mode fs.FileMode) error { return os.Chmod(f.path(rel), mode) }
