// Package procgroup runs a child process in a process group of its own
// and kills that group as a whole: journalctl under the daemon, slapd and
// FreeRADIUS under tests, the servers kvmbench measures. A child in its
// own group gets no Ctrl-C meant for its parent's terminal (the parent
// ends its children in order), and whatever it starts in turn dies with
// it. On Linux the kernel also kills the child if the parent dies first.
package procgroup

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
)

// Kill kills p's process group, then p itself, which is safe even when
// the group is gone already (on Linux, through p's pidfd, never another
// process that reused the number).
func Kill(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// Lines calls line with each line of a child's output r, its end of line
// removed, until r ends. A line longer than 4 KiB is cut there.
func Lines(r io.Reader, line func(string)) {
	br := bufio.NewReaderSize(r, 4096)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			line(string(bytes.TrimRight(b, "\r\n")))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
