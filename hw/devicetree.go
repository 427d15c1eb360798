package hw

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// DeviceTree is what the firmware's device tree says about the board.
type DeviceTree struct {
	// Model is the board's name, e.g. "Raspberry Pi 4 Model B Rev 1.5".
	Model string
	// Serial is the board's serial number, upper-cased as kvmd reports
	// it, or "" when the device tree has none.
	Serial string
	// Compatible lists the board's compatible strings, most specific
	// first, e.g. ["raspberrypi,4-model-b", "brcm,bcm2711"]; nil when
	// absent.
	Compatible []string
}

// dtDirs are where the kernel shows the device tree: procfs's link, and
// the directory it points to, which a root without procfs (a mounted
// image, a capture) may still have.
var dtDirs = []string{"proc/device-tree/", "sys/firmware/devicetree/base/"}

// DeviceTree reads the device tree the firmware passed to the kernel. A
// missing model means there is no device tree (x86, containers): the error
// wraps fs.ErrNotExist. A missing serial number or compatible list leaves
// that field empty.
func (f FS) DeviceTree() (DeviceTree, error) {
	var dt DeviceTree
	var b []byte
	var err error
	dtDir := dtDirs[0]
	for _, dtDir = range dtDirs {
		if b, err = f.ReadFile(dtDir + "model"); !Absent(err) {
			break
		}
	}
	if err != nil {
		return dt, err
	}
	if dt.Model, err = parseDTString(b); err != nil {
		return dt, fmt.Errorf("hw: parsing %smodel: %w", dtDir, err)
	}

	b, err = f.ReadFile(dtDir + "serial-number")
	switch {
	case Absent(err):
	case err != nil:
		return dt, err
	default:
		if dt.Serial, err = parseDTString(b); err != nil {
			return dt, fmt.Errorf("hw: parsing %sserial-number: %w", dtDir, err)
		}
		dt.Serial = strings.ToUpper(dt.Serial)
	}

	b, err = f.ReadFile(dtDir + "compatible")
	switch {
	case Absent(err):
	case err != nil:
		return dt, err
	default:
		dt.Compatible = parseDTStrings(b)
	}
	return dt, nil
}

// parseDTString returns the device-tree string property in b: the text up
// to the first NUL, trimmed of white space.
func parseDTString(b []byte) (string, error) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New("empty string")
	}
	return s, nil
}

// parseDTStrings splits a device-tree string-list property (NUL-separated,
// NUL-terminated), dropping empty entries.
func parseDTStrings(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(b, []byte{0}) {
		if s := strings.TrimSpace(string(p)); s != "" {
			out = append(out, s)
		}
	}
	return out
}
