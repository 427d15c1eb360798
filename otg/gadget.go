package otg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvmd/gadget"
	"kvmd/hw"
)

// Settings are the gadget's settings: what the host sees. The defaults are
// PiKVM's (kvmd/apps/_scheme.py, section otg), so that a host sees the
// same device from either.
type Settings struct {
	// UDC is the USB device controller to bind to ("fe980000.usb"); empty:
	// the only one there is.
	UDC string
	// UDCWait is how long Start waits for a controller to appear (a Pi's
	// dwc2 is loaded by udev at boot, maybe after the gadget's unit
	// starts).
	UDCWait time.Duration

	VendorID      uint16 // idVendor
	ProductID     uint16 // idProduct
	DeviceVersion uint16 // bcdDevice
	USBVersion    uint16 // bcdUSB
	Manufacturer  string
	Product       string
	Serial        string // empty: none
	// MaxPower is what the configuration draws from the host, mA.
	MaxPower int
	// RemoteWakeup lets a key press wake a sleeping host.
	RemoteWakeup bool

	// HorizontalWheel gives the mice a horizontal wheel (7-byte reports
	// instead of 6 for the absolute one, 5 instead of 4 for the relative
	// one).
	HorizontalWheel bool
	// RelativeMouse adds the second, relative mouse (gadget.MouseAlt), which a
	// host's firmware and systems without absolute pointers can use.
	RelativeMouse bool
	// CDROM makes the drive a CD-ROM rather than a removable disk until
	// the daemon says otherwise.
	CDROM bool

	// UID and GID own the keyboard's and mouse's device nodes (mode 0600)
	// and the drive's attributes the daemon writes (file, ro, cdrom,
	// forced_eject); -1: left to root.
	UID, GID int
	// NodeWait is how long Start waits for udev to give the device nodes
	// to UID before it does so itself.
	NodeWait time.Duration
}

// DefaultSettings returns PiKVM's gadget: the Linux Foundation's IDs for a
// multifunction composite gadget, PiKVM's strings, USB 2.0, 250 mA, remote
// wakeup, an absolute and a relative mouse (kvmd's mouse and mouse_alt,
// both on by default) with a horizontal wheel, the drive a read-only
// removable disk (PiKVM's MSD resets it so: kvmd/plugins/msd/otg).
func DefaultSettings() Settings {
	return Settings{
		UDCWait:         0,
		VendorID:        0x1d6b,
		ProductID:       0x0104,
		DeviceVersion:   0x0100,
		USBVersion:      0x0200,
		Manufacturer:    "PiKVM",
		Product:         "PiKVM Composite Device",
		Serial:          "CAFEBABE",
		MaxPower:        250,
		RemoteWakeup:    true,
		HorizontalWheel: true,
		RelativeMouse:   true,
		UID:             -1,
		GID:             -1,
		NodeWait:        5 * time.Second,
	}
}

// Check reports settings the kernel would refuse, before anything is made.
func (c Settings) Check() error {
	for _, s := range []struct{ name, v string }{{"manufacturer", c.Manufacturer}, {"product", c.Product}, {"serial", c.Serial}} {
		// usb_string_copy (drivers/usb/gadget/configfs.c) takes up to
		// 126 bytes; a string descriptor holds 126 UTF-16 units.
		if len(s.v) > 126 || strings.ContainsAny(s.v, "\n\x00") {
			return fmt.Errorf("otg: %s %q: at most 126 bytes, on one line", s.name, s.v)
		}
	}
	if c.Manufacturer == "" || c.Product == "" {
		return errors.New("otg: manufacturer and product cannot be empty")
	}
	if c.MaxPower < 0 || c.MaxPower > 500 {
		return fmt.Errorf("otg: max power %d mA: USB 2.0 allows 0 to 500", c.MaxPower)
	}
	if c.UDC != "" && (strings.ContainsAny(c.UDC, "/\n") || c.UDC == "." || c.UDC == "..") {
		return fmt.Errorf("otg: UDC %q is not a controller's name", c.UDC)
	}
	return nil
}

