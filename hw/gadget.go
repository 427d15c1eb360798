package hw

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"kvmd/gadget"
)

// USB is the state of the USB gadget that makes this machine the host's
// keyboard, mouse and drive.
type USB struct {
	// UDC is the USB device controller the gadget is bound to
	// ("fe980000.usb"), nil when no gadget is bound: the controller exists
	// but nothing drives the port, so there is no state to report either.
	UDC *string `json:"udc"`
	// State is the controller's state as the kernel names it: "configured",
	// "not attached", "powered", "default", "addressed", "suspended"; nil
	// when no gadget is bound or the controller does not report one.
	State *string `json:"state"`
	// Connected reports that a host enumerated the gadget and selected its
	// configuration (State "configured"), the only state in which keys and
	// mouse moves reach it. A "suspended" port is not connected: the host
	// is asleep, or the cable was pulled and the controller saw only the
	// bus go idle (a Pi's dwc2 reports an unplugged cable that way too);
	// input sent then is lost until the host resumes.
	Connected bool `json:"connected"`
	// Gadget is the gadget bound to the controller, or else the first
	// one by name; nil when configfs holds none.
	Gadget *Gadget `json:"gadget"`
	// Status tells the two faults apart, which have different fixes:
	// USBOK (a gadget is bound to a controller), USBNoUDC (no USB device
	// controller at all), USBNoGadget (a controller, but no gadget bound
	// to it).
	Status string `json:"status"`
	// Reason says what is wrong and what to do about it, for a person at
	// the device; nil when Status is USBOK.
	Reason *string `json:"reason"`
}

// USB.Status values.
const (
	USBOK       = "ok"
	USBNoUDC    = "no_udc"
	USBNoGadget = "no_gadget"
)

// Gadget is a USB gadget defined in configfs.
type Gadget struct {
	Name string `json:"name"`
	// VendorID and ProductID are four lower-case hex digits after "0x".
	VendorID     string     `json:"vendor_id"`
	ProductID    string     `json:"product_id"`
	Manufacturer string     `json:"manufacturer"`
	Product      string     `json:"product"`
	Serial       string     `json:"serial"`
	Functions    []Function `json:"functions"`
}

// Function is one function of a gadget: what the host sees as a device.
type Function struct {
	// Name is the configfs directory name, type and instance: "hid.usb0".
	Name string `json:"name"`
	// Type is the function driver: "hid", "mass_storage", "acm", "ecm",
	// "rndis", "ncm", "uvc", "uac2", ...
	Type string `json:"type"`
	// Kind says what the function is to the host. For hid: "keyboard" or
	// "mouse" from the boot protocol, or from the first usage of the report
	// descriptor when the protocol is 0 (PiKVM's absolute mouse), else
	// "hid". For mass_storage: "cdrom" or "disk". Otherwise a word for the
	// class: "serial", "ethernet", "camera", "audio", or the type itself.
	Kind string `json:"kind"`
	// Image is the file behind a mass storage function's first LUN; nil
	// when no medium is inserted and for other functions.
	Image *string `json:"image"`
	// ReadOnly is set for mass storage functions only.
	ReadOnly *bool `json:"read_only"`
	// Enabled reports that a configuration links the function, so the host
	// sees it.
	Enabled bool `json:"enabled"`
}

// USB reads the USB gadget from configfs and its controller's state from
// sysfs, and says what is missing when no gadget is bound: the controller
// (sys/class/udc is empty or absent: the dwc2 overlay is not loaded, or
// the board has none) or the gadget (configfs has none, or none is bound).
func (f FS) USB() (USB, error) {
	udcs, err := f.Glob(gadget.UDCDir + "/*")
	if err != nil {
		return USB{}, err
	}
	var u USB
	var chosen string
	var unbound []string
	_, err = f.Stat(gadget.ConfigfsDir)
	switch {
	case err == nil:
		dirs, err := f.Glob(gadget.ConfigfsDir + "/*")
		if err != nil {
			return USB{}, err
		}
		for _, d := range dirs {
			udc, err := f.readOptional(d + "/UDC")
			if err != nil {
				return USB{}, err
			}
			if udc != "" {
				chosen, u.UDC = d, &udc
				break
			}
			unbound = append(unbound, path.Base(d))
			if chosen == "" {
				chosen = d
			}
		}
	case !Absent(err):
		return USB{}, fmt.Errorf("usb gadget: %w", err)
	}

	switch {
	case u.UDC != nil:
		u.Status = USBOK
	case len(udcs) == 0:
		u.Status, u.Reason = USBNoUDC, reasonNoUDC()
	default:
		u.Status, u.Reason = USBNoGadget, reasonNoGadget(path.Base(udcs[0]), err == nil, unbound)
	}

	if u.UDC != nil {
		state, err := f.ReadString(gadget.UDCDir + "/" + *u.UDC + "/state")
		switch {
		case err == nil:
			u.State = &state
			u.Connected = udcConnected(state)
		case !Absent(err):
			return USB{}, err
		}
	}
	if chosen == "" {
		return u, nil
	}
	g, err := f.readGadget(chosen)
	if err != nil {
		return USB{}, err
	}
	u.Gadget = &g
	return u, nil
}

