package auth

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// watchDirs watches dirs with inotify and signals on the channel each time
// a file of one of names is created, written, renamed, removed or has its
// mode or owner changed there (and when the kernel's queue overflowed:
// anything may have changed). The channel is closed when the watch is lost
// (a directory removed) or stop was called.
func watchDirs(dirs []string, names map[string]bool) (<-chan struct{}, func(), error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, nil, fmt.Errorf("inotify_init1: %w", err)
	}
	const mask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_CREATE |
		unix.IN_DELETE | unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	for _, d := range dirs {
		if _, err := unix.InotifyAddWatch(fd, d, mask); err != nil {
			unix.Close(fd)
			return nil, nil, fmt.Errorf("inotify_add_watch %s: %w", d, err)
		}
	}
	// A non-blocking descriptor: the runtime's poller waits for it, and
	// Close wakes the read.
	f := os.NewFile(uintptr(fd), "inotify")
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			hit, lost := scanEvents(buf[:n], names)
			if hit {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			if lost {
				return
			}
		}
	}()
	return ch, func() { f.Close() }, nil
}

// scanEvents reads a buffer of inotify events: hit when one is about a
// file of names (or the queue overflowed), lost when a watched directory
// went away.
func scanEvents(b []byte, names map[string]bool) (hit, lost bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		mask := binary.NativeEndian.Uint32(b[4:8])
		nameLen := int(binary.NativeEndian.Uint32(b[12:16]))
		end := unix.SizeofInotifyEvent + nameLen
		if end > len(b) {
			return true, false
		}
		name := string(b[unix.SizeofInotifyEvent:end])
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			hit = true
		case mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			hit, lost = true, true
		case names[name]:
			hit = true
		}
		b = b[end:]
	}
	return hit, lost
}
