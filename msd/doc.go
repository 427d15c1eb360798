// Package msd is the virtual media drive: images kept in a storage
// directory, uploaded into it and removed from it, and the USB gadget's
// mass-storage LUN that shows one of them to the host as a CD-ROM or a
// flash drive. It keeps kvmd's model and shapes (github.com/pikvm/kvmd,
// read at f14596e8: kvmd/plugins/msd/__init__.py, otg/__init__.py,
// otg/drive.py, otg/storage.py): a virtual drive whose image, cdrom and
// rw flags are chosen while it is disconnected, then connected to the
// LUN in one step.
//
// An upload is written to a hidden temporary file in the storage
// directory, flushed to disk as it comes, and renamed to its name only
// when every byte announced is on disk and fsynced: a cut connection, a
// full disk, a killed daemon or a power cut leaves no image that looks
// whole, only the temporary file, which the next start removes.
//
// The LUN is written in the order the kernel needs
// (drivers/usb/gadget/function/storage_common.c): ro and cdrom only while
// no file is open (else EBUSY), then file; forced_eject detaches the file
// even when the host locked the medium.
package msd
