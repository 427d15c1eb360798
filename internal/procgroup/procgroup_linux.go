package procgroup

import "syscall"

// Attr returns the attributes that start a child in its own process group,
// killed by the kernel (SIGKILL) if the parent dies without ending it.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
