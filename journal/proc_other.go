//go:build !linux

package journal

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill()
}

// watching cannot be told without /proc: Open waits for output, an exit
// or readyTimeout.
func watching(int) bool { return false }
