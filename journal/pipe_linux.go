package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe asks for a pipe of pipeSize bytes behind f and returns the
// size it has. A refusal (above pipe-max-size, or over the user's pipe
// quota) leaves the pipe as it was. SyscallConn, unlike Fd, keeps the
// file non-blocking.
func growPipe(f *os.File) int {
	c, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	size := 0
	c.Control(func(fd uintptr) {
		unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
		size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
	})
	return size
}
