package hw

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

func TestIoctlNumber(t *testing.T) {
	// _IOWR(100, 0, char *): py-videocore's IOCTL_MAILBOX, 0xc0046400, on
	// 32-bit Raspberry Pi OS; 8-byte pointers on arm64.
	if got := iowr(100, 0, 4); got != 0xc0046400 {
		t.Errorf("iowr(100, 0, 4) = %#x, want 0xc0046400", got)
	}
	if got := iowr(100, 0, 8); got != 0xc0086400 {
		t.Errorf("iowr(100, 0, 8) = %#x, want 0xc0086400", got)
	}
}

// TestVCIO runs the real driver's system calls on what this machine has:
// no vcio device (absent), and a character device that is not one
// (/dev/null answers the ioctl with ENOTTY; under qemu-user, as make smoke
// runs this package for arm64, qemu answers an ioctl it does not know with
// ENOSYS instead).
func TestVCIO(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "vcio")
	buf := encodeProperty(TagGetThrottled, make([]byte, 4), 4)

	err := VCIO{Nodes: []string{missing, missing + "_gencmd"}}.Call(buf)
	if !Absent(err) {
		t.Errorf("Call with no device: %v, want absent", err)
	}
	_, err = FirmwareThrottled(VCIO{Nodes: []string{missing}})
	if !Absent(err) {
		t.Errorf("FirmwareThrottled with no device: %v, want absent", err)
	}

	// The first node that exists answers; a missing one before it is
	// skipped, and the ioctl's error is not taken for absence.
	err = VCIO{Nodes: []string{missing, "/dev/null"}}.Call(buf)
	if !(errors.Is(err, syscall.ENOTTY) || errors.Is(err, syscall.ENOSYS)) || Absent(err) {
		t.Errorf("Call on /dev/null: %v, want ENOTTY", err)
	}
	if buf[1] != 0 {
		t.Errorf("a failed call changed the buffer: %#x", buf)
	}

	// A buffer whose size word lies is refused before the kernel sees it.
	if err := (VCIO{Nodes: []string{"/dev/null"}}).Call([]uint32{400, 0, 0}); err == nil || errors.Is(err, syscall.ENOTTY) || errors.Is(err, syscall.ENOSYS) {
		t.Errorf("Call with a bad size word: %v", err)
	}
}
