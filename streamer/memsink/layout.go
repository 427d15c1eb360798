package memsink

// layout is where struct memsink_shared_s (ustreamer 4.9,
// src/libs/memsinksh.h) keeps its members on one kind of machine: uint64
// magic, uint32 version, uint64 id, size_t used, unsigned width, height,
// format and stride, bool online and key, four long double timestamps
// (grab, encode begin and end, the last client's), then the data. The
// offsets are what gcc 12 printed (offsetof) for the three targets, with
// Debian 12's headers; SOURCES.md has the program.
type layout struct {
	name                                       string
	id, used, usedSize                         int
	width, height, format, stride, online, key int
	grab, lastClient, data, longDouble         int
	putLongDouble                              func([]byte, float64)
	getLongDouble                              func([]byte) float64
}

var (
	// layoutX8664: size_t 8 bytes, long double the x87 format in 16
	// bytes aligned to 16.
	layoutX8664 = layout{name: "x86-64",
		id: 16, used: 24, usedSize: 8,
		width: 32, height: 36, format: 40, stride: 44, online: 48, key: 49,
		grab: 64, lastClient: 112, data: 128, longDouble: 16,
		putLongDouble: putX87, getLongDouble: getX87}
	// layoutAArch64: the same offsets, long double binary128.
	layoutAArch64 = layout{name: "aarch64",
		id: 16, used: 24, usedSize: 8,
		width: 32, height: 36, format: 40, stride: 44, online: 48, key: 49,
		grab: 64, lastClient: 112, data: 128, longDouble: 16,
		putLongDouble: putQuad, getLongDouble: getQuad}
	// layoutARM: 32-bit ARM (armhf, armel): size_t 4 bytes, long
	// double a double, uint64 aligned to 8.
	layoutARM = layout{name: "arm",
		id: 16, used: 24, usedSize: 4,
		width: 28, height: 32, format: 36, stride: 40, online: 44, key: 45,
		grab: 48, lastClient: 72, data: 80, longDouble: 8,
		putLongDouble: putDouble, getLongDouble: getDouble}
)
