package ldaptest

import (
	"os"
	"syscall"
)

// sysProcAttr puts slapd in its own process group, which the cleanup
// kills as a whole, and has the kernel kill it if the test binary dies
// first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill() // through its pidfd: safe even if the group is gone
}
