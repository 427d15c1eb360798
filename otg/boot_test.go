package otg

import (
	"fmt"
	"strings"
	"testing"
)

// field is one field of a report as a report descriptor declares it: its
// first bit in the report, its width, and what it holds (HID 1.11, 6.2.2).
type field struct {
	output   bool
	bit      int
	size     int    // bits
	usage    uint32 // page << 16 | usage; 0 for padding
	constant bool
	relative bool
	min, max int
}

func (f field) String() string {
	kind := "in"
	if f.output {
		kind = "out"
	}
	return fmt.Sprintf("%s bit %d+%d usage %#x const %v rel %v %d..%d", kind, f.bit, f.size, f.usage, f.constant, f.relative, f.min, f.max)
}

// reportFields walks a report descriptor and lists the fields of its
// input and output reports, one per usage (an array's fields carry the
// first usage of its range). It knows the items kvmd's descriptors use.
func reportFields(t *testing.T, d []byte) []field {
	t.Helper()
	var page, size, count, lmin, lmax int
	var usages []uint32
	var umin, umax int
	var out []field
	bits := map[bool]int{}
	for len(d) > 0 {
		n := int(d[0] & 3)
		if n == 3 {
			n = 4
		}
		if len(d) < 1+n {
			t.Fatalf("truncated item % x", d)
		}
		var u int // unsigned
		for i := n; i > 0; i-- {
			u = u<<8 | int(d[i])
		}
		sgn := u // signed, for logical minimum and maximum
		if n > 0 && d[n]&0x80 != 0 {
			sgn = u - 1<<(8*n)
		}
		switch d[0] &^ 3 {
		case usagePage &^ 3:
			page = u
		case usage &^ 3:
			usages = append(usages, uint32(page<<16|u))
		case usageMin &^ 3:
			umin = u
		case usageMax &^ 3:
			umax = u
		case logicalMin &^ 3:
			lmin = sgn
		case logicalMax &^ 3:
			lmax = sgn
		case reportSize &^ 3:
			size = u
		case reportCount &^ 3:
			count = u
		case collection &^ 3, endCollection &^ 3:
			// Main items: the local items before them were theirs.
			usages, umin, umax = nil, 0, 0
		case input &^ 3, output &^ 3:
			o := d[0]&^3 == output&^3
			array := u&2 == 0
			if len(usages) == 0 {
				for x := umin; x <= umax && (umin != 0 || umax != 0); x++ {
					usages = append(usages, uint32(page<<16|x))
				}
			}
			for i := range count {
				f := field{output: o, bit: bits[o], size: size, constant: u&1 != 0, relative: u&4 != 0, min: lmin, max: lmax}
				switch {
				case f.constant:
				case array && len(usages) > 0:
					f.usage = usages[0]
				case i < len(usages):
					f.usage = usages[i]
				case len(usages) > 0:
					f.usage = usages[len(usages)-1]
				}
				out = append(out, f)
				bits[o] += size
			}
			usages, umin, umax = nil, 0, 0
		}
		d = d[1+n:]
	}
	return out
}

// at returns the fields of the input (or output) report that start in
// bits from..to-1.
func at(fs []field, output bool, from, to int) []field {
	var out []field
	for _, f := range fs {
		if f.output == output && f.bit >= from && f.bit < to {
			out = append(out, f)
		}
	}
	return out
}

// TestBootReports: the functions that say they are boot devices
// (subclass 1) send reports a host in boot protocol reads without their
// descriptor: a PC's firmware (SeaBIOS's usb-hid.c, EDK2's UsbKbDxe and
// UsbMouseDxe) sets the boot protocol and takes the report's first bytes
// as HID 1.11's appendix B lays them out. f_hid accepts SET_PROTOCOL only
// on a boot interface and sends what the daemon writes either way, so the
// report must be both. The absolute mouse is not a boot device.
func TestBootReports(t *testing.T) {
	const (
		keyboardPage = 0x07
		ledPage      = 0x08
		buttonPage   = 0x09
		desktopPage  = 0x01
	)
	kbd := KeyboardHID()
	if kbd.Subclass != 1 || kbd.Protocol != 1 {
		t.Errorf("keyboard: subclass %d protocol %d, want a boot keyboard (1, 1)", kbd.Subclass, kbd.Protocol)
	}
	fs := reportFields(t, kbd.Descriptor)
	// B.1: byte 0 the modifiers (usages E0..E7, one bit each), byte 1
	// reserved, bytes 2..7 six key codes; output bits 0..4 the LEDs Num,
	// Caps, Scroll, Compose, Kana.
	for i, f := range at(fs, false, 0, 8) {
		if f.size != 1 || f.usage != keyboardPage<<16|uint32(0xe0+i) {
			t.Errorf("keyboard modifier %d: %v", i, f)
		}
	}
	if r := at(fs, false, 8, 16); len(r) != 1 || !r[0].constant || r[0].size != 8 {
		t.Errorf("keyboard reserved byte: %v", r)
	}
	if keys := at(fs, false, 16, 64); len(keys) != 6 || keys[0].size != 8 || keys[0].usage>>16 != keyboardPage || keys[0].max != 255 {
		t.Errorf("keyboard key codes: %v", keys)
	}
	for i, f := range at(fs, true, 0, 5) {
		if f.size != 1 || f.usage != ledPage<<16|uint32(1+i) {
			t.Errorf("keyboard LED %d: %v", i, f)
		}
	}

	for _, wheel := range []bool{false, true} {
		m := RelativeMouseHID(wheel)
		name := fmt.Sprintf("relative mouse (horizontal wheel %v)", wheel)
		if m.Subclass != 1 || m.Protocol != 2 {
			t.Errorf("%s: subclass %d protocol %d, want a boot mouse (1, 2)", name, m.Subclass, m.Protocol)
		}
		fs := reportFields(t, m.Descriptor)
		// B.2: byte 0 buttons 1..3 in bits 0..2, bytes 1 and 2 X and Y,
		// signed, relative.
		for i, f := range at(fs, false, 0, 3) {
			if f.size != 1 || f.usage != buttonPage<<16|uint32(1+i) {
				t.Errorf("%s: button %d: %v", name, i+1, f)
			}
		}
		for i, want := range []uint32{desktopPage<<16 | 0x30, desktopPage<<16 | 0x31} {
			xy := at(fs, false, 8*(i+1), 8*(i+2))
			if len(xy) != 1 || xy[0].usage != want || xy[0].size != 8 || !xy[0].relative || xy[0].min != -127 || xy[0].max != 127 {
				t.Errorf("%s: byte %d: %v, want %s", name, i+1, xy, []string{"X", "Y"}[i])
			}
		}
		if len(at(fs, true, 0, 1<<16)) != 0 {
			t.Errorf("%s: has an output report", name)
		}
	}

	abs := MouseHID(true)
	if abs.Subclass != 0 || abs.Protocol != 0 {
		t.Errorf("absolute mouse: subclass %d protocol %d: a boot host would read its X as 8 relative bits", abs.Subclass, abs.Protocol)
	}
	var sb strings.Builder
	for _, f := range reportFields(t, abs.Descriptor) {
		sb.WriteString(f.String() + "\n")
	}
	if x := at(reportFields(t, abs.Descriptor), false, 8, 24); len(x) != 1 || x[0].size != 16 || x[0].relative || x[0].max != 32767 {
		t.Errorf("absolute mouse X:\n%s", sb.String())
	}
}