// Errors of Start and Stop, each with its own fix.
var (
	// ErrNoConfigfs: /sys/kernel/config is not configfs (mount -t
	// configfs none /sys/kernel/config; systemd mounts it at boot).
	ErrNoConfigfs = errors.New("otg: configfs is not mounted on /sys/kernel/config")
	// ErrNoLibcomposite: configfs has no usb_gadget directory, which
	// libcomposite adds.
	ErrNoLibcomposite = errors.New("otg: no usb_gadget in configfs: libcomposite is not loaded")
	// ErrNoFunction: the kernel has no driver for a function the gadget
	// needs (usb_f_hid, usb_f_mass_storage).
	ErrNoFunction = errors.New("otg: the kernel has no driver for a function")
	// ErrNoHIDMinor: the kernel's hid functions are all taken (f_hid.c
	// has room for four, across every gadget).
	ErrNoHIDMinor = errors.New("otg: the kernel has room for no more hid functions (4 across every gadget)")
	// ErrNoUDC: no USB device controller, or not the one configured.
	ErrNoUDC = errors.New("otg: no USB device controller")
	// ErrManyUDCs: several controllers, and none chosen.
	ErrManyUDCs = errors.New("otg: several USB device controllers")
	// ErrUDCBusy: another gadget, or a legacy gadget driver, holds the
	// controller.
	ErrUDCBusy = errors.New("otg: the USB device controller is in use")
)

// lang is US English, the only language of the strings.
const lang = "0x409"

// functions are the gadget's functions in the order they are made and
// linked into the configuration: the kernel numbers hidg nodes in creation
// order, so on a machine with no other gadget the keyboard is /dev/hidg0,
// the mouse /dev/hidg1 and the relative mouse /dev/hidg2, as PiKVM's udev
// rules name them.
func (c Settings) functions() []string {
	return append(c.hidFunctions(), gadget.MassStorage)
}

// hidFunc is one of the gadget's hid functions and what it is.
type hidFunc struct {
	name string
	hid  HID
}

// hids are the gadget's hid functions, in the order they are made.
func (c Settings) hids() []hidFunc {
	h := []hidFunc{{gadget.Keyboard, KeyboardHID()}, {gadget.Mouse, MouseHID(c.HorizontalWheel)}}
	if c.RelativeMouse {
		h = append(h, hidFunc{gadget.MouseAlt, RelativeMouseHID(c.HorizontalWheel)})
	}
	return h
}

// hidFunctions are the names of hids.
func (c Settings) hidFunctions() []string {
	var names []string
	for _, h := range c.hids() {
		names = append(names, h.name)
	}
	return names
}

// allFunctions are every function the gadget can have, for what differs
// to find one that is there but not asked for.
var allFunctions = []string{gadget.Keyboard, gadget.Mouse, gadget.MouseAlt, gadget.MassStorage}

// Manager manages the gadget below a root directory ("/" on a device; a
// model of configfs in tests).
type Manager struct {
	fs cfs
}

// cfs is what the gadget does to the file system: configfs's directories,
// attributes and links, sysfs's controllers and the device nodes (hw.FS
// on the machine; the tests have a model of configfs's rules).
type cfs interface {
	ReadDir(rel string) ([]fs.DirEntry, error)
	ReadFile(rel string) ([]byte, error)
	// ReadString reads an attribute trimmed of white space and NULs.
	ReadString(rel string) (string, error)
	Readlink(rel string) (string, error)
	Exists(rel string) bool
	OwnedBy(rel string, uid int, mode fs.FileMode) bool
	Owner(rel string) (int, error)
	Mkdir(rel string) error
	WriteAttr(rel string, data []byte) error
	Symlink(target, link string) error
	Remove(rel string) error
	Chown(rel string, uid, gid int) error
	Chmod(rel string, mode fs.FileMode) error
}

// New returns the Manager of the machine whose file system is at root.
func New(root string) *Manager {
	return &Manager{fs: hw.New(root)}
}

// Result says what Start or Stop did, for a person.
type Result struct {
	// Changed is false when the gadget already was as asked.
	Changed bool
	// UDC is the controller the gadget is bound to after Start.
	UDC string
	// Nodes are the device nodes ("/dev/hidg0") of the keyboard, the
	// mouse and, when there is one, the relative mouse.
	Nodes []string
	// Notes are what was done, one line each.
	Notes []string
}

func (r *Result) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

