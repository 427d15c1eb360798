package msd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ImageInfo is an image in the storage, in kvmd's shape (kvmd's Image
// without name, path and in_storage: otg/storage.py, Storage.get_state).
type ImageInfo struct {
	// Complete is false only for an image kvmd left half-written (its
	// marker file ".__NAME.incomplete" is beside it): this daemon never
	// shows a half-written image of its own.
	Complete bool `json:"complete"`
	// Removable says the image can be deleted (the storage is writable).
	Removable bool `json:"removable"`
	// Writable says the image may be connected read-write: not an .iso
	// (kvmd's rule: a CD image is never written), and a file this daemon
	// may write.
	Writable bool `json:"writable"`
	// Size in bytes.
	Size int64 `json:"size"`
	// ModTS is the modification time, in seconds since the epoch.
	ModTS float64 `json:"mod_ts"`
}

// Part is the storage's file system, in kvmd's shape (otg/storage.py's
// _Part): its size and what is free for an upload, in bytes.
type Part struct {
	Size     int64 `json:"size"`
	Free     int64 `json:"free"`
	Writable bool  `json:"writable"`
}

// The storage's own files, hidden from listings and removed at start.
const (
	// tmpPrefix starts an upload's temporary file.
	tmpPrefix = ".kvmd-upload-"
	// kvmdMarker is how kvmd marks an image still being written:
	// ".__NAME.incomplete" beside NAME (otg/storage.py).
	kvmdMarkerPrefix, kvmdMarkerSuffix = ".__", ".incomplete"
)

// storage is the image directory. Every name in it is checked with
// CheckName; other entries (hidden files, directories, links, names
// CheckName refuses) are no images and are left alone.
type storage struct {
	dir string
	log *slog.Logger
}

// realDir is the directory with its symbolic links resolved: the kernel
// shows the LUN's file by its real path.
func (s *storage) realDir() (string, error) {
	return filepath.EvalSymlinks(s.dir)
}

func (s *storage) path(name string) string { return filepath.Join(s.dir, name) }

func kvmdMarker(name string) string { return kvmdMarkerPrefix + name + kvmdMarkerSuffix }

// scan lists the images and the file system they are on.
func (s *storage) scan() (map[string]ImageInfo, Part, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, Part{}, fmt.Errorf("msd: reading the storage: %w", err)
	}
	part, err := statFS(s.dir)
	if err != nil {
		return nil, Part{}, fmt.Errorf("msd: the storage's file system: %w", err)
	}
	part.Writable = access(s.dir, wOK) == nil
	markers := map[string]bool{}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, kvmdMarkerPrefix) && strings.HasSuffix(n, kvmdMarkerSuffix) {
			markers[strings.TrimSuffix(strings.TrimPrefix(n, kvmdMarkerPrefix), kvmdMarkerSuffix)] = true
		}
	}
	images := map[string]ImageInfo{}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || CheckName(name) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		images[name] = ImageInfo{
			Complete:  !markers[name],
			Removable: part.Writable,
			Writable:  imageWritable(name, s.path(name)),
			Size:      fi.Size(),
			ModTS:     modTime(fi.ModTime()),
		}
	}
	return images, part, nil
}

// imageWritable is kvmd's rule: an .iso is never connected read-write;
// another image may be when the file can be written.
func imageWritable(name, path string) bool {
	return !strings.HasSuffix(strings.ToLower(name), ".iso") && access(path, wOK) == nil
}

