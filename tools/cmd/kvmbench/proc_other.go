//go:build !linux

package main

import "syscall"

// childSysProcAttr has no portable way to tie a child's life to the driver's
// outside Linux; the driver's own cleanup has to do.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
