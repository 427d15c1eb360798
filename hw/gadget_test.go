package hw

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// hwTree builds a machine below a temporary root: files maps a
// slash-separated path to its content, links a path to a symlink target.
func hwTree(t *testing.T, files, links map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return New(root)
}

// HID report descriptors as PiKVM writes them: they begin with the usage
// of their first collection.
var (
	keyboardDesc = "\x05\x01\x09\x06\xa1\x01\x05\x07\x19\xe0\x29\xe7\x15\x00\x25\x01\x75\x01\x95\x08\x81\x02\xc0"
	mouseDesc    = "\x05\x01\x09\x02\xa1\x01\x09\x01\xa1\x00\x05\x09\x19\x01\x29\x08\xc0\xc0"
)

const kvmdGadget = "sys/kernel/config/usb_gadget/kvmd/"

// pikvmGadget is the gadget kvmd-otg makes: keyboard, relative and
// absolute mice, a CD-ROM, and a serial port left out of the configuration.
func pikvmGadget() (files, links map[string]string) {
	g := kvmdGadget
	files = map[string]string{
		g + "UDC":                                     "fe980000.usb\n",
		g + "idVendor":                                "0x1d6b\n",
		g + "idProduct":                               "0x0104\n",
		g + "bcdDevice":                               "0x0100\n",
		g + "strings/0x409/manufacturer":              "PiKVM\n",
		g + "strings/0x409/product":                   "PiKVM Composite Device\n",
		g + "strings/0x409/serialnumber":              "CAFEBABE\n",
		g + "functions/hid.usb0/protocol":             "1\n",
		g + "functions/hid.usb0/subclass":             "1\n",
		g + "functions/hid.usb0/report_desc":          keyboardDesc,
		g + "functions/hid.usb1/protocol":             "0\n",
		g + "functions/hid.usb1/subclass":             "0\n",
		g + "functions/hid.usb1/report_desc":          mouseDesc,
		g + "functions/hid.usb2/protocol":             "2\n",
		g + "functions/hid.usb2/report_desc":          mouseDesc,
		g + "functions/mass_storage.usb0/stall":       "0\n",
		g + "functions/mass_storage.usb0/lun.0/cdrom": "1\n",
		g + "functions/mass_storage.usb0/lun.0/ro":    "1\n",
		g + "functions/mass_storage.usb0/lun.0/file":  "/var/lib/kvmd/msd/images/debian-12.iso\n",
		g + "functions/acm.usb0/port_num":             "0\n",
		g + "configs/c.1/MaxPower":                    "200\n",
		g + "configs/c.1/strings/0x409/configuration": "Config 1: ECM network\n",
		"sys/class/udc/fe980000.usb/state":            "configured\n",
	}
	links = map[string]string{}
	for _, fn := range []string{"hid.usb0", "hid.usb1", "hid.usb2", "mass_storage.usb0"} {
		links[g+"configs/c.1/"+fn] = "../../../../usb_gadget/kvmd/functions/" + fn
	}
	return files, links
}

func pikvmWant() *Gadget {
	return &Gadget{
		Name: "kvmd", VendorID: "0x1d6b", ProductID: "0x0104",
		Manufacturer: "PiKVM", Product: "PiKVM Composite Device", Serial: "CAFEBABE",
		Functions: []Function{
			{Name: "acm.usb0", Type: "acm", Kind: "serial"},
			{Name: "hid.usb0", Type: "hid", Kind: "keyboard", Enabled: true},
			{Name: "hid.usb1", Type: "hid", Kind: "mouse", Enabled: true},
			{Name: "hid.usb2", Type: "hid", Kind: "mouse", Enabled: true},
			{Name: "mass_storage.usb0", Type: "mass_storage", Kind: "cdrom",
				Image: refOf("/var/lib/kvmd/msd/images/debian-12.iso"), ReadOnly: refOf(true), Enabled: true},
		},
	}
}