// Start makes the gadget as c says and binds it to the controller: if the
// gadget already exists as c says, it only binds it if it is not bound; a
// gadget that differs (an older configuration, or one left half-made) is
// taken down and made again. It fails, changing nothing, without configfs,
// libcomposite or a controller, or when another gadget holds the
// controller.
func (g *Manager) Start(ctx context.Context, c Settings) (Result, error) {
	var r Result
	if err := c.Check(); err != nil {
		return r, err
	}
	if err := g.checkConfigfs(); err != nil {
		return r, err
	}
	udc, err := g.findUDC(ctx, c.UDC, c.UDCWait)
	if err != nil {
		return r, err
	}
	if holder, err := g.holder(udc); err != nil {
		return r, err
	} else if holder != "" {
		return r, busyError(udc, holder)
	}

	bound, err := g.boundTo()
	if err != nil {
		return r, err
	}
	switch diff, err := g.differs(c); {
	case err != nil:
		return r, err
	case diff == "" && bound == udc:
		r.UDC = udc
		r.note("gadget %s already bound to %s: nothing changed", gadget.Name, udc)
		if err := g.ownLUN(c, &r, true); err != nil {
			return r, err
		}
		r.Nodes, err = g.ownNodes(ctx, c, &r)
		return r, err
	case diff == "" && bound != "":
		// The configured controller changed: move the gadget.
		if err := g.unbind(); err != nil {
			return r, err
		}
		r.note("unbound gadget %s from %s", gadget.Name, bound)
	case diff == "":
	case diff == noGadget:
		if err := g.create(c); err != nil {
			return r, err
		}
		r.note("created gadget %s: %s", gadget.Name, strings.Join(c.functions(), ", "))
	default:
		if err := g.remove(); err != nil {
			return r, err
		}
		r.note("removed gadget %s (%s)", gadget.Name, diff)
		if err := g.create(c); err != nil {
			return r, err
		}
		r.note("created gadget %s: %s", gadget.Name, strings.Join(c.functions(), ", "))
	}
	if err := g.bind(udc); err != nil {
		return r, err
	}
	r.Changed, r.UDC = true, udc
	r.note("bound gadget %s to %s", gadget.Name, udc)
	if err := g.ownLUN(c, &r, false); err != nil {
		return r, err
	}
	r.Nodes, err = g.ownNodes(ctx, c, &r)
	return r, err
}

// ownLUN gives the drive's attributes the daemon writes (lunOwned) to UID,
// those that are not its already; after the gadget is bound, and on every
// Start, so that the daemon can insert media whatever happened since.
// With say, it notes when it had to.
func (g *Manager) ownLUN(c Settings, r *Result, say bool) error {
	if c.UID < 0 {
		return nil
	}
	var given []string
	for _, name := range lunOwned {
		p := path.Join(gadget.LUNDir(), name)
		if uid, err := g.fs.Owner(p); err == nil && uid == c.UID {
			continue
		}
		if err := g.fs.Chown(p, c.UID, c.GID); err != nil {
			return fmt.Errorf("otg: giving %s to uid %d: %w", p, c.UID, err)
		}
		given = append(given, name)
	}
	if say && len(given) > 0 {
		r.note("gave the drive's %s to uid %d again", strings.Join(given, ", "), c.UID)
	}
	return nil
}

// Stop unbinds the gadget and removes it from configfs; without one it
// does nothing. Only this daemon's gadget is touched.
func (g *Manager) Stop() (Result, error) {
	var r Result
	if _, err := g.fs.ReadDir(gadget.Dir); errors.Is(err, fs.ErrNotExist) {
		r.note("no gadget %s: nothing to stop", gadget.Name)
		return r, nil
	} else if err != nil {
		return r, err
	}
	bound, err := g.boundTo()
	if err != nil {
		return r, err
	}
	if err := g.remove(); err != nil {
		return r, err
	}
	r.Changed = true
	if bound != "" {
		r.note("unbound gadget %s from %s", gadget.Name, bound)
	}
	r.note("removed gadget %s", gadget.Name)
	return r, nil
}

