package testutil

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"kvmd/internal/procgroup"
)

// Start starts cmd in a process group of its own, its output in the
// buffer returned, and ends it when t ends: stop first (SIGTERM lets
// ustreamer remove its sink and socket), then after 10 s a kill of the
// whole group.
func Start(t testing.TB, cmd *exec.Cmd, stop os.Signal) *SyncBuffer {
	t.Helper()
	var out SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(stop)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			procgroup.Kill(cmd.Process)
			<-done
		}
	})
	return &out
}
