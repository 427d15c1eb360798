package vnc

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"kvmd/auth"
)

// The security types (RFC 6143 section 7.2 and the registry): VeNCrypt,
// and its subtype X509Plain, TLS with the server's certificate and then a
// user name and password. It is the only one offered: VeNCrypt's Plain
// sends the password in the clear, its TLS subtypes need anonymous TLS,
// which Go's TLS does not have, and VNC Authentication keeps an
// eight-character password of its own.
const (
	secVeNCrypt  = 19
	secX509Plain = 262
)

// Bounds on the Plain credentials: the API's (auth.ValidUser,
// auth.ValidPasswd) and room for a 2FA code.
const (
	maxUserLen   = 128
	maxPasswdLen = 512 + auth.CodeLen
)

// refusal is a handshake that ends with a reason for the client.
type refusal struct {
	reason string // what the client is told
	err    error  // for the log, when the reason is not all of it
}

func (r *refusal) Error() string {
	if r.err != nil {
		return r.reason + ": " + r.err.Error()
	}
	return r.reason
}

func refuse(reason string, err error) error { return &refusal{reason, err} }

// handshake is the connection up to ServerInit.
type handshake struct {
	s       *Server
	raw     net.Conn
	conn    net.Conn // raw, then the TLS connection over it
	minor   int      // the client's RFB 3.x version: 3, 7 or 8
	secSent bool     // the security types were sent (a refusal then is a SecurityResult)
}

// fail tells the client why it is refused, in the form its version and
// the handshake's stage allow: before the security types were sent, no
// types and the reason (3.7 and 3.8) or security type 0 and the reason
// (3.3, and a client that is not RFB 3.x); after, a SecurityResult of 1
// with the reason (3.8) or without it (3.7).
func (h *handshake) fail(reason string) {
	var b []byte
	switch {
	case !h.secSent && h.minor >= 7:
		b = []byte{0}
	case !h.secSent:
		b = binary.BigEndian.AppendUint32(nil, 0)
	case h.minor >= 8:
		b = binary.BigEndian.AppendUint32(nil, 1)
	default:
		h.conn.Write(binary.BigEndian.AppendUint32(nil, 1))
		return
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(reason)))
	h.conn.Write(append(b, reason...))
}

// version exchanges the protocol versions: 3.8 offered; 3.3, 3.7 and 3.8
// taken (3.5 and Apple's 3.889 as 3.3 and 3.8).
func (h *handshake) version() error {
	if _, err := io.WriteString(h.conn, "RFB 003.008\n"); err != nil {
		return err
	}
	var v [12]byte
	if _, err := io.ReadFull(h.conn, v[:]); err != nil {
		return unexpected(err)
	}
	var major, minor int
	if n, _ := fmt.Sscanf(string(v[:]), "RFB %03d.%03d\n", &major, &minor); n != 2 || major != 3 || v[11] != '\n' {
		h.minor = 3
		return refuse(fmt.Sprintf("Not an RFB 3.x client (it sent %q)", v[:]), nil)
	}
	switch {
	case minor >= 8:
		h.minor = 8
	case minor == 7:
		h.minor = 7
	default:
		h.minor = 3
	}
	return nil
}

