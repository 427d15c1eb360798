package procgroup

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKill starts a shell in its own group that starts a grandchild, and
// kills the group: both go, the grandchild too, which killing the shell
// alone would leave running.
func TestKill(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = Attr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("grandchild's pid %q: %v", buf[:n], err)
	}
	if pgid, err := syscall.Getpgid(cmd.Process.Pid); err != nil || pgid != cmd.Process.Pid {
		t.Errorf("the child's process group is %d (%v), want its own, %d", pgid, err, cmd.Process.Pid)
	}
	if pgid, _ := syscall.Getpgid(os.Getpid()); pgid == cmd.Process.Pid {
		t.Error("the test shares the child's group")
	}

	Kill(cmd.Process)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the child is still running 5 s after Kill")
	}
	// The grandchild was reparented to init (or a subreaper), which may
	// leave it a zombie for a while: dead is gone or a zombie.
	alive := func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(grandchild) + "/stat")
		if err != nil {
			return false
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		return len(f) > 0 && f[0] != "Z"
	}
	for deadline := time.Now().Add(5 * time.Second); alive(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(grandchild, syscall.SIGKILL)
			t.Fatalf("the grandchild %d outlived Kill", grandchild)
		}
	}
}