func TestUSB(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(files, links map[string]string)
		want  USB
		valid bool // false: the error must say malformed, not absent
	}{{
		name:  "pikvm configured",
		valid: true,
		want:  USB{UDC: refOf("fe980000.usb"), State: refOf("configured"), Connected: true, Gadget: pikvmWant(), Status: USBOK},
	}, {
		name:  "host asleep",
		valid: true,
		edit:  func(f, _ map[string]string) { f["sys/class/udc/fe980000.usb/state"] = "suspended\n" },
		want:  USB{UDC: refOf("fe980000.usb"), State: refOf("suspended"), Gadget: pikvmWant(), Status: USBOK},
	}, {
		name:  "cable out",
		valid: true,
		edit:  func(f, _ map[string]string) { f["sys/class/udc/fe980000.usb/state"] = "not attached\n" },
		want:  USB{UDC: refOf("fe980000.usb"), State: refOf("not attached"), Gadget: pikvmWant(), Status: USBOK},
	}, {
		name:  "bound, controller without state",
		valid: true,
		edit:  func(f, _ map[string]string) { delete(f, "sys/class/udc/fe980000.usb/state") },
		want:  USB{UDC: refOf("fe980000.usb"), Gadget: pikvmWant(), Status: USBOK},
	}, {
		name:  "unbound",
		valid: true,
		edit:  func(f, _ map[string]string) { f[kvmdGadget+"UDC"] = "\n" },
		want: USB{Gadget: pikvmWant(), Status: USBNoGadget, Reason: refOf("USB gadget kvmd is not bound to a controller (UDC empty): " +
			"restart the gadget service (PiKVM: kvmd-otg), or bind one: echo fe980000.usb > /sys/kernel/config/usb_gadget/kvmd/UDC")},
	}, {
		name:  "bound gadget wins over the first by name",
		valid: true,
		edit: func(f, _ map[string]string) {
			f["sys/kernel/config/usb_gadget/aaa/UDC"] = "\n"
			f["sys/kernel/config/usb_gadget/aaa/idVendor"] = "0x0000\n"
		},
		want: USB{UDC: refOf("fe980000.usb"), State: refOf("configured"), Connected: true, Gadget: pikvmWant(), Status: USBOK},
	}, {
		name:  "unbound gadgets: the first by name",
		valid: true,
		edit: func(f, _ map[string]string) {
			f[kvmdGadget+"UDC"] = ""
			f["sys/kernel/config/usb_gadget/aaa/idVendor"] = "0x1D6B\n"
			f["sys/kernel/config/usb_gadget/aaa/idProduct"] = "0x104\n"
		},
		want: USB{Gadget: &Gadget{Name: "aaa", VendorID: "0x1d6b", ProductID: "0x0104", Functions: []Function{}},
			Status: USBNoGadget, Reason: refOf("USB gadgets aaa, kvmd are not bound to a controller (UDC empty): " +
				"restart the gadget service (PiKVM: kvmd-otg), or bind one: echo fe980000.usb > /sys/kernel/config/usb_gadget/aaa/UDC")},
	}, {
		name:  "no medium, writable disk",
		valid: true,
		edit: func(f, _ map[string]string) {
			f[kvmdGadget+"functions/mass_storage.usb0/lun.0/cdrom"] = "0\n"
			f[kvmdGadget+"functions/mass_storage.usb0/lun.0/ro"] = "0\n"
			f[kvmdGadget+"functions/mass_storage.usb0/lun.0/file"] = "\n"
		},
		want: func() USB {
			g := pikvmWant()
			g.Functions[4].Kind, g.Functions[4].Image, g.Functions[4].ReadOnly = "disk", nil, refOf(false)
			return USB{UDC: refOf("fe980000.usb"), State: refOf("configured"), Connected: true, Gadget: g, Status: USBOK}
		}(),
	}, {
		name: "idVendor not hex",
		edit: func(f, _ map[string]string) { f[kvmdGadget+"idVendor"] = "0xzz\n" },
	}, {
		name: "idProduct too wide",
		edit: func(f, _ map[string]string) { f[kvmdGadget+"idProduct"] = "0x10000\n" },
	}, {
		name: "ro not a flag",
		edit: func(f, _ map[string]string) { f[kvmdGadget+"functions/mass_storage.usb0/lun.0/ro"] = "maybe\n" },
	}, {
		name: "hid protocol not a number",
		edit: func(f, _ map[string]string) { f[kvmdGadget+"functions/hid.usb0/protocol"] = "kbd\n" },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, links := pikvmGadget()
			if tt.edit != nil {
				tt.edit(files, links)
			}
			got, err := hwTree(t, files, links).USB()
			if !tt.valid {
				if err == nil || Absent(err) {
					t.Fatalf("USB() = %+v, %v; want a malformed-value error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("USB():\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, tt.want))
			}
		})
	}
}