// checkConfigfs tells the two reasons for a missing usb_gadget apart.
func (g *Manager) checkConfigfs() error {
	if _, err := g.fs.ReadDir(gadget.ConfigfsDir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("otg: %w", err)
	}
	mounted, err := g.configfsMounted()
	if err != nil {
		return err
	}
	if !mounted {
		return fmt.Errorf("%w (mount -t configfs none /sys/kernel/config)", ErrNoConfigfs)
	}
	return fmt.Errorf("%w (modprobe libcomposite; the package's modules-load.d loads it at boot)", ErrNoLibcomposite)
}

// configfsMounted reads the mount table for configfs on /sys/kernel/config.
func (g *Manager) configfsMounted() (bool, error) {
	b, err := g.fs.ReadFile("proc/self/mounts")
	if err != nil {
		return false, fmt.Errorf("otg: reading the mount table: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[1] == "/sys/kernel/config" && f[2] == "configfs" {
			return true, nil
		}
	}
	return false, nil
}

// findUDC returns the controller to bind to: want if it exists, else the
// only one; it waits up to wait for one to appear.
func (g *Manager) findUDC(ctx context.Context, want string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		udcs, err := g.udcs()
		if err != nil {
			return "", err
		}
		switch {
		case want != "" && slices.Contains(udcs, want):
			return want, nil
		case want == "" && len(udcs) == 1:
			return udcs[0], nil
		case want == "" && len(udcs) > 1:
			return "", fmt.Errorf("%w: %s; choose one with --udc", ErrManyUDCs, strings.Join(udcs, ", "))
		}
		if !time.Now().Before(deadline) {
			switch {
			case want != "" && len(udcs) > 0:
				return "", fmt.Errorf("%w named %s: /sys/class/udc has %s", ErrNoUDC, want, strings.Join(udcs, ", "))
			case want != "":
				return "", fmt.Errorf("%w named %s: /sys/class/udc is empty", ErrNoUDC, want)
			}
			return "", fmt.Errorf("%w: /sys/class/udc is empty (on a Raspberry Pi: dtoverlay=dwc2,dr_mode=peripheral in config.txt, "+
				"and the OTG port; a Pi 1 B, 2 B or 3 B has none)", ErrNoUDC)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (g *Manager) udcs() ([]string, error) {
	ents, err := g.fs.ReadDir(gadget.UDCDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("otg: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out, nil
}

// holder names what else holds udc: another configfs gadget bound to it,
// or the function the controller reports (a legacy gadget driver such as
// g_ether); "" when nothing but this gadget does.
func (g *Manager) holder(udc string) (string, error) {
	ents, err := g.fs.ReadDir(gadget.ConfigfsDir)
	if err != nil {
		return "", fmt.Errorf("otg: %w", err)
	}
	for _, e := range ents {
		if e.Name() == gadget.Name || !e.IsDir() {
			continue
		}
		b, err := g.fs.ReadFile(path.Join(gadget.ConfigfsDir, e.Name(), "UDC"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("otg: %w", err)
		}
		if strings.TrimSpace(string(b)) == udc {
			return "gadget " + e.Name(), nil
		}
	}
	// The controller's function attribute names the driver bound to it
	// (a configfs gadget's is its name: drivers/usb/gadget/configfs.c).
	b, err := g.fs.ReadFile(path.Join(gadget.UDCDir, udc, "function"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("otg: %w", err)
	}
	if f := strings.TrimSpace(string(b)); f != "" && f != gadget.Name {
		return "driver " + f, nil
	}
	return "", nil
}

func busyError(udc, holder string) error {
	fix := "stop it, or choose another controller with --udc"
	if strings.HasPrefix(holder, "gadget ") {
		fix = fmt.Sprintf("unbind it (echo > /sys/kernel/config/usb_gadget/%s/UDC), or choose another controller with --udc",
			strings.TrimPrefix(holder, "gadget "))
	}
	return fmt.Errorf("%w: %s is bound to %s; %s", ErrUDCBusy, holder, udc, fix)
}

// boundTo returns the controller the gadget is bound to, "" if none (or
// no gadget).
func (g *Manager) boundTo() (string, error) {
	b, err := g.fs.ReadFile(path.Join(gadget.Dir, "UDC"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("otg: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (g *Manager) bind(udc string) error {
	err := g.fs.WriteAttr(path.Join(gadget.Dir, "UDC"), []byte(udc))
	switch {
	case errors.Is(err, syscall.EBUSY):
		// Taken between the check and now, or by a legacy driver that
		// does not name itself.
		holder, herr := g.holder(udc)
		if herr != nil || holder == "" {
			holder = "another driver"
		}
		return busyError(udc, holder)
	case errors.Is(err, syscall.ENODEV):
		return fmt.Errorf("%w named %s (gone while binding): %w", ErrNoUDC, udc, err)
	case err != nil:
		return fmt.Errorf("otg: binding to %s: %w", udc, err)
	}
	return nil
}

// unbind writes an empty UDC; ENODEV is an already unbound gadget.
func (g *Manager) unbind() error {
	err := g.fs.WriteAttr(path.Join(gadget.Dir, "UDC"), []byte("\n"))
	if err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("otg: unbinding: %w", err)
	}
	return nil
}

// attr is one configfs attribute the gadget sets.
type attr struct {
	path string // below gadget.Dir
	data []byte
	// optional attributes are set only where the kernel has them
	// (no_out_endpoint since Linux 5.19, a Raspberry Pi kernel's
	// wakeup_on_write, inquiry_string_cdrom since 6.3).
	optional bool
	// runtime attributes are the daemon's to change while it runs (the
	// drive's medium and flags): not compared by Start.
	runtime bool
}

func num(v int) []byte           { return []byte(strconv.Itoa(v)) }
func hex4(v uint16) []byte       { return fmt.Appendf(nil, "0x%04x", v) }
func flag(b bool) []byte         { return num(map[bool]int{false: 0, true: 1}[b]) }
func inquiry(v, p string) []byte { return fmt.Appendf(nil, "%-8.8s%-16.16s%-4.4s", v, p, "1.00") }

// attrs are the gadget's attributes in the order they are written; the
// directories they are in are made first (dirs).
func (c Settings) attrs() []attr {
	as := []attr{
		{path: "idVendor", data: hex4(c.VendorID)},
		{path: "idProduct", data: hex4(c.ProductID)},
		{path: "bcdDevice", data: hex4(c.DeviceVersion)},
		{path: "bcdUSB", data: hex4(c.USBVersion)},
		{path: "strings/" + lang + "/manufacturer", data: []byte(c.Manufacturer)},
		{path: "strings/" + lang + "/product", data: []byte(c.Product)},
		{path: "strings/" + lang + "/serialnumber", data: []byte(c.Serial)},
		{path: "configs/" + gadget.Config + "/MaxPower", data: num(c.MaxPower)},
	}
	if c.RemoteWakeup {
		// Bus powered (bit 7, always set) and remote wakeup (bit 5).
		as = append(as, attr{path: "configs/" + gadget.Config + "/bmAttributes", data: []byte("0xa0")})
	}
	for _, h := range c.hids() {
		dir := "functions/" + h.name + "/"
		// Output reports (the keyboard's LEDs) by SET_REPORT on the
		// control endpoint, as kvmd-otg does: one endpoint less each.
		as = append(as, attr{path: dir + "no_out_endpoint", data: []byte("1"), optional: true})
		if c.RemoteWakeup {
			as = append(as, attr{path: dir + "wakeup_on_write", data: []byte("1"), optional: true})
		}
		as = append(as,
			attr{path: dir + "protocol", data: num(h.hid.Protocol)},
			attr{path: dir + "subclass", data: num(h.hid.Subclass)},
			attr{path: dir + "report_length", data: num(h.hid.ReportLength)},
			attr{path: dir + "report_desc", data: h.hid.Descriptor},
		)
	}
	lun := "functions/" + gadget.MassStorage + "/lun.0/"
	as = append(as,
		attr{path: "functions/" + gadget.MassStorage + "/stall", data: []byte("0")},
		// cdrom and ro before a medium: the kernel refuses them with one
		// (storage_common.c); there is none yet.
		attr{path: lun + "cdrom", data: flag(c.CDROM), runtime: true},
		attr{path: lun + "ro", data: []byte("1"), runtime: true},
		attr{path: lun + "removable", data: []byte("1")},
		attr{path: lun + "nofua", data: []byte("0")},
		attr{path: lun + "inquiry_string", data: inquiry(c.Manufacturer, "Flash Drive")},
		attr{path: lun + "inquiry_string_cdrom", data: inquiry(c.Manufacturer, "Optical Drive"), optional: true},
	)
	return as
}

// lunOwned are the drive's attributes the daemon writes, given to UID.
var lunOwned = []string{"file", "ro", "cdrom", "forced_eject"}

// noGadget is differs' answer when there is no gadget at all.
const noGadget = "no gadget"

// differs compares the gadget in configfs with c: "" when it is whole and
// as c says, noGadget when there is none, else what differs.
func (g *Manager) differs(c Settings) (string, error) {
	if _, err := g.fs.ReadDir(gadget.Dir); errors.Is(err, fs.ErrNotExist) {
		return noGadget, nil
	} else if err != nil {
		return "", fmt.Errorf("otg: %w", err)
	}
	want := c.functions()
	for _, fn := range allFunctions {
		_, err := g.fs.Readlink(gadget.ConfigLink(fn))
		switch in := slices.Contains(want, fn); {
		case in && err != nil:
			return fmt.Sprintf("%s is not in configuration %s", fn, gadget.Config), nil
		case !in && err == nil:
			return fmt.Sprintf("%s is in configuration %s, not asked for", fn, gadget.Config), nil
		}
	}
	for _, a := range c.attrs() {
		if a.runtime {
			continue
		}
		b, err := g.fs.ReadFile(path.Join(gadget.Dir, a.path))
		switch {
		case errors.Is(err, fs.ErrNotExist) && a.optional:
			continue
		case err != nil:
			return fmt.Sprintf("%s: %v", a.path, err), nil
		}
		if !sameAttr(b, a.data) {
			return fmt.Sprintf("%s is %q, not %q", a.path, strings.TrimSpace(string(b)), a.data), nil
		}
	}
	return "", nil
}

// sameAttr compares what configfs shows with what was written: numbers
// by value (idVendor shows 0x1d6b for 0x1D6B), text without the newline
// the kernel adds, binary attributes (report_desc) byte for byte.
func sameAttr(shown, written []byte) bool {
	if string(shown) == string(written) {
		return true
	}
	s, w := strings.TrimRight(string(shown), "\n"), strings.TrimRight(string(written), "\n")
	if s == w {
		return true
	}
	a, errA := strconv.ParseUint(s, 0, 32)
	b, errB := strconv.ParseUint(w, 0, 32)
	return errA == nil && errB == nil && a == b
}

// create makes the gadget, unbound: its directories, attributes, and the
// functions linked into the configuration. On failure it removes what it
// made.
func (g *Manager) create(c Settings) (err error) {
	defer func() {
		if err != nil {
			g.remove() // the first error is the one to report
		}
	}()
	dirs := []string{"", "strings/" + lang, "configs/" + gadget.Config}
	for _, fn := range c.functions() {
		dirs = append(dirs, "functions/"+fn)
	}
	for _, d := range dirs {
		if err := g.fs.Mkdir(path.Join(gadget.Dir, d)); err != nil {
			if strings.HasPrefix(d, "functions/") && errors.Is(err, fs.ErrNotExist) {
				// configfs answers ENOENT for a function type no loaded
				// or loadable module provides.
				t, _, _ := strings.Cut(path.Base(d), ".")
				return fmt.Errorf("%w: %s (modprobe usb_f_%s)", ErrNoFunction, t, t)
			}
			if strings.HasPrefix(d, "functions/hid.") && errors.Is(err, syscall.ENODEV) {
				return fmt.Errorf("%w: making %s; another gadget holds the others (relative-mouse: false needs one less)", ErrNoHIDMinor, path.Base(d))
			}
			return fmt.Errorf("otg: making %s: %w", d, err)
		}
	}
	for _, a := range c.attrs() {
		p := path.Join(gadget.Dir, a.path)
		if a.optional && !g.fs.Exists(p) {
			continue
		}
		if a.path == "strings/"+lang+"/serialnumber" && len(a.data) == 0 {
			continue
		}
		if err := g.fs.WriteAttr(p, a.data); err != nil {
			return fmt.Errorf("otg: writing %s: %w", a.path, err)
		}
	}
	for _, fn := range c.functions() {
		if err := g.fs.Symlink(gadget.FunctionDir(fn), gadget.ConfigLink(fn)); err != nil {
			return fmt.Errorf("otg: linking %s into %s: %w", fn, gadget.Config, err)
		}
	}
	return nil
}

// remove unbinds the gadget and takes it apart in the order configfs
// allows (Documentation/usb/gadget_configfs.rst, "Cleaning up"): the
// configurations' links, their strings, the configurations, the
// functions, the gadget's strings, the gadget. Directories the kernel
// made with their parent (functions/, a LUN 0) go with it. What is
// already gone is skipped, so a half-made gadget is removed too.
func (g *Manager) remove() error {
	if _, err := g.fs.ReadDir(gadget.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := g.unbind(); err != nil {
		return err
	}
	var errs []error
	rm := func(p string) {
		if err := g.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("otg: removing %s: %w", strings.TrimPrefix(p, gadget.Dir+"/"), err))
		}
	}
	sub := func(dir string) []fs.DirEntry {
		ents, err := g.fs.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("otg: %w", err))
		}
		return ents
	}
	configs := path.Join(gadget.Dir, "configs")
	for _, c := range sub(configs) {
		cd := path.Join(configs, c.Name())
		for _, e := range sub(cd) {
			if e.Type()&fs.ModeSymlink != 0 {
				rm(path.Join(cd, e.Name()))
			}
		}
		for _, s := range sub(path.Join(cd, "strings")) {
			rm(path.Join(cd, "strings", s.Name()))
		}
		rm(cd)
	}
	// os_desc links a configuration when a function needs Microsoft's
	// descriptors; none of this gadget's do, but another tool's might.
	for _, e := range sub(path.Join(gadget.Dir, "os_desc")) {
		if e.Type()&fs.ModeSymlink != 0 {
			rm(path.Join(gadget.Dir, "os_desc", e.Name()))
		}
	}
	funcs := path.Join(gadget.Dir, "functions")
	for _, f := range sub(funcs) {
		fd := path.Join(funcs, f.Name())
		if strings.HasPrefix(f.Name(), "mass_storage.") {
			// LUNs beyond 0 are the user's directories.
			for _, l := range sub(fd) {
				if l.IsDir() && strings.HasPrefix(l.Name(), "lun.") && l.Name() != "lun.0" {
					rm(path.Join(fd, l.Name()))
				}
			}
		}
		rm(fd)
	}
	for _, s := range sub(path.Join(gadget.Dir, "strings")) {
		rm(path.Join(gadget.Dir, "strings", s.Name()))
	}
	if len(errs) == 0 {
		rm(gadget.Dir)
	}
	return errors.Join(errs...)
}

// ownNodes waits for the hid functions' device nodes, which the
// kernel makes when the gadget is bound, and sees that they are UID's,
// mode 0600: udev does that with the package's rule (and again whenever
// the nodes are made anew: a rebind makes them anew); without the rule it
// does so itself once udev had NodeWait to.
func (g *Manager) ownNodes(ctx context.Context, c Settings, r *Result) ([]string, error) {
	var nodes []string
	for _, fn := range c.hidFunctions() {
		var node string
		deadline := time.Now().Add(c.NodeWait)
		for {
			n, err := gadget.HIDNode(g.fs, fn)
			if err == nil {
				node = n
				if !g.fs.Exists(n) {
					err = fmt.Errorf("no %s yet", n)
				}
			}
			ok := false
			if err == nil {
				ok = c.UID < 0 || g.fs.OwnedBy(node, c.UID, 0o600)
			}
			if ok {
				break
			}
			if !time.Now().Before(deadline) {
				if err != nil {
					return nodes, fmt.Errorf("otg: the device node of %s: %w", fn, err)
				}
				if err := g.fs.Chown(node, c.UID, c.GID); err != nil {
					return nodes, fmt.Errorf("otg: giving /%s to uid %d: %w", node, c.UID, err)
				}
				if err := g.fs.Chmod(node, 0o600); err != nil {
					return nodes, fmt.Errorf("otg: /%s: %w", node, err)
				}
				r.note("gave /%s to uid %d myself: no udev rule did within %v", node, c.UID, c.NodeWait)
				break
			}
			select {
			case <-ctx.Done():
				return nodes, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		nodes = append(nodes, "/"+node)
	}
	return nodes, nil
}
