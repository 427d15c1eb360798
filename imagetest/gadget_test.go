package imagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The gadget kvmd-otg.service makes (otg.DefaultSettings, PiKVM's).
const (
	gadgetVendor  = "1d6b"
	gadgetProduct = "0104"
	gadgetDir     = "/sys/kernel/config/usb_gadget/kvmd"
	testUDC       = "dummy_udc.0"
)

// usbState is hw.usb as the tests read it.
type usbState struct {
	UDC       *string `json:"udc"`
	State     *string `json:"state"`
	Connected bool    `json:"connected"`
	Status    string  `json:"status"`
	Reason    *string `json:"reason"`
	Gadget    *struct {
		Name         string `json:"name"`
		VendorID     string `json:"vendor_id"`
		ProductID    string `json:"product_id"`
		Manufacturer string `json:"manufacturer"`
		Product      string `json:"product"`
		Serial       string `json:"serial"`
		Functions    []struct {
			Name     string  `json:"name"`
			Kind     string  `json:"kind"`
			Image    *string `json:"image"`
			ReadOnly *bool   `json:"read_only"`
			Enabled  bool    `json:"enabled"`
		} `json:"functions"`
	} `json:"gadget"`
}

func (s *system) hwUSB(t *testing.T) usbState {
	t.Helper()
	var info struct {
		HW struct {
			USB usbState `json:"usb"`
		} `json:"hw"`
	}
	s.getJSON(t, "/api/info?fields=hw", &info)
	return info.HW.USB
}

// hostSide is what the guest's host side (dummy_hcd's root hub) sees of
// the gadget, each from the kernel's own files.
type hostSide struct {
	keyboard, mouse bool   // input devices of the gadget's IDs: kbd with LEDs, mouse with absolute X/Y
	disk            string // the removable USB disk whose SCSI vendor is the gadget's ("sda"), "" if none
	usbDevice       bool   // a USB device with the gadget's IDs on the bus
}

func (h hostSide) String() string {
	return fmt.Sprintf("keyboard %v, mouse %v, disk %q, USB device %v", h.keyboard, h.mouse, h.disk, h.usbDevice)
}

// readHostSide reads /proc/bus/input/devices, lsblk and lsusb.
func (s *system) readHostSide(t *testing.T) hostSide {
	t.Helper()
	sh := s.m.shell
	var h hostSide
	devices := sh.must(t, "cat /proc/bus/input/devices")
	for _, block := range strings.Split(devices, "\n\n") {
		if !strings.Contains(block, "Vendor="+gadgetVendor+" Product="+gadgetProduct) {
			continue
		}
		var handlers, abs string
		for _, l := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(l, "H: Handlers="); ok {
				handlers = v
			}
			if v, ok := strings.CutPrefix(l, "B: ABS="); ok {
				abs = v
			}
		}
		hs := strings.Fields(handlers)
		if contains(hs, "kbd") && contains(hs, "leds") {
			h.keyboard = true
		}
		// ABS bits 0 and 1: ABS_X and ABS_Y.
		if hasPrefixIn(hs, "mouse") && abs != "" && strings.HasSuffix(abs, "3") {
			h.mouse = true
		}
	}
	var lsblk struct {
		Blockdevices []struct {
			Name   string `json:"name"`
			RM     bool   `json:"rm"`
			Type   string `json:"type"`
			Tran   string `json:"tran"`
			Vendor string `json:"vendor"`
			Model  string `json:"model"`
		} `json:"blockdevices"`
	}
	out := sh.must(t, "lsblk -J -a -d -o NAME,RM,TYPE,TRAN,VENDOR,MODEL")
	if err := json.Unmarshal([]byte(out), &lsblk); err != nil {
		t.Fatalf("lsblk: %v\n%s", err, out)
	}
	for _, b := range lsblk.Blockdevices {
		if b.RM && b.Type == "disk" && b.Tran == "usb" && strings.TrimSpace(b.Vendor) == "PiKVM" && strings.TrimSpace(b.Model) == "Flash Drive" {
			h.disk = b.Name
		}
	}
	_, st := sh.run(t, "lsusb -d "+gadgetVendor+":"+gadgetProduct)
	h.usbDevice = st == 0
	return h
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func hasPrefixIn(ss []string, p string) bool {
	for _, x := range ss {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}

// testGadget: the modules the test loads at boot are there, and
// kvmd-otg.service made the gadget and bound it to dummy_hcd's controller
// before the daemon started, with the nodes for the user kvmd alone; the
// host side sees a keyboard, a mouse and a removable disk; hw.usb says
// so; a second start changes nothing.
func (s *system) testGadget(t *testing.T) {
	sh := s.m.shell
	start := time.Now()
	mods := sh.must(t, "cut -d' ' -f1 /proc/modules")
	for _, m := range []string{"vivid", "dummy_hcd", "libcomposite", "usb_f_hid", "usb_f_mass_storage"} {
		if !contains(strings.Fields(mods), m) {
			t.Errorf("module %s not loaded at boot", m)
		}
	}
	p := s.props(t, "kvmd-otg.service", "ActiveState", "SubState", "Result", "ExecMainStatus")
	if p["ActiveState"] != "active" || p["SubState"] != "exited" || p["Result"] != "success" {
		out, _ := sh.run(t, "journalctl -b -o cat -u kvmd-otg.service")
		t.Fatalf("kvmd-otg.service: %v\n%s", p, out)
	}
	// Started and done before the daemon.
	ts, _ := strconv.ParseInt(s.props(t, "kvmd-otg.service", "ActiveEnterTimestampMonotonic")["ActiveEnterTimestampMonotonic"], 10, 64)
	ds, _ := strconv.ParseInt(s.props(t, "kvmd.service", "ExecMainStartTimestampMonotonic")["ExecMainStartTimestampMonotonic"], 10, 64)
	if ts == 0 || ds == 0 || ts > ds {
		t.Errorf("kvmd-otg.service became active at %d µs, kvmd.service started at %d µs: want before", ts, ds)
	}
	if log := sh.must(t, "journalctl -b -o cat -u kvmd-otg.service"); !strings.Contains(log, "bound gadget kvmd to "+testUDC) {
		t.Errorf("kvmd-otg.service's log does not say it bound the gadget:\n%s", log)
	}
	if udc := sh.must(t, "cat "+gadgetDir+"/UDC"); udc != testUDC {
		t.Fatalf("%s/UDC: %q, want %s", gadgetDir, udc, testUDC)
	}
	t.Logf("device state: gadget kvmd bound to %s at boot by kvmd-otg.service", testUDC)

	// The host enumerates the gadget within seconds.
	var h hostSide
	if !waitFor(context.Background(), 30*time.Second, 500*time.Millisecond, func() bool {
		h = s.readHostSide(t)
		return h.keyboard && h.mouse && h.disk != "" && h.usbDevice
	}) {
		out, _ := sh.run(t, "cat /sys/class/udc/"+testUDC+"/state; lsusb; cat /proc/bus/input/devices; lsblk -a; dmesg | tail -40")
		t.Fatalf("the host side sees %v\n%s", h, out)
	}
	t.Logf("host side: %v", h)
	if st := sh.must(t, "cat /sys/class/udc/"+testUDC+"/state"); st != "configured" {
		t.Errorf("UDC state %q, want configured", st)
	}

	// The keyboard's and mouse's nodes and the drive's attributes are the
	// daemon's user's alone.
	nodes := sh.must(t, "for f in "+gadgetDir+"/functions/hid.usb*/dev; do d=$(cat $f); "+
		"n=$(sed -n 's/^DEVNAME=//p' /sys/dev/char/$d/uevent); stat -c '%n %U:%G %a' /dev/$n; done")
	if nodes != "/dev/hidg0 kvmd:kvmd 600\n/dev/hidg1 kvmd:kvmd 600" {
		t.Errorf("the gadget's device nodes:\n%s\nwant /dev/hidg0 and /dev/hidg1, kvmd:kvmd 600", nodes)
	}
	lun := gadgetDir + "/functions/mass_storage.usb0/lun.0"
	if out := sh.must(t, "cd "+lun+" && stat -c '%n %U' file ro cdrom forced_eject removable"); out !=
		"file kvmd\nro kvmd\ncdrom kvmd\nforced_eject kvmd\nremovable root" {
		t.Errorf("the LUN's attributes:\n%s", out)
	}

	// hw.usb through the daemon's sandbox.
	u := s.hwUSB(t)
	if u.Status != "ok" || u.UDC == nil || *u.UDC != testUDC || u.State == nil || *u.State != "configured" || !u.Connected || u.Gadget == nil {
		t.Fatalf("hw.usb %+v", u)
	}
	g := u.Gadget
	if g.Name != "kvmd" || g.VendorID != "0x"+gadgetVendor || g.ProductID != "0x"+gadgetProduct ||
		g.Manufacturer != "PiKVM" || g.Product != "PiKVM Composite Device" || g.Serial != "CAFEBABE" {
		t.Errorf("hw.usb.gadget %+v", *g)
	}
	var fns []string
	for _, f := range g.Functions {
		fns = append(fns, fmt.Sprintf("%s:%s:%v", f.Name, f.Kind, f.Enabled))
	}
	if got := strings.Join(fns, " "); got != "hid.usb0:keyboard:true hid.usb1:mouse:true mass_storage.usb0:disk:true" {
		t.Errorf("hw.usb.gadget.functions %s", got)
	}

	// Idempotent: a second start changes nothing, the host keeps its
	// devices.
	if out := sh.must(t, "kvmd otg start"); !strings.Contains(out, "already bound to "+testUDC+": nothing changed") {
		t.Errorf("kvmd otg start on the running gadget:\n%s", out)
	}
	if h2 := s.readHostSide(t); h2 != h {
		t.Errorf("after a second start the host sees %v, before %v", h2, h)
	}
	t.Logf("gadget checks: %v", time.Since(start).Round(100*time.Millisecond))
}
