// Package gadget is the layout of the daemon's USB gadget in configfs and
// sysfs, the one place every package that touches it reads it from:
// package otg, which makes the gadget as PiKVM's kvmd-otg does
// (github.com/pikvm/kvmd, kvmd/apps/otg and kvmd/usb.py, read at
// f14596e8); package hw, which reads any gadget; hid and msd, which drive
// its functions. It holds the gadget's name and its functions' names, and
// where a function's device node and LUN are. The daemon finds /dev/hidgN
// from the function, never by guessing the number: the kernel numbers
// hidg nodes in the order functions are created, across every gadget on
// the machine.
//
// Paths are slash-separated and relative to the root of the file system,
// as hw.FS takes them. The package imports no other of the daemon's.
package gadget

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Where configfs keeps the gadgets and sysfs the USB device controllers.
const (
	// ConfigfsDir holds one directory per gadget (libcomposite's
	// usb_gadget).
	ConfigfsDir = "sys/kernel/config/usb_gadget"
	// UDCDir holds one entry per USB device controller.
	UDCDir = "sys/class/udc"
)

// The gadget and its functions, named as PiKVM names them, so that hw.usb,
// /api/hid and /api/msd read the same whichever made the gadget.
const (
	// Name is the gadget's directory under ConfigfsDir.
	Name = "kvmd"
	// Keyboard is the boot keyboard with LED output reports.
	Keyboard = "hid.usb0"
	// Mouse is the absolute mouse.
	Mouse = "hid.usb1"
	// MouseAlt is the second mouse, relative and boot-protocol capable
	// (kvmd's mouse_alt, which PiKVM's udev rules name
	// /dev/kvmd-hid-mouse-alt): the daemon switches the pointer's input
	// between the two (kvmd's mouse outputs usb and usb_rel).
	MouseAlt = "hid.usb2"
	// MassStorage is the drive; its one LUN is lun.0.
	MassStorage = "mass_storage.usb0"
	// Config is the gadget's one configuration.
	Config = "c.1"
)

// Dir is the gadget's configfs directory.
const Dir = ConfigfsDir + "/" + Name

// FunctionDir is function's configfs directory.
func FunctionDir(function string) string {
	return path.Join(Dir, "functions", function)
}

// ConfigLink is where the configuration links function: the host sees a
// function only while it is linked.
func ConfigLink(function string) string {
	return path.Join(Dir, "configs", Config, function)
}

// LUNDir is the drive's LUN directory (file, ro, cdrom, forced_eject...).
func LUNDir() string {
	return path.Join(FunctionDir(MassStorage), "lun.0")
}

// ErrNoNode is returned by HIDNode when the function has no device node:
// it does not exist, or the kernel has not made its node.
var ErrNoNode = errors.New("gadget: no device node for the function")

// Reader reads an attribute, trimmed of white space (hw.FS).
type Reader interface {
	ReadString(rel string) (string, error)
}

// HIDNode returns the path below fsys's root of a hid function's character
// device ("dev/hidg0"): the function's dev attribute ("236:0") names the
// device, whose uevent in /sys/dev/char gives its node's name.
func HIDNode(fsys Reader, function string) (string, error) {
	dev, err := fsys.ReadString(path.Join(FunctionDir(function), "dev"))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNoNode, function, err)
	}
	if !validDevNum(dev) {
		return "", fmt.Errorf("%w: %s: dev %q is not MAJOR:MINOR", ErrNoNode, function, dev)
	}
	uevent, err := fsys.ReadString(path.Join("sys/dev/char", dev, "uevent"))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrNoNode, function, err)
	}
	for line := range strings.SplitSeq(uevent, "\n") {
		if name, ok := strings.CutPrefix(line, "DEVNAME="); ok && name != "" && !strings.Contains(name, "..") {
			return path.Join("dev", name), nil
		}
	}
	return "", fmt.Errorf("%w: %s: no DEVNAME in the uevent of %s", ErrNoNode, function, dev)
}

// validDevNum reports whether s is MAJOR:MINOR in decimal.
func validDevNum(s string) bool {
	maj, min, ok := strings.Cut(s, ":")
	return ok && digits(maj) && digits(min)
}

func digits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