// TestUSBFaults: no gadget is bound, and the reason says which of the
// two faults it is.
func TestUSBFaults(t *testing.T) {
	const udc = "sys/class/udc/fe980000.usb/state"
	tests := []struct {
		name   string
		files  map[string]string
		status string
		reason []string // words the reason must hold
	}{
		// A PC: no UDC class, no configfs.
		{"no udc class", map[string]string{"proc/": ""}, USBNoUDC, []string{"dtoverlay=dwc2"}},
		// A Pi without the overlay: the class exists, empty.
		{"udc class empty", map[string]string{"sys/class/udc/": "", "sys/kernel/config/usb_gadget/": ""}, USBNoUDC,
			[]string{"no USB device controller", "dtoverlay=dwc2,dr_mode=peripheral", "config.txt"}},
		// The controller, but gadgets defined and not bound count less
		// than no controller: that is the fault to fix first.
		{"gadget but no udc", map[string]string{"sys/class/udc/": "", kvmdGadget + "UDC": "\n"}, USBNoUDC, []string{"dtoverlay=dwc2"}},
		{"no configfs", map[string]string{udc: "not attached\n"}, USBNoGadget,
			[]string{"fe980000.usb", "/sys/kernel/config/usb_gadget is not", "libcomposite", "kvmd-otg"}},
		{"configfs without gadget", map[string]string{udc: "not attached\n", "sys/kernel/config/usb_gadget/": ""}, USBNoGadget,
			[]string{"fe980000.usb", "holds no gadget", "kvmd-otg"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hwTree(t, tt.files, nil).USB()
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.status || got.Reason == nil || got.UDC != nil || got.State != nil || got.Connected {
				t.Fatalf("USB() = %s, want status %s with a reason", jsonOf(t, got), tt.status)
			}
			for _, w := range tt.reason {
				if !strings.Contains(*got.Reason, w) {
					t.Errorf("reason %q does not say %q", *got.Reason, w)
				}
			}
		})
	}

	// The shape stays the one of a working gadget, with status and reason.
	got, err := hwTree(t, map[string]string{"sys/class/udc/": ""}, nil).USB()
	if err != nil {
		t.Fatal(err)
	}
	if j, want := jsonOf(t, got), `{"udc":null,"state":null,"connected":false,"gadget":null,"status":"no_udc","reason":"`; !strings.HasPrefix(j, want) {
		t.Errorf("JSON %s, want it to begin %s", j, want)
	}
}

