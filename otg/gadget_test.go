package otg

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"kvmd/gadget"
)

const kvmdUID = 1000

func started(t *testing.T, m *modelFS, s Settings) Result {
	t.Helper()
	r, err := m.manager().Start(context.Background(), s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return r
}

func attrOf(t *testing.T, m *modelFS, rel string) string {
	t.Helper()
	n, ok := m.nodes[gadget.Dir+"/"+rel]
	if !ok {
		t.Fatalf("no %s", rel)
	}
	return string(n.data)
}

// TestStart: the gadget as PiKVM's kvmd-otg makes it, bound, its nodes
// and the LUN's attributes the daemon's user's.
func TestStart(t *testing.T) {
	m := newModel().withUDC("fe980000.usb")
	m.udevUID = kvmdUID
	s := quick()
	s.UID, s.GID = kvmdUID, kvmdUID
	r := started(t, m, s)
	if !r.Changed || r.UDC != "fe980000.usb" || !slices.Equal(r.Nodes, []string{"/dev/hidg0", "/dev/hidg1", "/dev/hidg2"}) {
		t.Errorf("Start = %+v", r)
	}
	for rel, want := range map[string]string{
		"UDC":                                              "fe980000.usb\n",
		"idVendor":                                         "0x1d6b\n",
		"idProduct":                                        "0x0104\n",
		"bcdDevice":                                        "0x0100\n",
		"bcdUSB":                                           "0x0200\n",
		"strings/0x409/manufacturer":                       "PiKVM\n",
		"strings/0x409/product":                            "PiKVM Composite Device\n",
		"strings/0x409/serialnumber":                       "CAFEBABE\n",
		"configs/c.1/MaxPower":                             "250\n",
		"configs/c.1/bmAttributes":                         "0xa0\n",
		"functions/hid.usb0/protocol":                      "1\n",
		"functions/hid.usb0/subclass":                      "1\n",
		"functions/hid.usb0/report_length":                 "8\n",
		"functions/hid.usb0/no_out_endpoint":               "1\n",
		"functions/hid.usb1/protocol":                      "0\n",
		"functions/hid.usb1/report_length":                 "7\n",
		"functions/hid.usb1/subclass":                      "0\n",
		"functions/hid.usb2/protocol":                      "2\n",
		"functions/hid.usb2/subclass":                      "1\n",
		"functions/hid.usb2/report_length":                 "5\n",
		"functions/hid.usb2/no_out_endpoint":               "1\n",
		"functions/mass_storage.usb0/stall":                "0\n",
		"functions/mass_storage.usb0/lun.0/cdrom":          "0\n",
		"functions/mass_storage.usb0/lun.0/ro":             "1\n",
		"functions/mass_storage.usb0/lun.0/removable":      "1\n",
		"functions/mass_storage.usb0/lun.0/inquiry_string": "PiKVM   Flash Drive     1.00\n",
	} {
		if got := attrOf(t, m, rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	if got := attrOf(t, m, "functions/hid.usb0/report_desc"); got != string(KeyboardHID().Descriptor) {
		t.Errorf("keyboard report_desc % x", got)
	}
	if got := attrOf(t, m, "functions/hid.usb1/report_desc"); got != string(MouseHID(true).Descriptor) {
		t.Errorf("mouse report_desc % x", got)
	}
	if got := attrOf(t, m, "functions/hid.usb2/report_desc"); got != string(RelativeMouseHID(true).Descriptor) {
		t.Errorf("relative mouse report_desc % x", got)
	}
	for _, fn := range []string{gadget.Keyboard, gadget.Mouse, gadget.MouseAlt, gadget.MassStorage} {
		if l, err := m.Readlink(gadget.Dir + "/configs/c.1/" + fn); err != nil || l != "/"+gadget.FunctionDir(fn) {
			t.Errorf("configs/c.1/%s -> %q, %v", fn, l, err)
		}
	}
	for _, a := range lunOwned {
		if n := m.nodes[gadget.LUNDir()+"/"+a]; n.uid != kvmdUID || n.gid != kvmdUID {
			t.Errorf("lun.0/%s owned by %d:%d", a, n.uid, n.gid)
		}
	}
	if n := m.nodes[gadget.LUNDir()+"/removable"]; n.uid != 0 {
		t.Errorf("lun.0/removable given away")
	}
	// Binding comes after every attribute and link (the kernel fixes a
	// bound gadget's functions); only the LUN's owner is set after it.
	bind := slices.Index(m.log, "write "+gadget.Dir+"/UDC")
	for _, l := range m.log[bind+1:] {
		if !strings.HasPrefix(l, "chown "+gadget.LUNDir()+"/") {
			t.Errorf("after binding: %q", l)
		}
	}
	// Nothing given to the user by Start itself: udev's rule did it.
	if slices.ContainsFunc(m.log, func(l string) bool { return strings.HasPrefix(l, "chown dev/") }) {
		t.Errorf("Start chowned the nodes though udev had: %q", m.log)
	}
}

// TestStartNoUdevRule: without the udev rule, Start gives the nodes to
// the user itself, and says so.
func TestStartNoUdevRule(t *testing.T) {
	m := newModel().withUDC("dummy_udc.0")
	s := quick()
	s.UID, s.GID = kvmdUID, kvmdUID
	r := started(t, m, s)
	for _, n := range []string{"dev/hidg0", "dev/hidg1", "dev/hidg2"} {
		if !m.OwnedBy(n, kvmdUID, 0o600) {
			t.Errorf("%s: %+v", n, *m.nodes[n])
		}
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "no udev rule did") {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestStartIdempotent: a second Start changes nothing, and a settings
// change makes the gadget anew; a moved controller rebinds it.
func TestStartIdempotent(t *testing.T) {
	m := newModel().withUDC("a.usb").withUDC("b.usb")
	m.udevUID = kvmdUID
	s := quick()
	s.UDC, s.UID, s.GID = "a.usb", kvmdUID, kvmdUID
	started(t, m, s)
	n := len(m.log)
	r := started(t, m, s)
	if r.Changed || len(m.log) != n || !strings.Contains(r.Notes[0], "nothing changed") {
		t.Errorf("second Start: %+v, changes %q", r, m.log[n:])
	}

	s.Product = "Another KVM"
	r = started(t, m, s)
	if !r.Changed || attrOf(t, m, "strings/0x409/product") != "Another KVM\n" || attrOf(t, m, "UDC") != "a.usb\n" {
		t.Errorf("Start with another product: %+v", r)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), `strings/0x409/product is "PiKVM Composite Device", not "Another KVM"`) {
		t.Errorf("notes %q", r.Notes)
	}

	s.UDC = "b.usb"
	n = len(m.log)
	r = started(t, m, s)
	if attrOf(t, m, "UDC") != "b.usb\n" || slices.ContainsFunc(m.log[n:], func(l string) bool { return strings.HasPrefix(l, "mkdir") }) {
		t.Errorf("Start on another controller: %+v, changes %q", r, m.log[n:])
	}

	// The daemon's runtime changes (a medium, its flags) are not a
	// difference.
	m.nodes[gadget.LUNDir()+"/cdrom"].data = []byte("1\n")
	m.nodes[gadget.LUNDir()+"/file"].data = []byte("/var/lib/kvmd/msd/x.iso\n")
	if r := started(t, m, s); r.Changed {
		t.Errorf("Start after the daemon inserted a medium: %+v", r)
	}

	// Attributes that lost their owner are given back, and nothing else
	// is done (the booted test once found them root's after a start).
	m.nodes[gadget.LUNDir()+"/ro"].uid = 0
	n = len(m.log)
	r = started(t, m, s)
	if r.Changed || m.nodes[gadget.LUNDir()+"/ro"].uid != kvmdUID || !strings.Contains(strings.Join(r.Notes, "\n"), "gave the drive's ro to uid 1000 again") {
		t.Errorf("Start with a LUN attribute root's: %+v, changes %q", r, m.log[n:])
	}

	// An unbound gadget is bound again.
	if err := m.WriteAttr(gadget.Dir+"/UDC", []byte("\n")); err != nil {
		t.Fatal(err)
	}
	if r := started(t, m, s); !r.Changed || attrOf(t, m, "UDC") != "b.usb\n" {
		t.Errorf("Start of the unbound gadget: %+v", r)
	}
}

// TestStartHalfMade: a gadget left without its links is taken down and
// made again.
func TestStartHalfMade(t *testing.T) {
	m := newModel().withUDC("dummy_udc.0")
	for _, d := range []string{gadget.Dir, gadget.Dir + "/functions/hid.usb0", gadget.Dir + "/configs/c.1"} {
		if err := m.Mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	r := started(t, m, quick())
	if !strings.Contains(strings.Join(r.Notes, "\n"), "hid.usb0 is not in configuration c.1") || attrOf(t, m, "UDC") != "dummy_udc.0\n" {
		t.Errorf("Start: %+v", r)
	}
}

func TestStartErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		model func() *modelFS
		udc   string
		want  error
		msg   string
	}{
		{"no configfs", func() *modelFS { return newModel().withUDC("u").noConfigfs() }, "", ErrNoConfigfs, "mount -t configfs"},
		{"no libcomposite", func() *modelFS { return newModel().withUDC("u").noComposite() }, "", ErrNoLibcomposite, "modprobe libcomposite"},
		{"no UDC", newModel, "", ErrNoUDC, "dtoverlay=dwc2"},
		{"not the UDC configured", func() *modelFS { return newModel().withUDC("u") }, "v", ErrNoUDC, "named v: /sys/class/udc has u"},
		{"several UDCs", func() *modelFS { return newModel().withUDC("u").withUDC("v") }, "", ErrManyUDCs, "u, v; choose one with --udc"},
		{"another gadget", func() *modelFS {
			m := newModel().withUDC("u")
			m.Mkdir(gadget.ConfigfsDir + "/g1")
			m.WriteAttr(gadget.ConfigfsDir+"/g1/UDC", []byte("u"))
			return m
		}, "", ErrUDCBusy, "gadget g1 is bound to u; unbind it (echo > /sys/kernel/config/usb_gadget/g1/UDC)"},
		{"a legacy gadget driver", func() *modelFS {
			m := newModel().withUDC("u")
			m.nodes["sys/class/udc/u/function"].data = []byte("g_ether\n")
			return m
		}, "", ErrUDCBusy, "driver g_ether is bound to u"},
		{"no usb_f_hid", func() *modelFS {
			m := newModel().withUDC("u")
			m.funcTypes = []string{"mass_storage"}
			return m
		}, "", ErrNoFunction, "hid (modprobe usb_f_hid)"},
		{"the hid minors taken", func() *modelFS {
			// Another, unbound gadget holds two of the kernel's four.
			m := newModel().withUDC("u")
			m.Mkdir(gadget.ConfigfsDir + "/g1")
			m.Mkdir(gadget.ConfigfsDir + "/g1/functions/hid.a")
			m.Mkdir(gadget.ConfigfsDir + "/g1/functions/hid.b")
			return m
		}, "", ErrNoHIDMinor, "hid.usb2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model()
			s := quick()
			s.UDC = tc.udc
			before := len(m.children(gadget.ConfigfsDir))
			_, err := m.manager().Start(context.Background(), s)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Start: %v, want %v with %q", err, tc.want, tc.msg)
			}
			// Nothing of ours is left behind.
			if m.Exists(gadget.Dir) || len(m.children(gadget.ConfigfsDir)) != before {
				t.Errorf("left %q", m.children(gadget.ConfigfsDir))
			}
		})
	}
}

// TestStop: the gadget unbound and gone, the nodes with it; another
// gadget stays; a second Stop does nothing.
func TestStop(t *testing.T) {
	m := newModel().withUDC("u").withUDC("v")
	m.Mkdir(gadget.ConfigfsDir + "/other")
	m.Mkdir(gadget.ConfigfsDir + "/other/functions/acm.usb0")
	s := quick()
	s.UDC = "u"
	started(t, m, s)
	// A medium in, as the daemon leaves it.
	m.nodes[gadget.LUNDir()+"/file"].data = []byte("/var/lib/kvmd/msd/x.img\n")

	r, err := m.manager().Stop()
	if err != nil || !r.Changed {
		t.Fatalf("Stop: %+v, %v", r, err)
	}
	if m.Exists(gadget.Dir) || m.Exists("dev/hidg0") || !m.Exists(gadget.ConfigfsDir+"/other/functions/acm.usb0") {
		t.Errorf("after Stop: %q", m.children(gadget.ConfigfsDir))
	}
	if strings.TrimSpace(string(m.nodes["sys/class/udc/u/function"].data)) != "" {
		t.Error("the controller still has a driver")
	}
	r, err = m.manager().Stop()
	if err != nil || r.Changed {
		t.Errorf("second Stop: %+v, %v", r, err)
	}
	// And it can be made again.
	started(t, m, s)
}

// TestStopExtras: what another tool added to the gadget (a function, a
// configuration's strings, a LUN) does not keep Stop from removing it.
func TestStopExtras(t *testing.T) {
	m := newModel().withUDC("u")
	started(t, m, quick())
	for _, d := range []string{"functions/acm.usb0", "configs/c.1/strings/0x409", "configs/c.2"} {
		if err := m.Mkdir(gadget.Dir + "/" + d); err != nil {
			t.Fatal(err)
		}
	}
	m.nodes[gadget.Dir+"/UDC"].data = []byte("\n") // unbind to link
	m.nodes["sys/class/udc/u/function"].data = nil
	if err := m.Symlink("/"+gadget.FunctionDir("acm.usb0"), gadget.Dir+"/configs/c.2/acm.usb0"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.manager().Stop(); err != nil || m.Exists(gadget.Dir) {
		t.Fatalf("Stop: %v; left %q", err, m.children(gadget.Dir))
	}
}

func TestSettingsCheck(t *testing.T) {
	for _, bad := range []func(*Settings){
		func(s *Settings) { s.Manufacturer = "" },
		func(s *Settings) { s.Product = strings.Repeat("x", 127) },
		func(s *Settings) { s.Serial = "a\nb" },
		func(s *Settings) { s.MaxPower = 501 },
		func(s *Settings) { s.UDC = "../x" },
	} {
		s := DefaultSettings()
		bad(&s)
		if err := s.Check(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	if err := DefaultSettings().Check(); err != nil {
		t.Error(err)
	}
}

// reportBits returns the bits of a descriptor's input and output reports.
func reportBits(t *testing.T, d []byte) (in, out int) {
	t.Helper()
	for _, f := range reportFields(t, d) {
		if f.output {
			out += f.size
		} else {
			in += f.size
		}
	}
	return in, out
}

// TestDescriptors: report_length is the input report the descriptor
// describes (f_hid sends report_length bytes; a host parses the
// descriptor); the keyboard has a one-byte LED output report; the
// collections close.
func TestDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      HID
		outLen int
	}{
		{"keyboard", KeyboardHID(), 8},
		{"mouse", MouseHID(false), 0},
		{"mouse with horizontal wheel", MouseHID(true), 0},
		{"relative mouse", RelativeMouseHID(false), 0},
		{"relative mouse with horizontal wheel", RelativeMouseHID(true), 0},
	} {
		in, out := reportBits(t, tc.h.Descriptor)
		if in != tc.h.ReportLength*8 || out != tc.outLen {
			t.Errorf("%s: input %d bits (report_length %d), output %d bits", tc.name, in, tc.h.ReportLength, out)
		}
		open := bytes.Count(tc.h.Descriptor, []byte{collection}) // 0xa1 only ever starts an item here
		if closed := bytes.Count(tc.h.Descriptor, []byte{endCollection}); open != closed {
			t.Errorf("%s: %d collections, %d ends", tc.name, open, closed)
		}
	}
	if MouseHID(false).ReportLength != 6 || MouseHID(true).ReportLength != 7 ||
		RelativeMouseHID(false).ReportLength != 4 || RelativeMouseHID(true).ReportLength != 5 {
		t.Error("mouse report lengths")
	}
}

func TestSameAttr(t *testing.T) {
	for _, tc := range []struct {
		shown, written string
		same           bool
	}{
		{"0x1d6b\n", "0x1D6B", true},
		{"250\n", "250", true},
		{"0xa0\n", "0xa0", true},
		{"PiKVM\n", "PiKVM", true},
		{"PiKVM\n", "PiKVM2", false},
		{"1\n", "0", false},
		{"\x05\x01", "\x05\x01", true},
		{"\x05\x01", "\x05\x02", false},
	} {
		if got := sameAttr([]byte(tc.shown), []byte(tc.written)); got != tc.same {
			t.Errorf("sameAttr(%q, %q) = %v", tc.shown, tc.written, got)
		}
	}
}

// TestStartRelativeMouse: the relative mouse is hid.usb2, made after the
// absolute one (so /dev/hidg2, as PiKVM's udev rules expect); a gadget
// made without it (by an older kvmd otg, or with relative-mouse off) is
// made again with it, and the other way round.
func TestStartRelativeMouse(t *testing.T) {
	m := newModel().withUDC("dummy_udc.0")
	s := quick()
	s.RelativeMouse = false
	if r := started(t, m, s); !slices.Equal(r.Nodes, []string{"/dev/hidg0", "/dev/hidg1"}) || m.Exists(gadget.FunctionDir(gadget.MouseAlt)) {
		t.Errorf("without the relative mouse: %+v", r)
	}
	s.RelativeMouse = true
	r := started(t, m, s)
	if !slices.Equal(r.Nodes, []string{"/dev/hidg0", "/dev/hidg1", "/dev/hidg2"}) ||
		!strings.Contains(strings.Join(r.Notes, "\n"), "hid.usb2 is not in configuration c.1") {
		t.Errorf("with the relative mouse: %+v", r)
	}
	if l, err := m.Readlink(gadget.Dir + "/configs/c.1/" + gadget.MouseAlt); err != nil || l != "/"+gadget.FunctionDir(gadget.MouseAlt) {
		t.Errorf("configs/c.1/hid.usb2 -> %q, %v", l, err)
	}
	if r := started(t, m, s); r.Changed {
		t.Errorf("again: %+v", r)
	}
	s.RelativeMouse = false
	r = started(t, m, s)
	if !slices.Equal(r.Nodes, []string{"/dev/hidg0", "/dev/hidg1"}) || m.Exists(gadget.FunctionDir(gadget.MouseAlt)) ||
		!strings.Contains(strings.Join(r.Notes, "\n"), "hid.usb2 is in configuration c.1, not asked for") {
		t.Errorf("turned off: %+v", r)
	}
}
