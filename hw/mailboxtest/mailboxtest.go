// Package mailboxtest is a fake hw.Mailbox: the VideoCore firmware behind
// the kernel's vcio device, answering property buffers as the kernel
// driver and the firmware do, for the tags kvmd sends. Tests and the demo
// set its throttling state and change it while the daemon runs.
//
// What it imitates, and where that comes from:
//   - The kernel (raspberrypi/linux drivers/char/broadcom/vcio.c,
//     drivers/firmware/raspberrypi.c): a buffer shorter than 12 bytes, or
//     not of whole words, is EINVAL; an answer the firmware marks as a
//     parse error (0x80000001) is EINVAL; otherwise the buffer comes back
//     with 0x80000000 in its second word.
//   - The firmware (raspberrypi/firmware wiki, "Mailbox property
//     interface"): a tag it does not know is left as it was, bit 31 of its
//     request/response word clear; an answer sets bit 31 and the response
//     length.
//   - Throttling: the firmware keeps the "occurred" bits (16-19) twice.
//     Those of GET_THROTTLED are cleared by its request mask after each
//     answer (the kernel's rpi_volt driver sends 0xffff every 2 s, and logs
//     "Voltage normalised (0x00000000)" seconds after "Under-voltage
//     detected! (0x00050005)": raspberrypi/linux issue 2367, snip/
//     OGN-receiver-RPI-image issue 10). Those of the get_throttled gencmd
//     stay until reboot: vcgencmd still prints throttled=0x50000 long after
//     the event on kernels with that driver (MichaIng/DietPi issue 3225).
package mailboxtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"

	"kvmd/hw"
)

// Bits of the throttling flags: now in 0-3, occurred in 16-19.
const (
	nowMask   = 0xf
	pastShift = 16
)

// Request is one tag a caller sent, for tests to check.
type Request struct {
	Tag uint32
	// Value is the request value, as many bytes as the value buffer.
	Value []byte
}

// Firmware is the fake. The zero value is a firmware with no throttling,
// that knows both tags kvmd sends; it is safe for concurrent use.
type Firmware struct {
	mu sync.Mutex
	// err, when set, is returned by every Call instead of an answer.
	err error
	// noGencmd makes GET_GENCMD_RESULT an unknown tag, as on firmware
	// from before it.
	noGencmd bool
	now      uint32
	// past bits (shifted to 16-19) of each interface.
	gencmdPast, tagPast uint32
	requests            []Request
}

var _ hw.Mailbox = (*Firmware)(nil)

// New returns a firmware whose throttling flags are flags as vcgencmd
// get_throttled would print them: the now bits hold, and the occurred
// bits are set for both interfaces.
func New(flags uint32) *Firmware {
	f := &Firmware{}
	f.SetFlags(flags)
	return f
}

// SetFlags sets the state to flags as vcgencmd get_throttled would print
// it: the now bits (0-3) hold from now on, and the occurred bits (16-19)
// of flags and of the now bits are set; occurred bits set before stay.
func (f *Firmware) SetFlags(flags uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = flags & nowMask
	past := flags&(nowMask<<pastShift) | f.now<<pastShift
	f.gencmdPast |= past
	f.tagPast |= past
}

// SetErr makes every Call fail with err, as the real device does when it
// cannot be opened (an error wrapping fs.ErrNotExist or
// fs.ErrPermission) or the ioctl fails; nil answers again.
func (f *Firmware) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// SetGencmd says whether the firmware knows GET_GENCMD_RESULT.
func (f *Firmware) SetGencmd(known bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noGencmd = !known
}

// KernelPoll does what the kernel's rpi_volt driver does every 2 s: asks
// GET_THROTTLED with the mask 0xffff, which clears that interface's
// occurred bits, and returns the answer.
func (f *Firmware) KernelPoll() (uint32, error) {
	v, err := hw.Property(f, hw.TagGetThrottled, []byte{0xff, 0xff, 0, 0}, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(v), nil
}

// Requests returns the tags sent so far, oldest first.
func (f *Firmware) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Call implements hw.Mailbox.
func (f *Firmware) Call(buf []uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if len(buf) < 3 || buf[0] < 12 || buf[0]%4 != 0 || int(buf[0]) > len(buf)*4 {
		return syscall.EINVAL
	}
	words := buf[:buf[0]/4]
	status := uint32(0x80000000)
	for i := 2; i < len(words) && words[i] != 0; {
		if i+3 > len(words) {
			status = 0x80000001
			break
		}
		tag, size := words[i], words[i+1]
		end := i + 3 + int(size+3)/4
		if size%4 != 0 || end > len(words) {
			status = 0x80000001
			break
		}
		f.answer(tag, words[i+2:end])
		i = end
	}
	if status != 0x80000000 {
		return syscall.EINVAL
	}
	buf[1] = status
	return nil
}

// answer handles one tag: tv is its request/response word and value
// buffer.
func (f *Firmware) answer(tag uint32, tv []uint32) {
	val := tv[1:]
	req := make([]byte, len(val)*4)
	for i, w := range val {
		binary.LittleEndian.PutUint32(req[i*4:], w)
	}
	f.requests = append(f.requests, Request{Tag: tag, Value: req})
	switch {
	case tag == hw.TagGetThrottled && len(val) >= 1:
		mask := val[0] & 0xffff
		val[0] = f.now | f.tagPast
		tv[0] = 1<<31 | 4
		f.tagPast &^= mask << pastShift
		// A condition that still holds sets its bit again at once.
		f.tagPast |= f.now << pastShift
	case tag == hw.TagGetGencmdResult && !f.noGencmd && len(val) >= 2:
		cmd := req[4:]
		if i := bytes.IndexByte(cmd, 0); i >= 0 {
			cmd = cmd[:i]
		}
		code, text := uint32(0), ""
		switch string(cmd) {
		case "get_throttled":
			text = fmt.Sprintf("throttled=0x%x", f.now|f.gencmdPast)
		default:
			// What vcgencmd prints for a command the firmware lacks.
			code, text = 2, `error=2 error_msg="Command not registered"`
		}
		out := make([]byte, len(req))
		binary.LittleEndian.PutUint32(out, code)
		n := copy(out[4:len(out)-1], text)
		for i := range val {
			val[i] = binary.LittleEndian.Uint32(out[i*4:])
		}
		tv[0] = 1<<31 | uint32(4+n+1)
	}
	// Any other tag: left unanswered, bit 31 clear.
}
