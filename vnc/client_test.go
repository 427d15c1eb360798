package vnc

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"net"
	"testing"
	"time"
)

// client is the tests' own RFB client: enough of RFB 3.8 and VeNCrypt to
// drive the server byte by byte, where a viewer cannot be told what to
// send.
type client struct {
	t    *testing.T
	raw  net.Conn
	conn net.Conn
	br   *bufio.Reader
	w, h int
	name string
	pf   PixelFormat
}

// errRefused is a handshake the server refused, with its reason.
type errRefused struct{ reason string }

func (e *errRefused) Error() string { return "refused: " + e.reason }

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, raw: c, conn: c, br: bufio.NewReader(c), pf: defaultFormat}
}

func (c *client) read(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c.br, b)
	return b, err
}

func (c *client) u32() (uint32, error) {
	b, err := c.read(4)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b), nil
}

func (c *client) reason() string {
	n, err := c.u32()
	if err != nil || n > 1024 {
		return fmt.Sprintf("(no reason: %v)", err)
	}
	b, _ := c.read(int(n))
	return string(b)
}

// login runs the handshake to ServerInit with user and passwd.
func (c *client) login(e *env, user, passwd string) error {
	if err := c.version("RFB 003.008\n"); err != nil {
		return err
	}
	types, err := c.securityTypes()
	if err != nil {
		return err
	}
	if !bytes.Equal(types, []byte{secVeNCrypt}) {
		return fmt.Errorf("security types %v", types)
	}
	c.conn.Write([]byte{secVeNCrypt})
	if err := c.vencrypt(e, secX509Plain); err != nil {
		return err
	}
	cred := binary.BigEndian.AppendUint32(nil, uint32(len(user)))
	cred = binary.BigEndian.AppendUint32(cred, uint32(len(passwd)))
	c.conn.Write(append(append(cred, user...), passwd...))
	if err := c.securityResult(); err != nil {
		return err
	}
	return c.init()
}

func (c *client) version(v string) error {
	b, err := c.read(12)
	if err != nil {
		return err
	}
	if string(b) != "RFB 003.008\n" {
		return fmt.Errorf("server version %q", b)
	}
	_, err = io.WriteString(c.conn, v)
	return err
}

func (c *client) securityTypes() ([]byte, error) {
	n, err := c.br.ReadByte()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &errRefused{c.reason()}
	}
	return c.read(int(n))
}

// vencrypt runs VeNCrypt 0.2 to TLS with subtype sub.
func (c *client) vencrypt(e *env, sub uint32) error {
	b, err := c.read(2)
	if err != nil || !bytes.Equal(b, []byte{0, 2}) {
		return fmt.Errorf("VeNCrypt version %v %v", b, err)
	}
	c.conn.Write([]byte{0, 2})
	if b, err := c.br.ReadByte(); err != nil || b != 0 {
		return fmt.Errorf("VeNCrypt version ack %v %v", b, err)
	}
	n, err := c.br.ReadByte()
	if err != nil {
		return err
	}
	subs, err := c.read(4 * int(n))
	if err != nil {
		return err
	}
	if !bytes.Equal(subs, binary.BigEndian.AppendUint32(nil, secX509Plain)) {
		return fmt.Errorf("VeNCrypt subtypes %x", subs)
	}
	c.conn.Write(binary.BigEndian.AppendUint32(nil, sub))
	if b, err := c.br.ReadByte(); err != nil || b != 1 {
		return fmt.Errorf("VeNCrypt subtype not accepted: %v %v", b, err)
	}
	tc := tls.Client(c.raw, &tls.Config{RootCAs: e.ca, ServerName: "127.0.0.1"})
	if err := tc.Handshake(); err != nil {
		return err
	}
	c.conn, c.br = tc, bufio.NewReader(tc)
	return nil
}

func (c *client) securityResult() error {
	r, err := c.u32()
	if err != nil {
		return err
	}
	if r != 0 {
		return &errRefused{c.reason()}
	}
	return nil
}

func (c *client) init() error {
	c.conn.Write([]byte{1})
	b, err := c.read(24)
	if err != nil {
		return err
	}
	c.w, c.h = int(binary.BigEndian.Uint16(b)), int(binary.BigEndian.Uint16(b[2:]))
	name, err := c.read(int(binary.BigEndian.Uint32(b[20:])))
	c.name = string(name)
	return err
}

func (c *client) mustLogin(e *env, user, passwd string) {
	c.t.Helper()
	if err := c.login(e, user, passwd); err != nil {
		c.t.Fatalf("login as %s: %v", user, err)
	}
}

func (c *client) setEncodings(encs ...int32) {
	b := []byte{msgSetEncodings, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(len(encs)))
	for _, e := range encs {
		b = binary.BigEndian.AppendUint32(b, uint32(e))
	}
	c.conn.Write(b)
}

func (c *client) setPixelFormat(pf PixelFormat) {
	c.pf = pf
	c.conn.Write(append([]byte{msgSetPixelFormat, 0, 0, 0}, pf.bytes()...))
}

