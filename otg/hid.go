package otg

// HID is what a hid function needs in configfs: the interface's boot
// subclass and protocol, the length of its input reports, and its report
// descriptor (drivers/usb/gadget/function/f_hid.c: subclass, protocol,
// report_length, report_desc).
type HID struct {
	Subclass     int
	Protocol     int
	ReportLength int
	Descriptor   []byte
}

// HID items used below (HID 1.11, 6.2.2): the prefix byte holds the tag,
// the type and the size of the data that follows.
const (
	usagePage     = 0x05
	usage         = 0x09
	usage16       = 0x0a // Usage with two bytes of data (AC Pan)
	usageMin      = 0x19
	usageMax      = 0x29
	usageMax16    = 0x2a
	logicalMin    = 0x15
	logicalMin16  = 0x16
	logicalMax    = 0x25
	logicalMax16  = 0x26
	reportSize    = 0x75
	reportCount   = 0x95
	input         = 0x81
	output        = 0x91
	collection    = 0xa1
	endCollection = 0xc0
)

// KeyboardHID is PiKVM's boot keyboard: 8-byte input reports (modifiers, a
// reserved byte, six key codes) and a 1-byte LED output report (Num, Caps,
// Scroll, Compose, Kana), which the host sends when its lock keys change.
// From kvmd/apps/otg/hid/keyboard.py (pikvm/kvmd, read at f14596e8),
// without a report ID, as kvmd-otg makes it.
func KeyboardHID() HID {
	return HID{
		Subclass:     1, // boot interface
		Protocol:     1, // keyboard
		ReportLength: 8,
		Descriptor: []byte{
			usagePage, 0x01, // Generic Desktop
			usage, 0x06, // Keyboard
			collection, 0x01, // Application

			// Modifiers: one bit each for LeftControl..Right GUI.
			usagePage, 0x07, // Keyboard/Keypad
			usageMin, 0xe0,
			usageMax, 0xe7,
			logicalMin, 0x00,
			logicalMax, 0x01,
			reportSize, 0x01,
			reportCount, 0x08,
			input, 0x02, // Data, Variable, Absolute

			// The reserved byte.
			reportCount, 0x01,
			reportSize, 0x08,
			input, 0x01, // Constant

			// The LEDs: five bits of output report, padded to a byte.
			reportCount, 0x05,
			reportSize, 0x01,
			usagePage, 0x08, // LEDs
			usageMin, 0x01, // Num Lock
			usageMax, 0x05, // Kana
			output, 0x02, // Data, Variable, Absolute
			reportCount, 0x01,
			reportSize, 0x03,
			output, 0x01, // Constant

			// Six key codes.
			reportCount, 0x06,
			reportSize, 0x08,
			logicalMin, 0x00,
			logicalMax16, 0xff, 0x00,
			usagePage, 0x07, // Keyboard/Keypad
			usageMin, 0x00,
			usageMax16, 0xff, 0x00,
			input, 0x00, // Data, Array, Absolute

			endCollection,
		},
	}
}

// horizontalWheelItems are both mice's horizontal wheel: AC Pan, one
// signed byte, relative.
var horizontalWheelItems = []byte{
	usagePage, 0x0c, // Consumer
	usage16, 0x38, 0x02, // AC Pan
	logicalMin, 0x81, // -127
	logicalMax, 0x7f, // 127
	reportSize, 0x08,
	reportCount, 0x01,
	input, 0x06, // Data, Variable, Relative
}

// mouseStart is how both mice's descriptors begin: a pointer in a mouse
// application collection, then eight buttons, one bit each (the boot
// report's first byte).
func mouseStart() []byte {
	return []byte{
		usagePage, 0x01, // Generic Desktop
		usage, 0x02, // Mouse
		collection, 0x01, // Application
		usage, 0x01, // Pointer (Apple's recovery needs it and Physical)
		collection, 0x00, // Physical

		usagePage, 0x09, // Button
		usageMin, 0x01,
		usageMax, 0x08,
		logicalMin, 0x00,
		logicalMax, 0x01,
		reportCount, 0x08,
		reportSize, 0x01,
		input, 0x02, // Data, Variable, Absolute
	}
}

// MouseHID is PiKVM's absolute mouse: buttons (1 byte), X and Y
// (2 bytes each, little-endian, 0..32767), the wheel (1 byte, -127..127)
// and, with horizontalWheel, a horizontal wheel (AC Pan, 1 byte): 6 or 7
// bytes. Protocol 0 (no boot protocol): a host reads it from the report
// descriptor. From kvmd/apps/otg/hid/mouse.py (pikvm/kvmd, read at
// f14596e8), whose default (kvmd.hid.mouse.horizontal_wheel) is on.
func MouseHID(horizontalWheel bool) HID {
	d := append(mouseStart(),
		// X and Y, 0..32767 (kvmd's range: some hosts mishandle negative
		// or full 16-bit ranges).
		usagePage, 0x01, // Generic Desktop
		usage, 0x30, // X
		usage, 0x31, // Y
		logicalMin16, 0x00, 0x00,
		logicalMax16, 0xff, 0x7f,
		reportSize, 0x10,
		reportCount, 0x02,
		input, 0x02, // Data, Variable, Absolute

		// The wheel.
		usage, 0x38, // Wheel
		logicalMin, 0x81, // -127
		logicalMax, 0x7f, // 127
		reportSize, 0x08,
		reportCount, 0x01,
		input, 0x06, // Data, Variable, Relative
	)
	length := 6
	if horizontalWheel {
		d = append(d, horizontalWheelItems...)
		length = 7
	}
	d = append(d, endCollection, endCollection)
	return HID{Subclass: 0, Protocol: 0, ReportLength: length, Descriptor: d}
}

// RelativeMouseHID is PiKVM's second mouse (kvmd's mouse_alt, its usb_rel
// output): a boot mouse (subclass 1, protocol 2) that moves by steps.
// Its reports are buttons (1 byte), X and Y (-127..127 each), the wheel
// and, with horizontalWheel, a horizontal wheel (AC Pan): 4 or 5 bytes.
// The first three bytes are the boot mouse's report (HID 1.11, appendix
// B.2), so a host in boot protocol (a PC's firmware, which never reads the
// report descriptor) moves its pointer with them and ignores the rest.
// From kvmd/apps/otg/hid/mouse.py (pikvm/kvmd, read at f14596e8).
func RelativeMouseHID(horizontalWheel bool) HID {
	d := append(mouseStart(),
		// X, Y and the wheel, one signed byte each, relative: X and Y
		// are the boot report's second and third bytes.
		usagePage, 0x01, // Generic Desktop
		usage, 0x30, // X
		usage, 0x31, // Y
		usage, 0x38, // Wheel
		logicalMin, 0x81, // -127
		logicalMax, 0x7f, // 127
		reportSize, 0x08,
		reportCount, 0x03,
		input, 0x06, // Data, Variable, Relative
	)
	length := 4
	if horizontalWheel {
		d = append(d, horizontalWheelItems...)
		length = 5
	}
	d = append(d, endCollection, endCollection)
	return HID{Subclass: 1, Protocol: 2, ReportLength: length, Descriptor: d}
}
