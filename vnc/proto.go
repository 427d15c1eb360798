package vnc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The encodings and pseudo-encodings this server knows (RFB 3.8, RFC 6143
// section 7.7, and the community registry in rfbproto's rfbproto.rst).
const (
	encRaw                 int32 = 0
	encTight               int32 = 7
	encJPEGQualityLowest   int32 = -32 // JPEG Quality Level: -32 (0) to -23 (9)
	encJPEGQualityHighest  int32 = -23
	encDesktopSize         int32 = -223
	encExtendedDesktopSize int32 = -308
)

// The client's messages (RFC 6143 section 7.5, and SetDesktopSize of the
// ExtendedDesktopSize extension).
const (
	msgSetPixelFormat           = 0
	msgSetEncodings             = 2
	msgFramebufferUpdateRequest = 3
	msgKeyEvent                 = 4
	msgPointerEvent             = 5
	msgClientCutText            = 6
	msgSetDesktopSize           = 251
)

// Bounds on what a client may send: more encodings than any client lists
// (kvmd-vnc allows 1024 too), and the screens of a SetDesktopSize.
const (
	maxEncodings = 1024
	maxScreens   = 16
)

// ErrProtocol is a client message this server cannot read: an unknown
// type, or values out of their bounds. The connection ends.
var ErrProtocol = errors.New("vnc: protocol error")

func protocolError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// PixelFormat is how the client wants pixels of raw rectangles (RFC 6143
// section 7.4).
type PixelFormat struct {
	BPP, Depth                      uint8
	BigEndian, TrueColour           bool
	RedMax, GreenMax, BlueMax       uint16
	RedShift, GreenShift, BlueShift uint8
}

// defaultFormat is the pixel format the server offers: 32 bits, depth 24,
// little-endian, red in bits 16-23 (kvmd-vnc's).
var defaultFormat = PixelFormat{BPP: 32, Depth: 24, TrueColour: true,
	RedMax: 255, GreenMax: 255, BlueMax: 255, RedShift: 16, GreenShift: 8, BlueShift: 0}

func (p PixelFormat) bytes() []byte {
	b := make([]byte, 16)
	b[0], b[1] = p.BPP, p.Depth
	if p.BigEndian {
		b[2] = 1
	}
	if p.TrueColour {
		b[3] = 1
	}
	binary.BigEndian.PutUint16(b[4:], p.RedMax)
	binary.BigEndian.PutUint16(b[6:], p.GreenMax)
	binary.BigEndian.PutUint16(b[8:], p.BlueMax)
	b[10], b[11], b[12] = p.RedShift, p.GreenShift, p.BlueShift
	return b
}

func parsePixelFormat(b []byte) PixelFormat {
	return PixelFormat{
		BPP: b[0], Depth: b[1], BigEndian: b[2] != 0, TrueColour: b[3] != 0,
		RedMax: binary.BigEndian.Uint16(b[4:]), GreenMax: binary.BigEndian.Uint16(b[6:]),
		BlueMax: binary.BigEndian.Uint16(b[8:]), RedShift: b[10], GreenShift: b[11], BlueShift: b[12],
	}
}

// check says whether raw rectangles can be written in p: true colour, 8,
// 16 or 32 bits a pixel, each channel's bits inside the pixel.
func (p PixelFormat) check() error {
	switch {
	case !p.TrueColour:
		return protocolError("colour-map pixel formats are not served (true colour only)")
	case p.BPP != 8 && p.BPP != 16 && p.BPP != 32:
		return protocolError("%d bits per pixel (8, 16 or 32 are served)", p.BPP)
	}
	for _, c := range []struct {
		max   uint16
		shift uint8
	}{{p.RedMax, p.RedShift}, {p.GreenMax, p.GreenShift}, {p.BlueMax, p.BlueShift}} {
		if c.max == 0 || int(c.shift)+bitLen(c.max) > int(p.BPP) {
			return protocolError("a colour channel (max %d, shift %d) outside a %d-bit pixel", c.max, c.shift, p.BPP)
		}
	}
	return nil
}

func bitLen(v uint16) int {
	n := 0
	for ; v != 0; v >>= 1 {
		n++
	}
	return n
}

// clientMsg is one message from the client, read whole.
type clientMsg struct {
	typ byte
	// SetPixelFormat
	format PixelFormat
	// SetEncodings
	encodings []int32
	// FramebufferUpdateRequest
	incremental bool
	// KeyEvent
	down   bool
	keysym uint32
	// PointerEvent
	buttons byte
	x, y    uint16
	// SetDesktopSize: the size asked for
	width, height uint16
}

// readMsg reads one client message from r. buf is scratch space of at
// least 16 bytes. A cut text is read and dropped (the server has no
// clipboard), however long, without holding it.
func readMsg(r io.Reader, buf []byte) (clientMsg, error) {
	read := func(n int) ([]byte, error) {
		b := buf[:n]
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b, err := read(1)
	if err != nil {
		return clientMsg{}, err
	}
	m := clientMsg{typ: b[0]}
	switch m.typ {
	case msgSetPixelFormat:
		b, err := read(19)
		if err != nil {
			return m, unexpected(err)
		}
		m.format = parsePixelFormat(b[3:])
	case msgSetEncodings:
		b, err := read(3)
		if err != nil {
			return m, unexpected(err)
		}
		n := int(binary.BigEndian.Uint16(b[1:]))
		if n > maxEncodings {
			return m, protocolError("%d encodings (at most %d)", n, maxEncodings)
		}
		m.encodings = make([]int32, n)
		for i := range m.encodings {
			b, err := read(4)
			if err != nil {
				return m, unexpected(err)
			}
			m.encodings[i] = int32(binary.BigEndian.Uint32(b))
		}
	case msgFramebufferUpdateRequest:
		b, err := read(9)
		if err != nil {
			return m, unexpected(err)
		}
		// The rectangle is not read: every update is the whole screen.
		m.incremental = b[0] != 0
	case msgKeyEvent:
		b, err := read(7)
		if err != nil {
			return m, unexpected(err)
		}
		m.down = b[0] != 0
		m.keysym = binary.BigEndian.Uint32(b[3:])
	case msgPointerEvent:
		b, err := read(5)
		if err != nil {
			return m, unexpected(err)
		}
		m.buttons = b[0]
		m.x, m.y = binary.BigEndian.Uint16(b[1:]), binary.BigEndian.Uint16(b[3:])
	case msgClientCutText:
		b, err := read(7)
		if err != nil {
			return m, unexpected(err)
		}
		// A negative length is the Extended Clipboard's: its absolute
		// value is the length.
		n := int64(int32(binary.BigEndian.Uint32(b[3:])))
		if n < 0 {
			n = -n
		}
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return m, unexpected(err)
		}
	case msgSetDesktopSize:
		b, err := read(7)
		if err != nil {
			return m, unexpected(err)
		}
		m.width, m.height = binary.BigEndian.Uint16(b[1:]), binary.BigEndian.Uint16(b[3:])
		screens := int(b[5])
		if screens > maxScreens {
			return m, protocolError("SetDesktopSize with %d screens (at most %d)", screens, maxScreens)
		}
		for range screens {
			if _, err := read(16); err != nil {
				return m, unexpected(err)
			}
		}
	default:
		return m, protocolError("unknown message type %d", m.typ)
	}
	return m, nil
}

// unexpected is a message cut short: the client went away in its middle.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
