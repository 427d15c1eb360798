package main

import "syscall"

// childSysProcAttr puts a child in its own process group, so a Ctrl-C in the
// terminal reaches only the driver, which then stops its children in order,
// and asks the kernel to kill the child if the driver itself dies without
// cleaning up (SIGKILL, crash).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
