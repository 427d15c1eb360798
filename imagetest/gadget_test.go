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
	relMouse        bool   // and a mouse with relative X/Y, no absolute axes
	disk            string // the removable USB disk whose SCSI vendor is the gadget's ("sda"), "" if none
	usbDevice       bool   // a USB device with the gadget's IDs on the bus
}

func (h hostSide) String() string {
	return fmt.Sprintf("keyboard %v, mouse %v, relative mouse %v, disk %q, USB device %v", h.keyboard, h.mouse, h.relMouse, h.disk, h.usbDevice)
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
		var handlers, abs, rel string
		for _, l := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(l, "H: Handlers="); ok {
				handlers = v
			}
			if v, ok := strings.CutPrefix(l, "B: ABS="); ok {
				abs = v
			}
			if v, ok := strings.CutPrefix(l, "B: REL="); ok {
				rel = v
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
		// REL bits 0 and 1: REL_X and REL_Y.
		if r, err := strconv.ParseUint(rel, 16, 64); hasPrefixIn(hs, "mouse") && abs == "" && err == nil && r&3 == 3 {
			h.relMouse = true
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
	log := sh.must(t, "journalctl -b -o short-monotonic -u kvmd-otg.service")
	if !strings.Contains(log, "bound gadget kvmd to "+testUDC) {
		t.Errorf("kvmd-otg.service's log does not say it bound the gadget:\n%s", log)
	}
	t.Logf("kvmd-otg.service at boot:\n%s", log)
	if udc := sh.must(t, "cat "+gadgetDir+"/UDC"); udc != testUDC {
		t.Fatalf("%s/UDC: %q, want %s", gadgetDir, udc, testUDC)
	}
	t.Logf("device state: gadget kvmd bound to %s at boot by kvmd-otg.service", testUDC)

	// The host enumerates the gadget within seconds.
	var h hostSide
	if !waitFor(context.Background(), 30*time.Second, 500*time.Millisecond, func() bool {
		h = s.readHostSide(t)
		return h.keyboard && h.mouse && h.relMouse && h.disk != "" && h.usbDevice
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
	if nodes != "/dev/hidg0 kvmd:kvmd 600\n/dev/hidg1 kvmd:kvmd 600\n/dev/hidg2 kvmd:kvmd 600" {
		t.Errorf("the gadget's device nodes:\n%s\nwant /dev/hidg0, /dev/hidg1 and /dev/hidg2, kvmd:kvmd 600", nodes)
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
	if got := strings.Join(fns, " "); got != "hid.usb0:keyboard:true hid.usb1:mouse:true hid.usb2:mouse:true mass_storage.usb0:disk:true" {
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

// hidMSD is what /api/hid and /api/msd say of the gadget's functions.
type hidMSD struct {
	hidEnabled, hidOnline, kbdOnline, mouseOnline bool
	msdEnabled, msdOnline                         bool
}

func (s *system) readHIDMSD(t *testing.T) hidMSD {
	t.Helper()
	var hid struct {
		Enabled  bool `json:"enabled"`
		Online   bool `json:"online"`
		Keyboard struct {
			Online bool `json:"online"`
		} `json:"keyboard"`
		Mouse struct {
			Online bool `json:"online"`
		} `json:"mouse"`
	}
	var msd struct {
		Enabled bool `json:"enabled"`
		Online  bool `json:"online"`
	}
	s.getJSON(t, "/api/hid", &hid)
	s.getJSON(t, "/api/msd", &msd)
	return hidMSD{hid.Enabled, hid.Online, hid.Keyboard.Online, hid.Mouse.Online, msd.Enabled, msd.Online}
}

// usbView is the gadget's state as the daemon shows it, in short.
type usbView struct {
	status    string
	udc       string
	connected bool
	gadget    bool
	api       hidMSD
}

func (s *system) readUSBView(t *testing.T) usbView {
	t.Helper()
	u := s.hwUSB(t)
	v := usbView{status: u.Status, connected: u.Connected, gadget: u.Gadget != nil, api: s.readHIDMSD(t)}
	if u.UDC != nil {
		v.udc = *u.UDC
	}
	return v
}

// kernelUSB is the controller's and the host side's state as root reads
// them: the gadget's UDC attribute, the controller's state and function,
// and what the host side sees. dummy_hcd leaves state "configured" after
// an unbind: only the three together say what is true.
type kernelUSB struct {
	bound, state, function string
	host                   hostSide
}

func (s *system) readKernelUSB(t *testing.T) kernelUSB {
	t.Helper()
	sh := s.m.shell
	k := kernelUSB{host: s.readHostSide(t)}
	k.bound, _ = sh.run(t, "cat "+gadgetDir+"/UDC 2>/dev/null")
	k.state = sh.must(t, "cat /sys/class/udc/"+testUDC+"/state")
	k.function = sh.must(t, "cat /sys/class/udc/"+testUDC+"/function")
	return k
}

// testUSBStates drives the gadget through an unbind, a rebind, "kvmd otg
// stop" and a start again, and checks at each state hw.usb, /api/hid and
// /api/msd against what the kernel and the host side say, each within
// the daemon's refresh (the info cache's second and the device poll).
func (s *system) testUSBStates(t *testing.T) {
	sh := s.m.shell
	start := time.Now()
	bound := usbView{status: "ok", udc: testUDC, connected: true, gadget: true,
		api: hidMSD{hidEnabled: true, hidOnline: true, kbdOnline: true, mouseOnline: true, msdEnabled: true, msdOnline: true}}
	// A gadget whose configuration links the functions, bound to nothing:
	// the drive is still there (kvmd's MSD is online while its function is
	// in the configuration), the keyboard and mouse are not.
	unbound := usbView{status: "no_gadget", gadget: true,
		api: hidMSD{hidEnabled: true, msdEnabled: true, msdOnline: true}}
	// No gadget: no keyboard or mouse; the virtual media is still enabled
	// (its image storage is configured, as kvmd's otg MSD is always
	// enabled) but offline, with no LUN to put an image in.
	stopped := usbView{status: "no_gadget", api: hidMSD{msdEnabled: true}}

	// expect waits for the daemon to show want, and logs how long it took
	// after the change.
	expect := func(state string, changed time.Time, want usbView) {
		t.Helper()
		var got usbView
		if !waitFor(context.Background(), 10*time.Second, 100*time.Millisecond, func() bool {
			got = s.readUSBView(t)
			return got == want
		}) {
			t.Errorf("%s: the daemon shows %+v, want %+v", state, got, want)
			return
		}
		t.Logf("%s: the daemon showed it %v after the change", state, time.Since(changed).Round(10*time.Millisecond))
	}
	hostGone := func(state string) kernelUSB {
		t.Helper()
		var k kernelUSB
		if !waitFor(context.Background(), 20*time.Second, 500*time.Millisecond, func() bool {
			k = s.readKernelUSB(t)
			return !k.host.keyboard && !k.host.mouse && !k.host.relMouse && k.host.disk == "" && !k.host.usbDevice
		}) {
			t.Errorf("%s: the host side still sees %v", state, k.host)
		}
		return k
	}
	hostBack := func(state string) {
		t.Helper()
		var k kernelUSB
		if !waitFor(context.Background(), 30*time.Second, 500*time.Millisecond, func() bool {
			k = s.readKernelUSB(t)
			return k.host.keyboard && k.host.mouse && k.host.relMouse && k.host.disk != "" && k.host.usbDevice && k.state == "configured"
		}) {
			t.Errorf("%s: the host side sees %v, state %q", state, k.host, k.state)
		}
		// The kernel made the nodes anew: udev's rule gave them to kvmd.
		if out := sh.must(t, "stat -c '%n %U:%G %a' /dev/hidg0 /dev/hidg1 /dev/hidg2"); out != "/dev/hidg0 kvmd:kvmd 600\n/dev/hidg1 kvmd:kvmd 600\n/dev/hidg2 kvmd:kvmd 600" {
			t.Errorf("%s: the nodes:\n%s", state, out)
		}
	}

	if v := s.readUSBView(t); v != bound {
		t.Fatalf("bound at boot: the daemon shows %+v, want %+v", v, bound)
	}

	// An unbind by hand, as a user or another tool may do.
	sh.must(t, "echo > "+gadgetDir+"/UDC")
	changed := time.Now()
	t.Logf("device state: gadget kvmd unbound from %s (echo > UDC)", testUDC)
	expect("unbound", changed, unbound)
	k := hostGone("unbound")
	t.Logf("unbound: UDC %q, %s state %q (stale: dummy_hcd keeps it), function %q, host side %v", k.bound, testUDC, k.state, k.function, k.host)
	if k.bound != "" || k.function != "" {
		t.Errorf("unbound: UDC %q, function %q", k.bound, k.function)
	}

	// Bound again by hand: the nodes are new.
	sh.must(t, "echo "+testUDC+" > "+gadgetDir+"/UDC")
	changed = time.Now()
	t.Logf("device state: gadget kvmd bound to %s again (echo %s > UDC)", testUDC, testUDC)
	expect("rebound", changed, bound)
	hostBack("rebound")

	// kvmd otg stop: the gadget is gone.
	took := time.Now()
	if out := sh.must(t, "kvmd otg stop"); !strings.Contains(out, "removed gadget kvmd") {
		t.Errorf("kvmd otg stop:\n%s", out)
	}
	changed = time.Now()
	t.Logf("kvmd otg stop took %v", changed.Sub(took).Round(10*time.Millisecond))
	t.Logf("device state: gadget kvmd removed (kvmd otg stop)")
	expect("stopped", changed, stopped)
	k = hostGone("stopped")
	if out, st := sh.run(t, "ls -d "+gadgetDir+" /dev/hidg* 2>&1"); st == 0 {
		t.Errorf("stopped: left behind:\n%s", out)
	}
	t.Logf("stopped: %s state %q, function %q", testUDC, k.state, k.function)
	if out := sh.must(t, "kvmd otg stop"); !strings.Contains(out, "nothing to stop") {
		t.Errorf("kvmd otg stop again:\n%s", out)
	}
	var u usbState
	if err := json.Unmarshal([]byte(sh.must(t, "kvmd otg status")), &u); err != nil || u.Status != "no_gadget" || u.Reason == nil ||
		!strings.Contains(*u.Reason, "holds no gadget") {
		t.Errorf("kvmd otg status after stop: %+v %v", u, err)
	}

	// The errors a user meets, on the real kernel: a controller that is
	// not there, and one another gadget holds (changing nothing).
	if out, st := sh.run(t, "kvmd otg start --udc nope"); st != 1 ||
		!strings.Contains(out, "no USB device controller named nope: /sys/class/udc has "+testUDC) {
		t.Errorf("kvmd otg start --udc nope: exit status %d\n%s", st, out)
	}
	const other = "/sys/kernel/config/usb_gadget/other"
	sh.must(t, "mkdir "+other+" "+other+"/configs/c.1 "+other+"/functions/mass_storage.x && "+
		"ln -s "+other+"/functions/mass_storage.x "+other+"/configs/c.1/ && echo "+testUDC+" > "+other+"/UDC")
	t.Logf("device state: another gadget bound to %s", testUDC)
	out, st := sh.run(t, "kvmd otg start")
	if st != 1 || !strings.Contains(out, "the USB device controller is in use: gadget other is bound to "+testUDC) {
		t.Errorf("kvmd otg start with another gadget bound: exit status %d\n%s", st, out)
	}
	if _, st := sh.run(t, "test -e "+gadgetDir); st == 0 {
		t.Errorf("kvmd otg start made its gadget beside another's bound one")
	}
	sh.must(t, "echo > "+other+"/UDC && rm "+other+"/configs/c.1/mass_storage.x && rmdir "+other+"/configs/c.1 "+other+"/functions/mass_storage.x "+other)
	t.Logf("device state: the other gadget removed")

	// And back, through the unit, as at boot.
	took = time.Now()
	sh.must(t, "systemctl restart kvmd-otg.service")
	changed = time.Now()
	t.Logf("systemctl restart kvmd-otg.service took %v", changed.Sub(took).Round(10*time.Millisecond))
	t.Logf("device state: gadget kvmd made and bound to %s again (systemctl restart kvmd-otg)", testUDC)
	expect("restarted", changed, bound)
	hostBack("restarted")
	// The daemon's sandbox named /dev/hidg* by its major when it started;
	// the gadget made anew gets the same one back, so the daemon still
	// reaches the new nodes without a restart.
	s.installProbe(t)
	if got := probeResults(s.inSandbox(t, true, "open rw /dev/hidg0 /dev/hidg1 /dev/hidg2")); got["open-rw /dev/hidg0"] != "ok" || got["open-rw /dev/hidg1"] != "ok" || got["open-rw /dev/hidg2"] != "ok" {
		t.Errorf("after the gadget was made anew, the daemon's sandbox: %v", got)
	}
	t.Logf("USB state checks: %v", time.Since(start).Round(100*time.Millisecond))
}