func (c *client) request(incremental bool) {
	b := []byte{msgFramebufferUpdateRequest, 0}
	if incremental {
		b[1] = 1
	}
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(c.w))
	c.conn.Write(binary.BigEndian.AppendUint16(b, uint16(c.h)))
}

func (c *client) key(ks uint32, down bool) {
	b := []byte{msgKeyEvent, 0, 0, 0}
	if down {
		b[1] = 1
	}
	c.conn.Write(binary.BigEndian.AppendUint32(b, ks))
}

func (c *client) pointer(buttons byte, x, y int) {
	b := []byte{msgPointerEvent, buttons}
	b = binary.BigEndian.AppendUint16(b, uint16(x))
	c.conn.Write(binary.BigEndian.AppendUint16(b, uint16(y)))
}

// rect is one rectangle of an update.
type rect struct {
	x, y, w, h int
	enc        int32
	img        image.Image // Raw and Tight: the pixels
	jpeg       []byte      // Tight: the JPEG as sent
}

// update reads one FramebufferUpdate.
func (c *client) update() ([]rect, error) {
	b, err := c.read(4)
	if err != nil {
		return nil, err
	}
	if b[0] != 0 {
		return nil, fmt.Errorf("message type %d, not an update", b[0])
	}
	var rs []rect
	for range int(binary.BigEndian.Uint16(b[2:])) {
		h, err := c.read(12)
		if err != nil {
			return nil, err
		}
		r := rect{x: int(binary.BigEndian.Uint16(h)), y: int(binary.BigEndian.Uint16(h[2:])),
			w: int(binary.BigEndian.Uint16(h[4:])), h: int(binary.BigEndian.Uint16(h[6:])), enc: int32(binary.BigEndian.Uint32(h[8:]))}
		switch r.enc {
		case encRaw:
			pix, err := c.read(r.w * r.h * int(c.pf.BPP) / 8)
			if err != nil {
				return nil, err
			}
			r.img = c.decodeRaw(pix, r.w, r.h)
		case encTight:
			ctl, err := c.br.ReadByte()
			if err != nil {
				return nil, err
			}
			if ctl != 0x90 {
				return nil, fmt.Errorf("tight control %#x, not JPEG", ctl)
			}
			n := 0
			for i := 0; i < 3; i++ {
				v, err := c.br.ReadByte()
				if err != nil {
					return nil, err
				}
				if i == 2 {
					n |= int(v) << 14
					break
				}
				n |= int(v&0x7f) << (7 * i)
				if v&0x80 == 0 {
					break
				}
			}
			if r.jpeg, err = c.read(n); err != nil {
				return nil, err
			}
			if r.img, err = jpeg.Decode(bytes.NewReader(r.jpeg)); err != nil {
				return nil, err
			}
		case encExtendedDesktopSize:
			if _, err := c.read(4 + 16); err != nil {
				return nil, err
			}
			c.w, c.h = r.w, r.h
		case encDesktopSize:
			c.w, c.h = r.w, r.h
		default:
			return nil, fmt.Errorf("encoding %d", r.enc)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// picture asks for a full update and returns its one picture rectangle.
func (c *client) picture() rect {
	c.t.Helper()
	c.request(false)
	rs, err := c.update()
	if err != nil {
		c.t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].img == nil {
		c.t.Fatalf("update %+v, want one picture", rs)
	}
	return rs[0]
}

func (c *client) decodeRaw(pix []byte, w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bpp := int(c.pf.BPP) / 8
	ch := func(v uint32, max uint16, shift uint8) uint8 {
		return uint8((v >> shift) & uint32(max) * 255 / uint32(max))
	}
	for i := 0; i < w*h; i++ {
		p := pix[i*bpp:]
		var v uint32
		switch {
		case bpp == 1:
			v = uint32(p[0])
		case bpp == 2 && c.pf.BigEndian:
			v = uint32(binary.BigEndian.Uint16(p))
		case bpp == 2:
			v = uint32(binary.LittleEndian.Uint16(p))
		case c.pf.BigEndian:
			v = binary.BigEndian.Uint32(p)
		default:
			v = binary.LittleEndian.Uint32(p)
		}
		img.SetRGBA(i%w, i/w, color.RGBA{ch(v, c.pf.RedMax, c.pf.RedShift), ch(v, c.pf.GreenMax, c.pf.GreenShift), ch(v, c.pf.BlueMax, c.pf.BlueShift), 255})
	}
	return img
}

// closed waits for the server to close the connection, and fails the
// test if it sends anything first or keeps it open for d.
func (c *client) closed(d time.Duration) {
	c.t.Helper()
	c.raw.SetReadDeadline(time.Now().Add(d))
	b := make([]byte, 1)
	for {
		n, err := c.br.Read(b)
		if n > 0 {
			continue // the rest of an update under way
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("the connection is still open after %v", d)
		}
		return
	}
}
