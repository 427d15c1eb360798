package hw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Mailbox is the VideoCore firmware's property interface as the kernel
// offers it to programs (/dev/vcio, IOCTL_MBOX_PROPERTY): Call hands the
// firmware a property buffer, which the answer overwrites in place. VCIO
// is the real one; mailboxtest.Firmware stands in for it in tests and the
// demo.
//
// A property buffer, in 32-bit words (raspberrypi/firmware wiki,
// "Mailbox property interface"; raspberrypi/linux
// drivers/firmware/raspberrypi.c): the buffer's size in bytes; a request
// code (0) that the answer replaces with 0x80000000 (success) or
// 0x80000001 (the firmware could not parse the buffer); then tags, each
// its id, the size of its value buffer in bytes, a request/response word
// (0 in a request; in the answer bit 31 set and the length of the
// response value in bits 0-30) and the value buffer, padded to whole
// words; and an end tag, 0.
type Mailbox interface {
	Call(buf []uint32) error
}

// Codes of a property buffer.
const (
	mboxRequest    = 0x00000000
	mboxSuccess    = 0x80000000
	mboxParseError = 0x80000001
	mboxEndTag     = 0
	tagResponse    = 1 << 31
)

// Tags kvmd sends (include/soc/bcm2835/raspberrypi-firmware.h of
// raspberrypi/linux).
const (
	// TagGetThrottled (RPI_FIRMWARE_GET_THROTTLED) answers the throttling
	// flags. Its one-word request is a mask: the firmware clears the
	// "occurred" bits (16-19) of the bits set in its low half after
	// answering. The kernel's rpi_volt hwmon driver sends 0xffff every 2 s
	// (drivers/hwmon/raspberrypi-hwmon.c), so on any kernel that has it
	// these bits say only what happened since its last poll.
	TagGetThrottled = 0x00030046
	// TagGetGencmdResult runs a firmware "gencmd" command, as vcgencmd
	// does (raspberrypi/utils vcgencmd/vcgencmd.c): the value is an error
	// word and the command, NUL-terminated, which the answer replaces with
	// the error code and the reply text.
	TagGetGencmdResult = 0x00030080
)

// gencmdSize is the value buffer of a gencmd request: the error word and
// 1024 bytes of text, as vcgencmd provides.
const gencmdSize = 4 + 1024

// ErrFirmwareUnsupported is the error of a property the firmware does not
// answer: it left the tag unmarked as a response, or could not parse the
// request.
var ErrFirmwareUnsupported = errors.New("hw: not supported by the firmware")

// encodeProperty returns a property buffer with one tag: value is the
// request, in a value buffer of size bytes (at least len(value); rounded
// up to whole words). The firmware reads words little-endian, as every
// Raspberry Pi runs.
//
// The buffer need not be aligned beyond its words: the address the
// firmware sees must be 16-byte aligned, but the kernel copies the
// buffer into its own DMA memory first (vcio_user_property_list,
// rpi_firmware_property_list).
func encodeProperty(tag uint32, value []byte, size int) []uint32 {
	size = max(size, len(value))
	words := (size + 3) / 4
	buf := make([]uint32, 5+words+1)
	buf[0] = uint32(len(buf) * 4)
	buf[1] = mboxRequest
	buf[2] = tag
	buf[3] = uint32(words * 4)
	buf[4] = 0 // a request; the kernel's own requests send 0 too
	v := make([]byte, words*4)
	copy(v, value)
	for i := range words {
		buf[5+i] = binary.LittleEndian.Uint32(v[i*4:])
	}
	buf[len(buf)-1] = mboxEndTag
	return buf
}

