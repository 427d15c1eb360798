// Package hw reads the machine: device tree, thermal zones, firmware
// throttling flags, memory, CPU times, uptime, host name, kernel, USB
// gadget, video capture and GPIO. Every reader goes through an FS rooted at
// a configurable directory, so tests and the demo run on fixture trees
// captured from real boards.
//
// A value that does not exist on this machine is not an error: readers
// return an error wrapping fs.ErrNotExist, which callers turn into null. A
// file that exists but does not parse is an error worth logging.
package hw

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxFileSize bounds every read: sysfs attributes are at most a page, and
// the procfs files read here (stat, meminfo, uptime, loadavg) are single
// records that one read returns whole.
const maxFileSize = 64 << 10

// readBufs hold the buffers of ReadFile, so that a refresh of /api/info
// does not allocate a maximum-size buffer per file.
var readBufs = sync.Pool{New: func() any { b := make([]byte, maxFileSize); return &b }}

// FS is the machine's file system below a root directory: every package
// that reads or writes the machine's files (sysfs, procfs, configfs,
// device nodes) goes through it, so that it runs on a fixture tree in
// tests. Paths are slash-separated and relative to the root.
type FS struct {
	root string
}

// New returns an FS rooted at root ("/" on a device).
func New(root string) FS {
	if root == "" {
		root = "/"
	}
	return FS{root: root}
}

// Root returns the root directory.
func (f FS) Root() string { return f.root }

// Path returns the host path of rel, a slash-separated path below the root.
func (f FS) Path(rel string) string {
	return filepath.Join(f.root, filepath.FromSlash(rel))
}

// ReadFile reads rel with one bounded read of at most maxFileSize bytes:
// a sysfs attribute or a single-record procfs file comes whole in one
// read, and reading on until EOF would hang on drivers that never report
// it.
func (f FS) ReadFile(rel string) ([]byte, error) {
	fh, err := os.Open(f.Path(rel))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	n, err := fh.Read(*bp)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading %s: %w", rel, err)
	}
	return bytes.Clone((*bp)[:n]), nil
}

// ReadString reads rel and trims white space and the NUL that device-tree
// strings end with.
func (f FS) ReadString(rel string) (string, error) {
	b, err := f.ReadFile(rel)
	if err != nil {
		return "", err
	}
	return strings.Trim(string(b), " \t\r\n\x00"), nil
}

// Glob returns the paths below the root matching pattern, relative to the
// root and slash-separated, sorted.
func (f FS) Glob(pattern string) ([]string, error) {
	matches, err := filepath.Glob(f.Path(pattern))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(matches))
	for _, m := range matches {
		rel, err := filepath.Rel(f.root, m)
		if err != nil {
			return nil, err
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}

// Readlink returns the target of the symbolic link rel, as it is written.
func (f FS) Readlink(rel string) (string, error) { return os.Readlink(f.Path(rel)) }

// LinkName returns the last element of the target of the symbolic link rel
// (sysfs names a device's driver or class by a link, configfs a
// configuration's function).
func (f FS) LinkName(rel string) (string, error) {
	t, err := f.Readlink(rel)
	if err != nil {
		return "", err
	}
	return filepath.Base(t), nil
}

// ReadDir reads the directory rel, its entries sorted by name.
func (f FS) ReadDir(rel string) ([]fs.DirEntry, error) { return os.ReadDir(f.Path(rel)) }

// Stat describes rel, following a symbolic link.
func (f FS) Stat(rel string) (fs.FileInfo, error) { return os.Stat(f.Path(rel)) }

// Lstat describes rel itself, a symbolic link too.
func (f FS) Lstat(rel string) (fs.FileInfo, error) { return os.Lstat(f.Path(rel)) }

// Exists reports whether rel exists (a dangling link does).
func (f FS) Exists(rel string) bool {
	_, err := f.Lstat(rel)
	return err == nil
}

// OpenFile opens rel as os.OpenFile does (a device node, with the flags it
// needs).
func (f FS) OpenFile(rel string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(f.Path(rel), flag, perm)
}

// WriteAttr writes an attribute that exists, in a single write(2): sysfs
// and configfs take an attribute's value from one write, and nothing is
// created (in a fixture tree neither).
func (f FS) WriteAttr(rel string, data []byte) error {
	fh, err := os.OpenFile(f.Path(rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// Mkdir makes the directory rel (0755): in configfs, an item.
func (f FS) Mkdir(rel string) error { return os.Mkdir(f.Path(rel), 0o755) }

// Symlink links target into link's directory, both below the root.
func (f FS) Symlink(target, link string) error { return os.Symlink(f.Path(target), f.Path(link)) }

// Remove removes a directory (rmdir) or a link or file (unlink): never a
// tree (configfs refuses what it does not allow, and a mistake must not
// take anything else along).
func (f FS) Remove(rel string) error { return os.Remove(f.Path(rel)) }

// Chown gives rel to uid and gid (-1 leaves one as it is).
func (f FS) Chown(rel string, uid, gid int) error { return os.Chown(f.Path(rel), uid, gid) }

// Chmod sets rel's permission bits.
func (f FS) Chmod(rel string, mode fs.FileMode) error { return os.Chmod(f.Path(rel), mode) }

// Absent reports whether err means the thing is not on this machine.
func Absent(err error) bool { return errors.Is(err, fs.ErrNotExist) }
