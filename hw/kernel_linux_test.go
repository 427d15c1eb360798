package hw

import (
	"os"
	"runtime"
	"slices"
	"testing"
)

// nativeGOARCH lists, for a kernel's machine name, the GOARCH values
// whose binaries it runs itself; a 64-bit kernel also runs its 32-bit
// compat ABI.
var nativeGOARCH = map[string][]string{
	"x86_64":  {"amd64", "386"},
	"i686":    {"386"},
	"aarch64": {"arm64", "arm"},
	"armv7l":  {"arm"},
	"armv6l":  {"arm"},
	"riscv64": {"riscv64"},
	"ppc64le": {"ppc64le"},
	"s390x":   {"s390x"},
}

func TestUnameMachine(t *testing.T) {
	m, err := unameMachine()
	if err != nil || m == "" {
		t.Fatalf("unameMachine() = %q, %v", m, err)
	}
	// Newer kernels say the same in proc/sys/kernel/arch.
	if b, err := os.ReadFile("/proc/sys/kernel/arch"); err == nil {
		arch, _ := parseKernelString(b)
		// Under qemu-user (make smoke runs this package's tests with
		// go test -exec qemu-aarch64 on an x86_64 host), uname(2) is
		// answered by qemu with the emulated machine, while /proc is the
		// host kernel's: the two disagree by design, and neither is
		// wrong. Skip only then: they differ and this binary's
		// architecture is not one the kernel runs natively. On a real
		// board both come from the same kernel and must agree.
		if natives, known := nativeGOARCH[arch]; known && arch != m && !slices.Contains(natives, runtime.GOARCH) {
			t.Skipf("emulated: GOARCH=%s on a %s kernel, uname says %q (qemu-user answers uname, not the kernel)", runtime.GOARCH, arch, m)
		}
		if arch != m {
			t.Errorf("unameMachine() = %q, proc/sys/kernel/arch says %q", m, arch)
		}
	}
	k, err := New("/").Kernel()
	if err != nil {
		t.Fatal(err)
	}
	if k.Machine != m {
		t.Errorf("Kernel().Machine on / = %q, want %q", k.Machine, m)
	}
}
