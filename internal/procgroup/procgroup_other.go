//go:build !linux

package procgroup

import "syscall"

// Attr returns the attributes that start a child in its own process group.
// There is no portable way outside Linux to tie its life to the parent's:
// the parent's own cleanup has to do.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
