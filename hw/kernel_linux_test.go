package hw

import (
	"os"
	"testing"
)

func TestUnameMachine(t *testing.T) {
	m, err := unameMachine()
	if err != nil || m == "" {
		t.Fatalf("unameMachine() = %q, %v", m, err)
	}
	// Newer kernels say the same in proc/sys/kernel/arch.
	if b, err := os.ReadFile("/proc/sys/kernel/arch"); err == nil {
		if arch, _ := parseKernelString(b); arch != m {
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
