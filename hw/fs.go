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

// FS reads files below a root directory.
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

// Readlink returns the last element of the symlink target of rel (sysfs
// names a device's driver or class by a link).
func (f FS) Readlink(rel string) (string, error) {
	t, err := os.Readlink(f.Path(rel))
	if err != nil {
		return "", err
	}
	return filepath.Base(t), nil
}

// Absent reports whether err means the thing is not on this machine.
func Absent(err error) bool { return errors.Is(err, fs.ErrNotExist) }
