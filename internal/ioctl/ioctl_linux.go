// Package ioctl issues Linux ioctls whose argument is a structure, as the
// V4L2 and media controller UAPIs take them, for the packages that talk to
// kernel drivers (hw, hw/v4l2m2m).
package ioctl

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Request numbers in the generic Linux encoding that arm, arm64 and amd64
// share (include/uapi/asm-generic/ioctl.h): the direction in bits 30-31,
// the argument's size in 16-29, the type in 8-15, the number in 0-7.
const (
	dirWrite = 1 // the caller writes, the kernel reads: _IOW
	dirRead  = 2 // the kernel writes: _IOR
)

// IOR is _IOR(typ, nr, size): the kernel writes the argument.
func IOR(typ byte, nr byte, size uintptr) uint { return req(dirRead, typ, nr, size) }

// IOW is _IOW(typ, nr, size): the kernel reads the argument.
func IOW(typ byte, nr byte, size uintptr) uint { return req(dirWrite, typ, nr, size) }

// IOWR is _IOWR(typ, nr, size): both.
func IOWR(typ byte, nr byte, size uintptr) uint { return req(dirRead|dirWrite, typ, nr, size) }

func req(dir uint, typ, nr byte, size uintptr) uint {
	return dir<<30 | uint(size)<<16 | uint(typ)<<8 | uint(nr)
}

// Do issues one ioctl on fd with arg, retrying when a signal interrupts
// it. The error is the bare errno, for errors.Is.
func Do(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return errno
	}
}
