package radiustest

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, killed with the
// test binary if that dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kill kills p's process group.
func kill(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
