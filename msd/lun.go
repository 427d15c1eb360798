package msd

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"kvmd/gadget"
	"kvmd/hw"
)

// Drive is the gadget's mass-storage LUN. LUN is the kernel's; package
// msdtest has a stand-in for tests and the demo.
type Drive interface {
	// Present reports whether the LUN exists and its function is linked
	// into the gadget's configuration, so that a host can see it.
	Present() bool
	// Get reads the LUN's attributes.
	Get() (LUNState, error)
	// SetRO and SetCDROM set the LUN's flags; the kernel refuses both
	// with EBUSY while a file is open.
	SetRO(ro bool) error
	SetCDROM(cdrom bool) error
	// SetFile opens path as the medium.
	SetFile(path string) error
	// Eject detaches the medium even when the host locked it.
	Eject() error
}

// LUNState is what a LUN's attributes say.
type LUNState struct {
	// File is the medium's path, "" when there is none.
	File  string
	CDROM bool
	RO    bool
}

// LUN is the LUN of the gadget's mass-storage function in configfs
// (gadget.LUNDir), read and written under FS's root.
type LUN struct {
	FS hw.FS
}

// Present reports whether lun.0 exists and c.1 links the function, as
// kvmd's Drive.is_enabled (otg/drive.py) does.
func (l LUN) Present() bool {
	if _, err := l.FS.Lstat(gadget.ConfigLink(gadget.MassStorage)); err != nil {
		return false
	}
	fi, err := l.FS.Stat(gadget.LUNDir())
	return err == nil && fi.IsDir()
}

// Get reads file, cdrom and ro.
func (l LUN) Get() (LUNState, error) {
	var st LUNState
	var err error
	if st.File, err = l.read("file"); err != nil {
		return st, err
	}
	if st.CDROM, err = l.readBool("cdrom"); err != nil {
		return st, err
	}
	st.RO, err = l.readBool("ro")
	return st, err
}

func (l LUN) read(attr string) (string, error) {
	b, err := l.FS.ReadFile(path.Join(gadget.LUNDir(), attr))
	if err != nil {
		return "", fmt.Errorf("msd: reading the LUN's %s: %w", attr, err)
	}
	return strings.TrimRight(string(b), "\n\x00"), nil
}

func (l LUN) readBool(attr string) (bool, error) {
	v, err := l.read(attr)
	if err != nil {
		return false, err
	}
	switch strings.TrimSpace(v) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("msd: the LUN's %s is %q, not 0 or 1", attr, v)
}

// write writes one attribute in a single write(2), as configfs takes it.
// The attribute must exist: in a fixture tree nothing is created.
func (l LUN) write(attr, value string) error {
	if err := l.FS.WriteAttr(path.Join(gadget.LUNDir(), attr), []byte(value+"\n")); err != nil {
		return fmt.Errorf("msd: writing the LUN's %s: %w", attr, err)
	}
	return nil
}

func boolAttr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// SetRO writes ro.
func (l LUN) SetRO(ro bool) error { return l.write("ro", boolAttr(ro)) }

// SetCDROM writes cdrom (the kernel sets ro with it).
func (l LUN) SetCDROM(cdrom bool) error { return l.write("cdrom", boolAttr(cdrom)) }

// SetFile writes the medium's path to file.
func (l LUN) SetFile(p string) error { return l.write("file", p) }

// Eject writes forced_eject (Linux 5.15 and later), which detaches the
// medium even when the host has prevented its removal; without the
// attribute it empties file, which the kernel refuses (EBUSY) while the
// host holds the medium.
func (l LUN) Eject() error {
	err := l.write("forced_eject", "1")
	if errors.Is(err, fs.ErrNotExist) {
		return l.write("file", "")
	}
	return err
}
