package hw_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/hw"
	"kvmd/hw/mailboxtest"
	"kvmd/internal/fixture"
)

// tree unpacks hw/testdata/name.ttar (see testdata/SOURCES.md).
func tree(t *testing.T, name string) hw.FS {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("testdata", name+".ttar"), root); err != nil {
		t.Fatal(err)
	}
	return hw.New(root)
}

// noDevice is a mailbox whose device does not exist, as on a mainline
// kernel or a PC.
func noDevice() *mailboxtest.Firmware {
	f := mailboxtest.New(0)
	f.SetErr(fmt.Errorf("open /dev/vcio: %w", fs.ErrNotExist))
	return f
}

func TestThrottledSources(t *testing.T) {
	tests := []struct {
		name    string
		tree    string
		mb      hw.Mailbox
		want    hw.Throttling
		wantErr bool // a source failed other than by being absent
	}{
		// The daemon on a current Pi 4 kernel: the firmware says the board
		// browned out at boot; the hwmon alarm, read next, would say
		// nothing happened.
		{"6.12: mailbox first", "pi4-6.12-no-get_throttled", mailboxtest.New(0x50000), hw.Throttling{Raw: 0x50000, Source: hw.ThrottleMailbox}, false},
		{"6.12 on a fixture root: hwmon", "pi4-6.12-no-get_throttled", nil, hw.Throttling{Raw: 0, Source: hw.ThrottleHwmon}, false},
		{"6.12 without a vcio device: hwmon", "pi4-6.12-no-get_throttled", noDevice(), hw.Throttling{Raw: 0, Source: hw.ThrottleHwmon}, false},
		{"6.12, vcio closed to the daemon: hwmon, and the error", "pi4-6.12-no-get_throttled",
			func() hw.Mailbox {
				f := mailboxtest.New(0x50000)
				f.SetErr(fmt.Errorf("open /dev/vcio_gencmd: %w", fs.ErrPermission))
				return f
			}(), hw.Throttling{Raw: 0, Source: hw.ThrottleHwmon}, true},
		{"only the hwmon alarm, set", "pi3-hwmon-undervoltage", noDevice(), hw.Throttling{Raw: 1, Source: hw.ThrottleHwmon}, false},
		{"the mailbox wins over the alarm", "pi3-hwmon-undervoltage", mailboxtest.New(0x50005), hw.Throttling{Raw: 0x50005, Source: hw.ThrottleMailbox}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tree(t, tt.tree).Throttled(tt.mb)
			if (err != nil) != tt.wantErr || hw.Absent(err) {
				t.Errorf("Throttled error = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Throttled = %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("sysfs before hwmon, after the mailbox", func(t *testing.T) {
		f := tree(t, "pi4-6.12-no-get_throttled")
		attr := f.Path("sys/devices/platform/soc/soc:firmware/get_throttled")
		if err := os.WriteFile(attr, []byte("50005\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		if got, err := f.Throttled(noDevice()); err != nil || got != (hw.Throttling{Raw: 0x50005, Source: hw.ThrottleSysfs}) {
			t.Errorf("Throttled = %+v, %v; want the attribute's 0x50005", got, err)
		}
		if got, err := f.Throttled(mailboxtest.New(0x20000)); err != nil || got.Source != hw.ThrottleMailbox || got.Raw != 0x20000 {
			t.Errorf("Throttled = %+v, %v; want the mailbox's 0x20000", got, err)
		}
	})

	t.Run("no source at all", func(t *testing.T) {
		f := tree(t, "pi4-mainline-no-throttling")
		for _, mb := range []hw.Mailbox{nil, noDevice()} {
			got, err := f.Throttled(mb)
			if !hw.Absent(err) || got.Source != "" {
				t.Errorf("Throttled(%v) = %+v, %v; want no source, absent", mb, got, err)
			}
		}
		// A vcio device that fails is worth a log line, not absence.
		f2 := mailboxtest.New(0)
		f2.SetErr(fmt.Errorf("open /dev/vcio: %w", fs.ErrPermission))
		if got, err := f.Throttled(f2); err == nil || hw.Absent(err) || got.Source != "" {
			t.Errorf("Throttled = %+v, %v; want no source and the permission error", got, err)
		}
	})
}

func TestUSBFaultTrees(t *testing.T) {
	tests := []struct {
		tree, status string
		reason       []string
	}{
		{"pi4-no-udc", hw.USBNoUDC, []string{"no USB device controller", "dtoverlay=dwc2"}},
		{"pi4-no-gadget", hw.USBNoGadget, []string{"controller fe980000.usb", "/sys/kernel/config/usb_gadget is not", "kvmd-otg"}},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			u, err := tree(t, tt.tree).USB()
			if err != nil {
				t.Fatal(err)
			}
			if u.Status != tt.status || u.Reason == nil || u.UDC != nil || u.Gadget != nil || u.Connected {
				t.Fatalf("USB = %+v, want status %s and a reason", u, tt.status)
			}
			for _, w := range tt.reason {
				if !strings.Contains(*u.Reason, w) {
					t.Errorf("reason %q does not say %q", *u.Reason, w)
				}
			}
		})
	}
}
