package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"kvmd/gadget"
	"kvmd/hw"
	"kvmd/otg"
)

const otgUsage = "usage: kvmd otg start|stop|status [--config FILE] [--udc NAME] [--udc-wait DURATION] [--user USER]\n" +
	"         [--vendor-id ID] [--product-id ID] [--device-version BCD] [--manufacturer TEXT] [--product TEXT]\n" +
	"         [--serial TEXT] [--max-power MA] [--remote-wakeup] [--mouse-horizontal-wheel] [--relative-mouse] [--cdrom] [--root DIR]"

// defaultOTGConfig is the gadget's settings file; it need not exist.
const defaultOTGConfig = "/etc/kvmd/otg.yaml"

// otgConfig is kvmd otg's configuration: every field is a flag and a key
// of the settings file with the same name; flags win over the file.
type otgConfig struct {
	UDC                  string        `yaml:"udc"`
	UDCWait              time.Duration `yaml:"udc-wait"`
	User                 string        `yaml:"user"`
	VendorID             usbID         `yaml:"vendor-id"`
	ProductID            usbID         `yaml:"product-id"`
	DeviceVersion        usbID         `yaml:"device-version"`
	Manufacturer         string        `yaml:"manufacturer"`
	Product              string        `yaml:"product"`
	Serial               string        `yaml:"serial"`
	MaxPower             int           `yaml:"max-power"`
	RemoteWakeup         bool          `yaml:"remote-wakeup"`
	MouseHorizontalWheel bool          `yaml:"mouse-horizontal-wheel"`
	RelativeMouse        bool          `yaml:"relative-mouse"`
	CDROM                bool          `yaml:"cdrom"`
	Root                 string        `yaml:"root"`
}

func defaultOTG() otgConfig {
	s := otg.DefaultSettings()
	return otgConfig{
		UDC: s.UDC, UDCWait: s.UDCWait, User: "kvmd",
		VendorID: usbID(s.VendorID), ProductID: usbID(s.ProductID), DeviceVersion: usbID(s.DeviceVersion),
		Manufacturer: s.Manufacturer, Product: s.Product, Serial: s.Serial, MaxPower: s.MaxPower,
		RemoteWakeup: s.RemoteWakeup, MouseHorizontalWheel: s.HorizontalWheel, RelativeMouse: s.RelativeMouse, CDROM: s.CDROM,
		Root: "/",
	}
}

// usbID is a 16-bit USB number (an ID, a BCD version), written 0x1d6b.
type usbID uint16

func (u *usbID) String() string { return fmt.Sprintf("0x%04x", uint16(*u)) }

func (u *usbID) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 0, 16)
	if err != nil {
		return fmt.Errorf("%q is not a 16-bit number (0x1d6b)", s)
	}
	*u = usbID(n)
	return nil
}

// UnmarshalYAML takes 0x1d6b as YAML's integer or as a string.
func (u *usbID) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a 16-bit number (0x1d6b)", n.Line)
	}
	if err := u.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

func otgFlags(fset *flag.FlagSet, c *otgConfig, configPath *string, defaultPath string) {
	fset.StringVar(configPath, "config", defaultPath, "read settings from this YAML `file` (keys are the flag names; flags win); the default need not exist")
	fset.StringVar(&c.UDC, "udc", c.UDC, "USB device controller `name` to bind to, from /sys/class/udc (default: the only one)")
	fset.DurationVar(&c.UDCWait, "udc-wait", c.UDCWait, "wait this long for a USB device controller to appear (start)")
	fset.StringVar(&c.User, "user", c.User, "`user` who alone may use the keyboard's and mouse's /dev/hidg* and set the drive's medium (root: nobody else)")
	fset.Var(&c.VendorID, "vendor-id", "USB vendor `ID` the host sees")
	fset.Var(&c.ProductID, "product-id", "USB product `ID` the host sees")
	fset.Var(&c.DeviceVersion, "device-version", "the device's release number (bcdDevice), `BCD`; raise it when the functions change, so hosts read them anew")
	fset.StringVar(&c.Manufacturer, "manufacturer", c.Manufacturer, "manufacturer `text` the host sees (also the drive's SCSI vendor)")
	fset.StringVar(&c.Product, "product", c.Product, "product `text` the host sees")
	fset.StringVar(&c.Serial, "serial", c.Serial, "serial number `text` the host sees (empty: none)")
	fset.IntVar(&c.MaxPower, "max-power", c.MaxPower, "current the device says it draws from the host, `mA`")
	fset.BoolVar(&c.RemoteWakeup, "remote-wakeup", c.RemoteWakeup, "let a key press wake a sleeping host")
	fset.BoolVar(&c.MouseHorizontalWheel, "mouse-horizontal-wheel", c.MouseHorizontalWheel, "give the mice a horizontal wheel (absolute: 7-byte reports, relative: 5; false: 6 and 4)")
	fset.BoolVar(&c.RelativeMouse, "relative-mouse", c.RelativeMouse, "add a second, relative boot mouse (hid.usb2) for firmware and systems without absolute pointers (mouse_output=usb_rel)")
	fset.BoolVar(&c.CDROM, "cdrom", c.CDROM, "make the drive a CD-ROM until the daemon sets it (false: a removable disk)")
	fset.StringVar(&c.Root, "root", c.Root, "filesystem `dir` the gadget is made under (/ on a device)")
}

