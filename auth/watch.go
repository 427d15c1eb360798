package auth

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// watchInterval bounds how often a watched file is stat'ed: the 2FA
// secret's (TOTP), checked when a password is. The credential files are
// the Store's, which follows them itself.
const watchInterval = 200 * time.Millisecond

// fileWatch tells whether a file changed since it was last looked at. It
// compares inode, size and modification time, so both in-place edits and the
// rename of a new file over the old one are seen.
type fileWatch struct {
	path string
	next atomic.Int64 // unix nanoseconds before which no stat is made

	mu   sync.Mutex
	last stamp
	seen bool
}

// stamp is what tells a file's versions apart: a rename gives a new
// inode, an edit in place a new size or modification time.
type stamp struct {
	exists bool
	ino    uint64
	size   int64
	mtime  int64
	errno  string
}

func statStamp(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return stamp{}
		}
		return stamp{errno: err.Error()}
	}
	s := stamp{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = uint64(st.Ino)
	}
	return s
}

// changed reports whether the file looks different from the last call that
// returned true. The first call always reports a change. Calls within
// watchInterval of the previous stat return false without touching the disk
// unless force is set. It keeps real time, whatever clock the caller uses.
func (w *fileWatch) changed(force bool) bool {
	n := time.Now().UnixNano()
	if !force {
		next := w.next.Load()
		if n < next || !w.next.CompareAndSwap(next, n+int64(watchInterval)) {
			return false
		}
	} else {
		w.next.Store(n + int64(watchInterval))
	}
	s := statStamp(w.path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen && s == w.last {
		return false
	}
	w.last, w.seen = s, true
	return true
}
