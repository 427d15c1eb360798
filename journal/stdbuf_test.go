package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// journalctl runs under stdbuf with a large output buffer, and a follow
// still gets each entry as it is written (TestFollow times that).
func TestStdbuf(t *testing.T) {
	sb := testutil.NeedTool(t, "coreutils", "stdbuf")
	dir := t.TempDir()
	w := journaltest.Start(t, dir, "system")
	w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: "before"})
	w.Sync()
	r := newReader(dir, nil)
	argv, err := r.Argv()
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != sb || argv[1] != "-o"+outputBuffer || filepath.Base(argv[2]) != "journalctl" {
		t.Errorf("Argv = %q, want %s -o%s journalctl ...", argv, sb, outputBuffer)
	}
	f := follow(t, r, 0)
	f.out.waitFor(t, "--- before\r\n", 5*time.Second)
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", f.s.cmd.Process.Pid))
	if err != nil {
		t.Skip(err)
	}
	// stdbuf passes the size on in bytes, to its library.
	if !strings.Contains("\x00"+string(env), "\x00_STDBUF_O=262144\x00") {
		t.Errorf("journalctl's environment lacks _STDBUF_O=262144 (%s): %q", outputBuffer, env)
	}
	// Its standard output is a pipe that holds one buffer's worth.
	out, err := os.Open(fmt.Sprintf("/proc/%d/fd/1", f.s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	n, err := unix.FcntlInt(out.Fd(), unix.F_GETPIPE_SZ, 0)
	out.Close()
	if err != nil || n != pipeSize {
		t.Errorf("journalctl's pipe holds %d bytes (%v), want %d", n, err, pipeSize)
	}
	start := time.Now()
	w.Append(journaltest.Entry{Boot: bootNow, Unit: "kvmd.service", Message: "after"})
	f.out.waitFor(t, "--- after\r\n", 5*time.Second)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a followed entry took %v under stdbuf", d)
	}
}

// Without a working stdbuf journalctl runs directly.
func TestNoStdbuf(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, dir, "system", []journaltest.Entry{{Boot: bootNow, Unit: "kvmd.service", Message: "x"}})
	broken := filepath.Join(t.TempDir(), "stdbuf")
	// As stdbuf fails when its library is missing.
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho \"stdbuf: failed to find 'libstdbuf.so'\" >&2\nexit 125\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, stdbuf := range []string{"-", filepath.Join(t.TempDir(), "none"), broken} {
		r := newReader(dir, func(c *Config) { c.Stdbuf = stdbuf })
		argv, err := r.Argv()
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(argv[0]) != "journalctl" {
			t.Errorf("Stdbuf %q: Argv = %q, want journalctl first", stdbuf, argv)
		}
		if got := readAll(t, r, 0); !strings.Contains(got, "--- x\r\n") {
			t.Errorf("Stdbuf %q: read %q", stdbuf, got)
		}
	}
}