// otgCmd runs "kvmd otg start|stop|status": package otg makes the gadget.
func otgCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	action, fset, err := subcommand("otg", args, []string{"start", "stop", "status"}, otgUsage, stderr)
	if err != nil {
		return err
	}
	c, err := parseOTG(fset, args[1:], defaultOTGConfig)
	if err != nil {
		return err
	}
	m := otg.New(c.Root)
	var r otg.Result
	switch action {
	case "status":
		u, err := hw.New(c.Root).USB()
		if err != nil {
			return fmt.Errorf("otg status: %w", err)
		}
		b, err := json.MarshalIndent(u, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	case "start":
		s, err := c.settings()
		if err != nil {
			return err
		}
		r, err = m.Start(ctx, s)
		printNotes(stdout, r)
		if err != nil {
			return err
		}
		if len(r.Nodes) >= 2 {
			rel := ""
			if len(r.Nodes) > 2 {
				rel = ", relative mouse " + r.Nodes[2]
			}
			fmt.Fprintf(stdout, "keyboard %s, mouse %s%s, drive %s, for %s only\n", r.Nodes[0], r.Nodes[1], rel, "/"+gadget.LUNDir(), c.User)
		}
		return nil
	default: // stop
		r, err = m.Stop()
		printNotes(stdout, r)
		return err
	}
}

func printNotes(w io.Writer, r otg.Result) {
	for _, n := range r.Notes {
		fmt.Fprintln(w, "otg:", n)
	}
}

// parseOTG reads the flags, then the settings file, then the flags again
// on top of it, as parseServe does. defaultPath is the settings file
// without --config (defaultOTGConfig; the tests' own), which need not
// exist.
func parseOTG(fset *flag.FlagSet, args []string, defaultPath string) (otgConfig, error) {
	c := defaultOTG()
	var path string
	otgFlags(fset, &c, &path, defaultPath)
	if err := fset.Parse(args); err != nil {
		return c, err
	}
	if fset.NArg() > 0 {
		return c, fmt.Errorf("otg: unexpected argument %q\n%s", fset.Arg(0), otgUsage)
	}
	c = defaultOTG()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, iofs.ErrNotExist) && path == defaultPath:
	case err != nil:
		return c, fmt.Errorf("otg: %w", err)
	default:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("otg: %s: %w", path, err)
		}
	}
	again := flag.NewFlagSet(fset.Name(), flag.ContinueOnError)
	again.SetOutput(io.Discard)
	otgFlags(again, &c, &path, defaultPath)
	return c, again.Parse(args)
}

// settings resolves the user and checks the settings.
func (c otgConfig) settings() (otg.Settings, error) {
	s := otg.DefaultSettings()
	s.UDC, s.UDCWait = c.UDC, c.UDCWait
	s.VendorID, s.ProductID, s.DeviceVersion = uint16(c.VendorID), uint16(c.ProductID), uint16(c.DeviceVersion)
	s.Manufacturer, s.Product, s.Serial = c.Manufacturer, c.Product, c.Serial
	s.MaxPower, s.RemoteWakeup = c.MaxPower, c.RemoteWakeup
	s.HorizontalWheel, s.RelativeMouse, s.CDROM = c.MouseHorizontalWheel, c.RelativeMouse, c.CDROM
	if c.User != "" && c.User != "root" {
		u, err := user.Lookup(c.User)
		if err != nil {
			return s, fmt.Errorf("otg: --user %s: %w (the package's sysusers.d makes kvmd)", c.User, err)
		}
		if s.UID, err = strconv.Atoi(u.Uid); err != nil {
			return s, fmt.Errorf("otg: --user %s: uid %q", c.User, u.Uid)
		}
		if s.GID, err = strconv.Atoi(u.Gid); err != nil {
			return s, fmt.Errorf("otg: --user %s: gid %q", c.User, u.Gid)
		}
	}
	return s, s.Check()
}