// decodeProperty checks the firmware's answer in buf, a buffer from
// encodeProperty for tag, and returns the tag's response value.
func decodeProperty(buf []uint32, tag uint32) ([]byte, error) {
	if len(buf) < 6 || int(buf[0]) != len(buf)*4 {
		return nil, fmt.Errorf("hw: mailbox answer of %d words, size word %d: malformed", len(buf), firstWord(buf))
	}
	switch buf[1] {
	case mboxSuccess:
	case mboxParseError:
		return nil, fmt.Errorf("hw: mailbox tag %#08x: the firmware could not parse the request: %w", tag, ErrFirmwareUnsupported)
	default:
		return nil, fmt.Errorf("hw: mailbox tag %#08x: response code %#08x", tag, buf[1])
	}
	if buf[2] != tag {
		return nil, fmt.Errorf("hw: mailbox answer for tag %#08x, want %#08x", buf[2], tag)
	}
	size := buf[3]
	if int(size) > (len(buf)-6)*4 {
		return nil, fmt.Errorf("hw: mailbox tag %#08x: value buffer of %d bytes in a buffer of %d words", tag, size, len(buf))
	}
	if buf[4]&tagResponse == 0 {
		return nil, fmt.Errorf("hw: mailbox tag %#08x: no response: %w", tag, ErrFirmwareUnsupported)
	}
	n := buf[4] &^ tagResponse
	if n > size {
		// The firmware says how long the whole answer would have been.
		return nil, fmt.Errorf("hw: mailbox tag %#08x: response of %d bytes truncated to %d", tag, n, size)
	}
	v := make([]byte, (size+3)/4*4)
	for i := range len(v) / 4 {
		binary.LittleEndian.PutUint32(v[i*4:], buf[5+i])
	}
	return v[:n], nil
}

func firstWord(buf []uint32) uint32 {
	if len(buf) == 0 {
		return 0
	}
	return buf[0]
}

// Property sends one tag with its request value in a value buffer of size
// bytes, and returns the firmware's response value.
func Property(mb Mailbox, tag uint32, value []byte, size int) ([]byte, error) {
	buf := encodeProperty(tag, value, size)
	if err := mb.Call(buf); err != nil {
		return nil, fmt.Errorf("hw: mailbox tag %#08x: %w", tag, err)
	}
	return decodeProperty(buf, tag)
}

// Gencmd runs a firmware command as vcgencmd does and returns its reply
// ("throttled=0x50000" for "get_throttled").
func Gencmd(mb Mailbox, cmd string) (string, error) {
	if len(cmd)+1 > gencmdSize-4 {
		return "", fmt.Errorf("hw: gencmd %.20q...: longer than %d bytes", cmd, gencmdSize-5)
	}
	req := make([]byte, 4, 4+len(cmd)+1)
	req = append(append(req, cmd...), 0)
	v, err := Property(mb, TagGetGencmdResult, req, gencmdSize)
	if err != nil {
		return "", err
	}
	if len(v) < 4 {
		return "", fmt.Errorf("hw: gencmd %q: answer of %d bytes", cmd, len(v))
	}
	text := v[4:]
	if i := bytes.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	if code := binary.LittleEndian.Uint32(v); code != 0 {
		return "", fmt.Errorf("hw: gencmd %q: error %d: %q", cmd, int32(code), text)
	}
	return string(text), nil
}

// FirmwareThrottled asks the firmware for its throttling flags, bits 0-3
// now and 16-19 since boot, as "vcgencmd get_throttled" does: through the
// "get_throttled" gencmd. Its history is the firmware's own: no other
// reader clears it (vcgencmd would only when given an argument).
//
// A firmware without gencmd over the mailbox is asked with
// TagGetThrottled instead, with a request of 0 so that nothing is
// cleared; its "occurred" bits then cover only the time since the kernel's
// rpi_volt driver last cleared them (every 2 s where it runs).
func FirmwareThrottled(mb Mailbox) (uint32, error) {
	reply, err := Gencmd(mb, "get_throttled")
	if err == nil {
		flags, err := parseThrottled([]byte(reply))
		if err != nil {
			return 0, fmt.Errorf("hw: gencmd get_throttled: %w", err)
		}
		return flags, nil
	}
	if !errors.Is(err, ErrFirmwareUnsupported) {
		return 0, err
	}
	v, terr := Property(mb, TagGetThrottled, make([]byte, 4), 4)
	if terr != nil {
		return 0, errors.Join(err, terr)
	}
	if len(v) < 4 {
		return 0, fmt.Errorf("hw: mailbox tag %#08x: answer of %d bytes", uint32(TagGetThrottled), len(v))
	}
	return binary.LittleEndian.Uint32(v), nil
}