// reasonNoUDC explains USBNoUDC. Without dtoverlay=dwc2 a Pi Zero or A
// drives its OTG port with the host-only dwc_otg driver, and a Pi 4 or
// later does not enable the controller at all (thagrol/Guides issue 18);
// the Pi 1 B, 2 B and 3 B have only ports behind a USB hub.
func reasonNoUDC() *string {
	s := "no USB device controller (nothing in /sys/class/udc): add dtoverlay=dwc2,dr_mode=peripheral " +
		"to config.txt and reboot (Pi Zero, A models, 4, 400, 5 and Compute Modules have a USB OTG port); " +
		"boards without one (Pi 1 B, 2 B, 3 B, most PCs) cannot act as the target's keyboard"
	return &s
}

// reasonNoGadget explains USBNoGadget: udc is a controller there is;
// configfs whether configfs has the usb_gadget directory; unbound the
// gadgets defined but bound to no controller.
func reasonNoGadget(udc string, configfs bool, unbound []string) *string {
	var s string
	switch {
	case !configfs:
		s = fmt.Sprintf("no USB gadget: controller %s is there, but /sys/kernel/config/usb_gadget is not "+
			"(load libcomposite and mount configfs), so nothing makes this machine the target's keyboard; "+
			"start the gadget service (PiKVM: kvmd-otg)", udc)
	case len(unbound) == 0:
		s = fmt.Sprintf("no USB gadget: controller %s is there, but /sys/kernel/config/usb_gadget holds no gadget; "+
			"start the gadget service (PiKVM: kvmd-otg)", udc)
	default:
		what := "USB gadget " + unbound[0] + " is"
		if len(unbound) > 1 {
			what = "USB gadgets " + strings.Join(unbound, ", ") + " are"
		}
		s = fmt.Sprintf("%s not bound to a controller (UDC empty): restart the gadget service (PiKVM: kvmd-otg), "+
			"or bind one: echo %s > /sys/kernel/config/usb_gadget/%s/UDC", what, udc, unbound[0])
	}
	return &s
}

// readOptional reads a configfs attribute that a fixture may leave out: a
// missing file reads as empty.
func (f FS) readOptional(rel string) (string, error) {
	s, err := f.ReadString(rel)
	if Absent(err) {
		return "", nil
	}
	return s, err
}

func (f FS) readGadget(dir string) (Gadget, error) {
	g := Gadget{Name: path.Base(dir), Functions: []Function{}}
	for _, a := range []struct {
		file string
		dst  *string
		id   bool
	}{
		{"idVendor", &g.VendorID, true},
		{"idProduct", &g.ProductID, true},
		{"strings/0x409/manufacturer", &g.Manufacturer, false},
		{"strings/0x409/product", &g.Product, false},
		{"strings/0x409/serialnumber", &g.Serial, false},
	} {
		s, err := f.readOptional(dir + "/" + a.file)
		if err != nil {
			return Gadget{}, err
		}
		if a.id && s != "" {
			if s, err = parseUSBID(s); err != nil {
				return Gadget{}, fmt.Errorf("%s/%s: %w", dir, a.file, err)
			}
		}
		*a.dst = s
	}

	enabled := map[string]bool{}
	links, err := f.Glob(dir + "/configs/*/*")
	if err != nil {
		return Gadget{}, err
	}
	for _, l := range links {
		// Only a configuration's function links are symlinks; its
		// attributes and strings directory fail to read as one.
		if t, err := f.LinkName(l); err == nil {
			enabled[t] = true
		}
	}

	funcs, err := f.Glob(dir + "/functions/*")
	if err != nil {
		return Gadget{}, err
	}
	for _, fd := range funcs {
		fn, err := f.readFunction(fd)
		if err != nil {
			return Gadget{}, err
		}
		fn.Enabled = enabled[fn.Name]
		g.Functions = append(g.Functions, fn)
	}
	return g, nil
}

func (f FS) readFunction(dir string) (Function, error) {
	fn := Function{Name: path.Base(dir)}
	fn.Type = functionType(fn.Name)
	switch fn.Type {
	case "hid":
		proto, err := f.readOptional(dir + "/protocol")
		if err != nil {
			return Function{}, err
		}
		desc, err := f.ReadFile(dir + "/report_desc")
		if err != nil && !Absent(err) {
			return Function{}, err
		}
		if fn.Kind, err = hidKind(proto, desc); err != nil {
			return Function{}, fmt.Errorf("%s: %w", dir, err)
		}
	case "mass_storage":
		var cdrom, ro bool
		for _, a := range []struct {
			file string
			dst  *bool
		}{{"lun.0/cdrom", &cdrom}, {"lun.0/ro", &ro}} {
			s, err := f.readOptional(dir + "/" + a.file)
			if err != nil {
				return Function{}, err
			}
			if s == "" {
				continue
			}
			if *a.dst, err = parseFlag(s); err != nil {
				return Function{}, fmt.Errorf("%s/%s: %w", dir, a.file, err)
			}
		}
		file, err := f.readOptional(dir + "/lun.0/file")
		if err != nil {
			return Function{}, err
		}
		fn.Kind = "disk"
		if cdrom {
			fn.Kind = "cdrom"
		}
		if file != "" {
			fn.Image = &file
		}
		fn.ReadOnly = &ro
	default:
		fn.Kind = functionKind(fn.Type)
	}
	return fn, nil
}