// removeIncomplete removes what uploads cut short by a killed daemon or
// a power cut left: the temporary files, never shown as images.
func (s *storage) removeIncomplete() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tmpPrefix) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(s.path(e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("removed an incomplete upload", "file", e.Name())
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return syncDir(s.dir)
}

// remove deletes an image (and kvmd's marker of it, if any) for good.
func (s *storage) remove(name string) error {
	if err := os.Remove(s.path(name)); err != nil {
		return err
	}
	if err := os.Remove(s.path(kvmdMarker(name))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("removing kvmd's marker of an incomplete image", "image", LogName(name), "err", err)
	}
	return syncDir(s.dir)
}

// exists says whether anything, image or not, has the name.
func (s *storage) exists(name string) (bool, error) {
	_, err := os.Lstat(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// The writeback of an upload: every window is handed to the disk as soon
// as it is written, and a goroutine waits for each in turn and drops its
// pages from the page cache (which an image read once would otherwise
// fill), while the next windows come from the network. At most
// writebackQueue windows wait: past that the upload waits for the disk,
// so that little is ever dirty in memory (a Raspberry Pi Zero has
// 512 MB). One copy buffer of copyBuf is all the upload holds itself.
const (
	copyBuf        = 1 << 20
	writebackBytes = 8 << 20
	writebackQueue = 2
)

// tmpFile is an upload's temporary file.
type tmpFile struct {
	f    *os.File
	path string
	// flushed is where the writeback has been started up to.
	flushed int64
	// windows carries the started windows' offsets to the waiter, which
	// closes waited when it is done.
	windows chan int64
	waited  chan struct{}
	stopped bool
}

// newTmpFile starts the writeback of f, a new temporary file.
func newTmpFile(f *os.File) *tmpFile {
	t := &tmpFile{f: f, path: f.Name(), windows: make(chan int64, writebackQueue), waited: make(chan struct{})}
	go t.waiter()
	return t
}

// waiter waits for each window's writeback, then drops it from the page
// cache.
func (t *tmpFile) waiter() {
	defer close(t.waited)
	for off := range t.windows {
		waitWriteback(t.f, off, writebackBytes)
	}
}

// stopWriteback ends the waiter once it has waited for every window.
func (t *tmpFile) stopWriteback() {
	if !t.stopped {
		t.stopped = true
		close(t.windows)
		<-t.waited
	}
}

// create makes the temporary file of an upload of size bytes, with the
// space reserved where the file system can (ErrNoSpace when it cannot
// hold it).
func (s *storage) create(size int64) (*tmpFile, error) {
	f, err := os.CreateTemp(s.dir, tmpPrefix+"*")
	if err != nil {
		return nil, err
	}
	t := newTmpFile(f)
	if err := preallocate(f, size); err != nil {
		t.abort()
		if errors.Is(err, syscall.ENOSPC) {
			return nil, ErrNoSpace.with(err)
		}
		return nil, err
	}
	return t, nil
}

// write appends p, starting the writeback of each full window.
func (t *tmpFile) write(p []byte, off int64) error {
	if _, err := t.f.Write(p); err != nil {
		return err
	}
	end := off + int64(len(p))
	for end-t.flushed >= writebackBytes {
		startWriteback(t.f, t.flushed, writebackBytes)
		t.windows <- t.flushed
		t.flushed += writebackBytes
	}
	return nil
}

// commit makes the file the image name: its data and metadata on disk
// first, then the rename (never over an existing file), then the
// directory on disk. Any error leaves no image and no temporary file.
func (t *tmpFile) commit(dir, name string) error {
	t.stopWriteback()
	err := t.f.Sync()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = renameNoReplace(t.path, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(t.path)
		return err
	}
	return syncDir(dir)
}

// abort removes the temporary file.
func (t *tmpFile) abort() {
	t.stopWriteback()
	t.f.Close()
	os.Remove(t.path)
}

// copyInto reads r to its end into t, which holds n bytes, up to size
// bytes, calling progress after each write. It stops when ctx ends.
func copyInto(ctx context.Context, t *tmpFile, r io.Reader, n, size int64, progress func(int64)) (int64, error) {
	buf := make([]byte, copyBuf)
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if n+int64(k) > size {
				return n, fmt.Errorf("msd: more data than the %d bytes announced", size)
			}
			if err := t.write(buf[:k], n); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					return n, ErrNoSpace.with(err)
				}
				return n, err
			}
			n += int64(k)
			progress(n)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// modTime is the time of a file as kvmd gives it.
func modTime(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
