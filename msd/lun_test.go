package msd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"kvmd/gadget"
	"kvmd/hw"
	"kvmd/internal/testutil"
)

// lunTree is a configfs tree of the gadget with its LUN's attributes as
// kernel 6.1 lists them (KERNEL-DEVICES.md), the way kvmd-otg leaves them:
// a CD-ROM with an image.
func lunTree(t *testing.T, withForcedEject bool) string {
	t.Helper()
	root := t.TempDir()
	lun := gadget.LUNDir() + "/"
	files := map[string]string{
		lun + "cdrom":          "1\n",
		lun + "ro":             "1\n",
		lun + "file":           "/var/lib/kvmd/msd/debian-12.iso\n",
		lun + "removable":      "1\n",
		lun + "nofua":          "0\n",
		lun + "inquiry_string": "PiKVM CD-ROM Drive 0.01\n",
	}
	if withForcedEject {
		files[lun+"forced_eject"] = ""
	}
	testutil.WriteFiles(t, root, files)
	cfg := filepath.Join(root, gadget.Dir, "configs", gadget.Config)
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../functions/"+gadget.MassStorage, filepath.Join(cfg, gadget.MassStorage)); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestLUN(t *testing.T) {
	root := lunTree(t, true)
	l := LUN{FS: hw.New(root)}
	if !l.Present() {
		t.Fatal("not present")
	}
	st, err := l.Get()
	if err != nil || st != (LUNState{File: "/var/lib/kvmd/msd/debian-12.iso", CDROM: true, RO: true}) {
		t.Fatalf("Get: %+v %v", st, err)
	}
	read := func(attr string) string {
		b, err := os.ReadFile(filepath.Join(root, gadget.LUNDir(), attr))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	l.SetRO(false)
	l.SetCDROM(false)
	l.SetFile("/x.img")
	if read("ro") != "0\n" || read("cdrom") != "0\n" || read("file") != "/x.img\n" {
		t.Errorf("writes: ro %q cdrom %q file %q", read("ro"), read("cdrom"), read("file"))
	}
	if err := l.Eject(); err != nil || read("forced_eject") != "1\n" {
		t.Errorf("forced_eject: %q %v", read("forced_eject"), err)
	}
	// An attribute that does not exist is never created.
	if err := l.write("nonexistent", "1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writing a missing attribute: %v", err)
	}
	// A bad value is an error, not false.
	os.WriteFile(filepath.Join(root, gadget.LUNDir(), "ro"), []byte("x\n"), 0o644)
	if _, err := l.Get(); err == nil {
		t.Error("ro x parsed")
	}
}

// TestLUNOldKernel: without forced_eject (before Linux 5.15) eject
// empties file.
func TestLUNOldKernel(t *testing.T) {
	root := lunTree(t, false)
	l := LUN{FS: hw.New(root)}
	if err := l.Eject(); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.Get(); st.File != "" {
		t.Errorf("file after eject: %q", st.File)
	}
}

func TestLUNAbsent(t *testing.T) {
	root := lunTree(t, true)
	os.Remove(filepath.Join(root, gadget.Dir, "configs", gadget.Config, gadget.MassStorage))
	if (LUN{FS: hw.New(root)}).Present() {
		t.Error("present without the configuration's link (kvmd: not enabled)")
	}
	if (LUN{FS: hw.New(t.TempDir())}).Present() {
		t.Error("present without a gadget")
	}
}
