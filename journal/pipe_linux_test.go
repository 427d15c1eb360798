package journal

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The pipe journalctl writes to is grown when the kernel allows it.
func TestGrowPipe(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		t.Skip(err)
	}
	limit, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	got := growPipe(pw)
	if limit >= pipeSize && got != pipeSize {
		t.Errorf("pipe size %d, want %d (pipe-max-size %d)", got, pipeSize, limit)
	}
	if got2 := growPipe(pr); got2 != got {
		t.Errorf("read end: %d, write end: %d", got2, got)
	}
}

// A stream reads journalctl through such a pipe.
func TestStreamPipeIsGrown(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err != nil {
		t.Skip(err)
	} else if limit, _ := strconv.Atoi(strings.TrimSpace(string(b))); limit < pipeSize {
		t.Skipf("pipe-max-size %d", limit)
	}
	s, err := New(Config{}).start(t.Context(), "/bin/true", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got int
	c, _ := s.pr.SyscallConn()
	c.Control(func(fd uintptr) { got, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) })
	if got != pipeSize {
		t.Errorf("stream's pipe: %d bytes, want %d", got, pipeSize)
	}
}