// security offers VeNCrypt and runs it to the TLS connection.
func (h *handshake) security() error {
	if h.minor < 7 {
		return refuse("This server needs VeNCrypt (TLS and a user name and password), which RFB 3.3 clients cannot choose; use a client of RFB 3.7 or later", nil)
	}
	if _, err := h.conn.Write([]byte{1, secVeNCrypt}); err != nil {
		return err
	}
	h.secSent = true
	var b [2]byte
	if _, err := io.ReadFull(h.conn, b[:1]); err != nil {
		return unexpected(err)
	}
	if b[0] != secVeNCrypt {
		return refuse(fmt.Sprintf("Security type %d is not offered: only VeNCrypt (19) with X509Plain", b[0]), nil)
	}
	// VeNCrypt 0.2: versions, then the subtypes.
	if _, err := h.conn.Write([]byte{0, 2}); err != nil {
		return err
	}
	if _, err := io.ReadFull(h.conn, b[:]); err != nil {
		return unexpected(err)
	}
	if b != [2]byte{0, 2} {
		h.conn.Write([]byte{1})
		return &refusal{reason: fmt.Sprintf("VeNCrypt %d.%d is not served (0.2 is)", b[0], b[1]), err: errSilent}
	}
	msg := []byte{0, 1}
	msg = binary.BigEndian.AppendUint32(msg, secX509Plain)
	if _, err := h.conn.Write(msg); err != nil {
		return err
	}
	var sub [4]byte
	if _, err := io.ReadFull(h.conn, sub[:]); err != nil {
		return unexpected(err)
	}
	if t := binary.BigEndian.Uint32(sub[:]); t != secX509Plain {
		h.conn.Write([]byte{0})
		return &refusal{reason: fmt.Sprintf("VeNCrypt subtype %d is not offered: only X509Plain (262)", t), err: errSilent}
	}
	if _, err := h.conn.Write([]byte{1}); err != nil {
		return err
	}
	tc := tls.Server(h.raw, h.s.cfg.TLS)
	if err := tc.Handshake(); err != nil {
		return &refusal{reason: "TLS handshake failed", err: fmt.Errorf("%w: %w", errSilent, err)}
	}
	h.conn = tc
	return nil
}

// errSilent marks a refusal that cannot be told to the client: VeNCrypt's
// own refusals have no reason, and after a failed TLS handshake nothing
// can be sent.
var errSilent = errors.New("the client was not told")

// plain reads VeNCrypt Plain's user name and password and checks them.
func (h *handshake) plain(ctx context.Context, addr netip.Addr) (Identity, error) {
	var b [8]byte
	if _, err := io.ReadFull(h.conn, b[:]); err != nil {
		return Identity{}, unexpected(err)
	}
	ul, pl := binary.BigEndian.Uint32(b[:4]), binary.BigEndian.Uint32(b[4:])
	if ul > maxUserLen || pl > maxPasswdLen {
		return Identity{}, refuse(fmt.Sprintf("The user name (at most %d bytes) or password (at most %d) is too long", maxUserLen, maxPasswdLen), nil)
	}
	cred := make([]byte, ul+pl)
	if _, err := io.ReadFull(h.conn, cred); err != nil {
		return Identity{}, unexpected(err)
	}
	user, passwd := string(cred[:ul]), string(cred[ul:])
	if auth.ValidUser(user) != nil || auth.ValidPasswd(passwd) != nil {
		return Identity{}, refuse("Invalid user name or password", nil)
	}
	id, err := h.s.cfg.Auth.Authenticate(ctx, user, passwd, addr)
	if err != nil {
		var rl *auth.RateLimitedError
		switch {
		case errors.As(err, &rl):
			return Identity{User: user}, refuse(fmt.Sprintf("Too many failed logins from this address; try again in %d s", int(rl.Wait.Round(time.Second)/time.Second)+1), nil)
		case errors.Is(err, auth.ErrForbidden):
			return Identity{User: user}, refuse("Invalid user name or password", nil)
		case errors.Is(err, auth.ErrServiceUnavailable):
			return Identity{User: user}, refuse("The authentication service is unavailable; try again later", err)
		}
		return Identity{User: user}, refuse("The password could not be checked; try again later", err)
	}
	if id.Role < auth.RoleViewer {
		return id, refuse("Forbidden: VNC needs the viewer role or higher; yours is "+id.Role.String(), nil)
	}
	return id, nil
}

// serverInit reads ClientInit and sends ServerInit.
func (h *handshake) serverInit(br *bufio.Reader, w, hgt int, name string) error {
	if _, err := br.ReadByte(); err != nil { // the shared flag: every client shares
		return unexpected(err)
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(hgt))
	b = append(b, defaultFormat.bytes()...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	_, err := h.conn.Write(append(b, name...))
	return err
}

// deadline sets the connection's deadline (zero: none).
func (h *handshake) deadline(t time.Time) { h.raw.SetDeadline(t) }