// udcConnected reports whether a UDC state means a host is using the
// gadget; see USB.Connected.
func udcConnected(state string) bool { return state == "configured" }

// functionType returns the function driver of a configfs function
// directory name: "hid.usb0" → "hid". Instance names may contain dots
// themselves, the driver name never does.
func functionType(name string) string {
	t, _, _ := strings.Cut(name, ".")
	return t
}

// functionKind names what a non-HID, non-storage function is to the host.
func functionKind(typ string) string {
	switch typ {
	case "acm", "gser", "obex":
		return "serial"
	case "ecm", "eem", "ncm", "rndis", "subset":
		return "ethernet"
	case "uvc":
		return "camera"
	case "uac1", "uac2", "midi", "midi2":
		return "audio"
	case "printer":
		return "printer"
	}
	return typ
}

// parseUSBID normalises a configfs idVendor or idProduct ("0x1D6B",
// "0x0104") to four lower-case hex digits after "0x".
func parseUSBID(s string) (string, error) {
	s = strings.TrimSpace(s)
	hex, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok {
		return "", fmt.Errorf("USB ID %q: not 0x-prefixed hex", s)
	}
	n, err := strconv.ParseUint(hex, 16, 16)
	if err != nil {
		return "", fmt.Errorf("USB ID %q: %w", s, err)
	}
	return fmt.Sprintf("0x%04x", n), nil
}

// parseFlag parses a configfs boolean attribute, written as 0 or 1 (the
// kernel accepts the words of kstrtobool, and shows them back as 0/1).
func parseFlag(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "y", "yes", "on", "true":
		return true, nil
	case "0", "n", "no", "off", "false":
		return false, nil
	}
	return false, fmt.Errorf("flag %q: not 0 or 1", s)
}

// HID boot protocols (USB HID 1.11, 4.3) and Generic Desktop usages
// (HID Usage Tables, 4).
const (
	hidProtocolKeyboard = 1
	hidProtocolMouse    = 2
	usagePageDesktop    = 0x01
	usageMouse          = 0x02
	usageKeyboard       = 0x06
)

// hidKind tells a keyboard from a mouse: by the boot protocol when it says,
// else by the usage of the report descriptor's first collection, which is
// how a host reads PiKVM's absolute mouse (protocol 0).
func hidKind(protocol string, desc []byte) (string, error) {
	protocol = strings.TrimSpace(protocol)
	if protocol != "" {
		p, err := strconv.ParseUint(protocol, 10, 8)
		if err != nil {
			return "", fmt.Errorf("HID protocol %q: %w", protocol, err)
		}
		switch p {
		case hidProtocolKeyboard:
			return "keyboard", nil
		case hidProtocolMouse:
			return "mouse", nil
		}
	}
	switch firstUsage(desc) {
	case usagePageDesktop<<16 | usageMouse:
		return "mouse", nil
	case usagePageDesktop<<16 | usageKeyboard:
		return "keyboard", nil
	}
	return "hid", nil
}

// firstUsage returns usage page << 16 | usage of the first Usage item of a
// HID report descriptor (HID 1.11, 6.2.2), or 0 if there is none before the
// first Main item. A truncated descriptor yields what was read so far.
func firstUsage(desc []byte) uint32 {
	var page uint32
	for len(desc) > 0 {
		prefix := desc[0]
		if prefix == 0xfe { // long item: never used for usages
			if len(desc) < 3 {
				return 0
			}
			n := 3 + int(desc[1])
			if len(desc) < n {
				return 0
			}
			desc = desc[n:]
			continue
		}
		size := int(prefix & 3)
		if size == 3 {
			size = 4
		}
		if len(desc) < 1+size {
			return 0
		}
		var v uint32
		for i := size; i > 0; i-- {
			v = v<<8 | uint32(desc[i])
		}
		desc = desc[1+size:]
		switch typ, tag := prefix>>2&3, prefix>>4; {
		case typ == 0: // Main: the first collection or field has begun
			return 0
		case typ == 1 && tag == 0: // Global: Usage Page
			page = v
		case typ == 2 && tag == 0: // Local: Usage
			if size == 4 { // an extended usage carries its page
				return v
			}
			return page<<16 | v
		}
	}
	return 0
}
