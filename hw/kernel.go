package hw

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Kernel describes the running kernel as uname does.
type Kernel struct {
	// System is the kernel's name, "Linux".
	System string
	// Release is e.g. "6.6.31+rpt-rpi-v8".
	Release string
	// Version is the build string, e.g. "#1 SMP PREEMPT Debian
	// 1:6.6.31-1+rpt1 (2024-05-29)".
	Version string
	// Machine is the hardware name, e.g. "aarch64"; "" when the kernel
	// does not say and the root is not the live system.
	Machine string
}

const kernelDir = "proc/sys/kernel/"

// Hostname reads proc/sys/kernel/hostname.
func (f FS) Hostname() (string, error) {
	return f.kernelString("hostname")
}

// Kernel reads the kernel's identity from proc/sys/kernel. Where arch is
// missing (older kernels) and the root is "/", Machine comes from
// uname(2).
func (f FS) Kernel() (Kernel, error) {
	var k Kernel
	var err error
	if k.System, err = f.kernelString("ostype"); err != nil {
		return Kernel{}, err
	}
	if k.Release, err = f.kernelString("osrelease"); err != nil {
		return Kernel{}, err
	}
	if k.Version, err = f.kernelString("version"); err != nil {
		return Kernel{}, err
	}
	k.Machine, err = f.kernelString("arch")
	if Absent(err) && filepath.Clean(f.root) == "/" {
		k.Machine, err = unameMachine()
	}
	if err != nil && !Absent(err) {
		return Kernel{}, err
	}
	return k, nil
}

// kernelString reads one single-line file in proc/sys/kernel.
func (f FS) kernelString(name string) (string, error) {
	b, err := f.ReadFile(kernelDir + name)
	if err != nil {
		return "", err
	}
	s, err := parseKernelString(b)
	if err != nil {
		return "", fmt.Errorf("hw: parsing %s%s: %w", kernelDir, name, err)
	}
	return s, nil
}

// parseKernelString parses a proc/sys/kernel string: one non-empty line.
func parseKernelString(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "":
		return "", errors.New("empty")
	case strings.ContainsAny(s, "\n\x00"):
		return "", fmt.Errorf("%q is more than one line", s)
	}
	return s, nil
}
