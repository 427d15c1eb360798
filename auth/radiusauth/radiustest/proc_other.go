//go:build !linux

package radiustest

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// kill kills p's process group.
func kill(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
