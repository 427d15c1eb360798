package gadget_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"kvmd/gadget"
	"kvmd/hw"
)

// write makes rel below root with content.
func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The uevent of a char device is what the kernel's dev_uevent writes
// (drivers/base/core.c): MAJOR, MINOR, DEVNAME.
func TestHIDNode(t *testing.T) {
	root := t.TempDir()
	write(t, root, gadget.FunctionDir(gadget.Keyboard)+"/dev", "236:3\n")
	write(t, root, "sys/dev/char/236:3/uevent", "MAJOR=236\nMINOR=3\nDEVNAME=hidg3\n")
	got, err := gadget.HIDNode(hw.New(root), gadget.Keyboard)
	if err != nil || got != "dev/hidg3" {
		t.Fatalf("HIDNode = %q, %v; want dev/hidg3", got, err)
	}
}

func TestHIDNodeErrors(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no function":  {},
		"bad dev":      {gadget.FunctionDir(gadget.Mouse) + "/dev": "../../x\n"},
		"no uevent":    {gadget.FunctionDir(gadget.Mouse) + "/dev": "236:1\n"},
		"no devname":   {gadget.FunctionDir(gadget.Mouse) + "/dev": "236:1\n", "sys/dev/char/236:1/uevent": "MAJOR=236\nMINOR=1\n"},
		"dots in name": {gadget.FunctionDir(gadget.Mouse) + "/dev": "236:1\n", "sys/dev/char/236:1/uevent": "DEVNAME=../etc/passwd\n"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for rel, c := range files {
				write(t, root, rel, c)
			}
			got, err := gadget.HIDNode(hw.New(root), gadget.Mouse)
			if !errors.Is(err, gadget.ErrNoNode) {
				t.Fatalf("HIDNode = %q, %v; want gadget.ErrNoNode", got, err)
			}
		})
	}
}