func TestUSBJSON(t *testing.T) {
	files, links := pikvmGadget()
	got, err := hwTree(t, files, links).USB()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"udc":"fe980000.usb","state":"configured","connected":true,"gadget":{"name":"kvmd",` +
		`"vendor_id":"0x1d6b","product_id":"0x0104","manufacturer":"PiKVM","product":"PiKVM Composite Device",` +
		`"serial":"CAFEBABE","functions":[` +
		`{"name":"acm.usb0","type":"acm","kind":"serial","image":null,"read_only":null,"enabled":false},` +
		`{"name":"hid.usb0","type":"hid","kind":"keyboard","image":null,"read_only":null,"enabled":true},` +
		`{"name":"hid.usb1","type":"hid","kind":"mouse","image":null,"read_only":null,"enabled":true},` +
		`{"name":"hid.usb2","type":"hid","kind":"mouse","image":null,"read_only":null,"enabled":true},` +
		`{"name":"mass_storage.usb0","type":"mass_storage","kind":"cdrom",` +
		`"image":"/var/lib/kvmd/msd/images/debian-12.iso","read_only":true,"enabled":true}]},"status":"ok","reason":null}`
	if j := jsonOf(t, got); j != want {
		t.Errorf("JSON:\n got %s\nwant %s", j, want)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseUSBID(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"0x1d6b", "0x1d6b", true},
		{"0x1D6B\n", "0x1d6b", true},
		{"0X0104", "0x0104", true},
		{"0x104", "0x0104", true},
		{"0x0", "0x0000", true},
		{"1d6b", "", false},
		{"0x", "", false},
		{"0x1d6b7", "", false},
		{"0x-1", "", false},
		{"", "", false},
	} {
		got, err := parseUSBID(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseUSBID(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseFlag(t *testing.T) {
	for _, tt := range []struct {
		in       string
		want, ok bool
	}{
		{"1\n", true, true}, {"0\n", false, true}, {"Y", true, true}, {"n", false, true},
		{"", false, false}, {"2", false, false}, {"10", false, false},
	} {
		got, err := parseFlag(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseFlag(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestHIDKind(t *testing.T) {
	for _, tt := range []struct {
		protocol, desc, want string
		ok                   bool
	}{
		{"1\n", "", "keyboard", true},
		{"2\n", "", "mouse", true},
		{"2", keyboardDesc, "mouse", true}, // the protocol says, when it does
		{"0\n", mouseDesc, "mouse", true},  // PiKVM's absolute mouse
		{"0\n", keyboardDesc, "keyboard", true},
		{"", keyboardDesc, "keyboard", true},
		{"0", "", "hid", true},
		{"0", "\x06\x00\xff\x09\x01\xa1\x01", "hid", true},              // vendor page
		{"0", "\x0b\x02\x00\x01\x00\xa1\x01", "mouse", true},            // extended usage with its page
		{"0", "\xa1\x01\x05\x01\x09\x02\xc0", "hid", true},              // collection before any usage
		{"0", "\xfe\x02\x10\xaa\xbb\x05\x01\x09\x06", "keyboard", true}, // long item skipped
		{"0", "\x05\x01\x09", "hid", true},                              // truncated
		{"0", "\xfe\x05\x10", "hid", true},                              // truncated long item
		{"0", "\x05", "hid", true},
		{"x", keyboardDesc, "", false},
		{"256", "", "", false},
		{"-1", "", "", false},
	} {
		got, err := hidKind(tt.protocol, []byte(tt.desc))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("hidKind(%q, % x) = %q, %v; want %q, ok %v", tt.protocol, tt.desc, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzFirstUsage(f *testing.F) {
	f.Add([]byte(keyboardDesc))
	f.Add([]byte(mouseDesc))
	f.Add([]byte("\xfe\xff"))
	f.Fuzz(func(t *testing.T, desc []byte) {
		firstUsage(desc) // must not panic on any descriptor
	})
}

func TestFunctionType(t *testing.T) {
	for in, want := range map[string][2]string{
		"hid.usb0":          {"hid", "hid"},
		"mass_storage.usb0": {"mass_storage", "mass_storage"},
		"acm.usb0":          {"acm", "serial"},
		"ecm.usb0":          {"ecm", "ethernet"},
		"rndis.usb0":        {"rndis", "ethernet"},
		"ncm.usb0":          {"ncm", "ethernet"},
		"uvc.usb0":          {"uvc", "camera"},
		"uac2.usb0":         {"uac2", "audio"},
		"ffs.my.adb":        {"ffs", "ffs"},
		"odd":               {"odd", "odd"},
	} {
		typ := functionType(in)
		if got := [2]string{typ, functionKind(typ)}; got != want {
			t.Errorf("%s: type, kind %q, want %q", in, got, want)
		}
	}
}
