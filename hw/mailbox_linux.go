package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// VCIO is the firmware's property interface through the kernel's vcio
// device (raspberrypi/linux drivers/char/broadcom/vcio.c). Each Call
// opens the first of Nodes that exists, read-only as vcgencmd does, and
// closes it again: nothing is held between readings.
//
// The device is not below the FS root: a fixture tree has no firmware
// behind it, so callers wire a VCIO only when the root is "/".
type VCIO struct {
	// Nodes are tried in order; nil means DefaultVCIONodes.
	Nodes []string
}

// DefaultVCIONodes are the kernel's vcio devices, the narrowest first:
// /dev/vcio_gencmd accepts only TagGetGencmdResult (raspberrypi/linux
// pull 7351, 2026; the group video may open it on Raspberry Pi OS, whose
// newest udev rules no longer give it /dev/vcio), /dev/vcio accepts every
// tag. vcgencmd tries them in this order too (raspberrypi/utils pull 178).
var DefaultVCIONodes = []string{"/dev/vcio_gencmd", "/dev/vcio"}

var _ Mailbox = VCIO{}

// ioctlMboxProperty is IOCTL_MBOX_PROPERTY, _IOWR(100, 0, char *): its
// size field is that of a pointer, so 0xc0046400 on 32-bit ARM and
// 0xc0086400 on arm64 (a 32-bit program on a 64-bit kernel goes through
// the driver's compat ioctl, which expects the 32-bit number).
var ioctlMboxProperty = iowr(100, 0, unsafe.Sizeof(uintptr(0)))

// iowr is the kernel's _IOWR (include/uapi/asm-generic/ioctl.h, which
// arm, arm64 and x86 use): direction read|write in bits 30-31, the
// argument's size in bits 16-29, the type in 8-15, the number in 0-7.
func iowr(typ, nr, size uintptr) uint {
	const read, write = 2, 1
	return uint((read|write)<<30 | size<<16 | typ<<8 | nr)
}

// Call implements Mailbox. A node that does not exist is skipped, and so
// is one that refuses this caller or this tag (EACCES, EPERM); the error
// wraps fs.ErrNotExist only when no node exists.
func (v VCIO) Call(buf []uint32) error {
	nodes := v.Nodes
	if nodes == nil {
		nodes = DefaultVCIONodes
	}
	var errs []error
	for _, node := range nodes {
		err := vcioCall(node, buf)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
			continue
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
			// A node restricted to other tags, closed to this user, or
			// closed by the service's device policy: the next may do.
			errs = append(errs, err)
		default:
			return err
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("no vcio device (%v): %w", nodes, fs.ErrNotExist)
	}
	return errors.Join(errs...)
}

func vcioCall(node string, buf []uint32) error {
	if len(buf) < 3 || int(buf[0]) != len(buf)*4 {
		return fmt.Errorf("%s: property buffer of %d words, size word %d", node, len(buf), firstWord(buf))
	}
	fd, err := unix.Open(node, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: node, Err: err}
	}
	defer unix.Close(fd)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(ioctlMboxProperty), uintptr(unsafe.Pointer(&buf[0])))
	runtime.KeepAlive(buf)
	if errno != 0 {
		// EINVAL also when the firmware answered 0x80000001.
		return &fs.PathError{Op: "IOCTL_MBOX_PROPERTY", Path: node, Err: errno}
	}
	return nil
}
