// Package msdtest has a stand-in for the gadget's mass-storage LUN, for
// tests and the demo (where there is no gadget): it keeps the kernel's
// rules for the LUN's attributes (drivers/usb/gadget/function/
// storage_common.c, read at 24ceb9c of torvalds/linux): ro and cdrom=1
// refused with EBUSY while a file is open, cdrom=1 also setting ro, a
// file shorter than one block (a CD-ROM: 300 frames of 2048 bytes)
// refused with ETOOSMALL, a file that cannot be written opened read-only,
// an empty file= refused with EBUSY while the host prevents medium
// removal, forced_eject detaching it anyway.
//
// The booted-system test (imagetest/) checks the kernel's own LUN.
package msdtest

import (
	"os"
	"sync"
	"syscall"

	"kvmd/msd"
)

// ETOOSMALL is the kernel's errno for a backing file too small
// (include/linux/errno.h); userspace sees it as a plain number.
const ETOOSMALL = syscall.Errno(525)

// Drive is a LUN in memory. The zero value is a present, empty,
// writable flash drive.
type Drive struct {
	mu          sync.Mutex
	absent      bool
	file        string
	ro          bool // of the open file
	initiallyRO bool
	cdrom       bool
	prevent     bool
	writes      []string
}

var _ msd.Drive = (*Drive)(nil)

// SetPresent makes the LUN appear or vanish (a gadget made or removed).
func (d *Drive) SetPresent(p bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.absent = !p
}

// HostLock is the host preventing (or allowing) the medium's removal, as
// an operating system does while it has the medium mounted.
func (d *Drive) HostLock(prevent bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prevent = prevent
}

// HostEject is the host ejecting the medium (a SCSI START STOP UNIT with
// LoEj): the file is closed.
func (d *Drive) HostEject() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.file = ""
}

// Writes returns the attribute writes so far, "attr=value", in order.
func (d *Drive) Writes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.writes...)
}

// Present implements msd.Drive.
func (d *Drive) Present() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.absent
}

// Get implements msd.Drive: ro is the open file's, else the one set.
func (d *Drive) Get() (msd.LUNState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.absent {
		return msd.LUNState{}, os.ErrNotExist
	}
	ro := d.initiallyRO
	if d.file != "" {
		ro = d.ro
	}
	return msd.LUNState{File: d.file, CDROM: d.cdrom, RO: ro}, nil
}

func (d *Drive) note(attr, v string) error {
	d.writes = append(d.writes, attr+"="+v)
	if d.absent {
		return os.ErrNotExist
	}
	return nil
}

// SetRO implements msd.Drive.
func (d *Drive) SetRO(ro bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.note("ro", b(ro)); err != nil {
		return err
	}
	return d.storeRO(ro)
}

func (d *Drive) storeRO(ro bool) error {
	if d.file != "" {
		return syscall.EBUSY
	}
	d.ro, d.initiallyRO = ro, ro
	return nil
}

// SetCDROM implements msd.Drive.
func (d *Drive) SetCDROM(cdrom bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.note("cdrom", b(cdrom)); err != nil {
		return err
	}
	if cdrom {
		if err := d.storeRO(true); err != nil {
			return err
		}
	}
	d.cdrom = cdrom
	return nil
}

// SetFile implements msd.Drive.
func (d *Drive) SetFile(path string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.note("file", path); err != nil {
		return err
	}
	if d.prevent && d.file != "" {
		return syscall.EBUSY
	}
	if path == "" {
		d.file = ""
		return nil
	}
	return d.open(path)
}

func (d *Drive) open(path string) error {
	ro := d.initiallyRO
	var f *os.File
	var err error
	if !ro {
		f, err = os.OpenFile(path, os.O_RDWR, 0)
		if err == syscall.EROFS || os.IsPermission(err) {
			ro = true
		} else if err != nil {
			return unwrap(err)
		}
	}
	if ro {
		if f, err = os.Open(path); err != nil {
			return unwrap(err)
		}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return unwrap(err)
	}
	if !fi.Mode().IsRegular() {
		return syscall.EINVAL
	}
	bits, min := uint(9), int64(1)
	if d.cdrom {
		bits, min = 11, 300
	}
	if fi.Size()>>bits < min {
		return ETOOSMALL
	}
	d.file, d.ro = path, ro
	return nil
}

func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Eject implements msd.Drive, as forced_eject: the host's lock does not
// hold it back.
func (d *Drive) Eject() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.note("forced_eject", "1"); err != nil {
		return err
	}
	d.prevent = false
	d.file = ""
	return nil
}

func b(v bool) string {
	if v {
		return "1"
	}
	return "0"
}
