package radiusauth

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"kvmd/auth/backend"
)

const (
	// DefaultPort is the authentication port a Config.Server without
	// one gets (RFC 2865).
	DefaultPort = "1812"
	// DefaultTimeout is the time budget of a Verify when
	// Config.Timeout is zero.
	DefaultTimeout = 5 * time.Second
	// DefaultNASIdentifier is the NAS-Identifier sent when
	// Config.NASIdentifier is empty.
	DefaultNASIdentifier = "kvmd"
	// MaxRetries bounds Config.Retries: more would split the budget
	// into slots too short for a server on the other side of a WAN.
	MaxRetries = 10

	// maxPassword is the longest User-Password RFC 2865 allows.
	maxPassword = 128
	// maxString is the longest value of a RADIUS attribute.
	maxString = 253
	// maLen is the length of a Message-Authenticator attribute.
	maLen = 2 + md5.Size
)

// Config says which RADIUS server to ask and how.
type Config struct {
	// Server is the server's host:port; a bare host or IP address gets
	// DefaultPort. The host is resolved at each Verify.
	Server string
	// Secret is the shared secret of this client's entry on the server.
	Secret []byte
	// Timeout is the longest a Verify takes, retransmissions included;
	// zero means DefaultTimeout. A context deadline that comes sooner
	// wins.
	Timeout time.Duration
	// Retries is how many times the request is sent again when no
	// answer came: Retries+1 equal slots share the timeout.
	Retries int
	// NASIdentifier is the NAS-Identifier attribute, which the server
	// may match its policy on; empty means DefaultNASIdentifier.
	NASIdentifier string
	// FilterIDRoles takes the user's role from the Filter-Id attribute
	// (RFC 2865, 11) of the Access-Accept: "kvmd-admin", "kvmd-operator"
	// or "kvmd-viewer". An accept without one of them is refused.
	FilterIDRoles bool
}

// filterIDRoles are the Filter-Id values that give a role.
var filterIDRoles = map[string]string{"kvmd-admin": "admin", "kvmd-operator": "operator", "kvmd-viewer": "viewer"}

// A Backend checks passwords against one RADIUS server. Its methods are
// safe for concurrent use: each Verify uses its own socket.
type Backend struct {
	server  string
	secret  []byte
	timeout time.Duration
	retries int
	nasID   string

	filterIDRoles bool
	rolesMu       sync.RWMutex
	roles         map[string]string // user -> the role of its last Access-Accept
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Roler   = (*Backend)(nil)
)

// Role returns the role the user's last Access-Accept gave (FilterIDRoles);
// false without FilterIDRoles.
func (b *Backend) Role(user string) (string, bool) {
	b.rolesMu.RLock()
	defer b.rolesMu.RUnlock()
	r, ok := b.roles[user]
	return r, ok
}

// New checks cfg and returns a Backend for it. It does no network I/O.
func New(cfg Config) (*Backend, error) {
	server, err := serverAddr(cfg.Server)
	if err != nil {
		return nil, err
	}
	if len(cfg.Secret) == 0 {
		return nil, errors.New("radius: empty shared secret")
	}
	if s := cfg.Secret[len(cfg.Secret)-1]; s == '\n' || s == '\r' {
		return nil, errors.New("radius: shared secret ends with a newline (trim the secret file)")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("radius: negative timeout %v", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if cfg.Retries < 0 || cfg.Retries > MaxRetries {
		return nil, fmt.Errorf("radius: retries %d not in 0..%d", cfg.Retries, MaxRetries)
	}
	nasID := cfg.NASIdentifier
	if nasID == "" {
		nasID = DefaultNASIdentifier
	}
	if err := checkString(nasID); err != nil {
		return nil, fmt.Errorf("radius: NAS-Identifier: %w", err)
	}
	return &Backend{
		server:  server,
		secret:  append([]byte(nil), cfg.Secret...),
		timeout: timeout,
		retries: cfg.Retries,
		nasID:   nasID,

		filterIDRoles: cfg.FilterIDRoles,
		roles:         map[string]string{},
	}, nil
}

// serverAddr returns s as host:port, with DefaultPort when s has none.
func serverAddr(s string) (string, error) {
	if s == "" {
		return "", errors.New("radius: no server given")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// A bare host, IPv4 or IPv6 address, or a bracketed IPv6
		// address without a port.
		host, port = s, DefaultPort
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
			if net.ParseIP(host) == nil {
				return "", fmt.Errorf("radius: server %q: bad IPv6 address", s)
			}
		} else if strings.Contains(host, ":") && net.ParseIP(host) == nil {
			return "", fmt.Errorf("radius: server %q: %w", s, err)
		}
	}
	if host == "" {
		return "", fmt.Errorf("radius: server %q: no host", s)
	}
	for _, r := range host {
		if r <= ' ' || r == 0x7f || r == '/' || r == '[' || r == ']' {
			return "", fmt.Errorf("radius: server %q: bad host", s)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("radius: server %q: port is not a number in 1..65535", s)
	}
	return net.JoinHostPort(host, port), nil
}

// checkString tells whether s can go into a RADIUS text attribute that
// a server logs and matches: 1 to 253 bytes of UTF-8 (RFC 2865 section
// 5) without control characters.
func checkString(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > maxString:
		return fmt.Errorf("longer than %d bytes", maxString)
	case !utf8.ValidString(s):
		return errors.New("not UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errors.New("has control characters")
	}
	return nil
}

// Name returns "radius".
func (b *Backend) Name() string { return "radius" }

// Verify sends a PAP Access-Request for user and passwd and waits for
// the answer, retransmitting when none comes; see the package
// documentation for the timing. Credentials that cannot be sent (an
// empty password, a user name with control characters) are rejected
// without asking the server. The error never contains the password.
func (b *Backend) Verify(ctx context.Context, user, passwd string) error {
	if err := checkString(user); err != nil {
		return fmt.Errorf("radius: user name %w: %w", err, backend.ErrRejected)
	}
	switch {
	case passwd == "":
		return fmt.Errorf("radius: empty password: %w", backend.ErrRejected)
	case len(passwd) > maxPassword:
		return fmt.Errorf("radius: password longer than %d bytes: %w", maxPassword, backend.ErrRejected)
	case strings.IndexByte(passwd, 0) >= 0:
		// The server ends the password at the first NUL (the PAP
		// padding), so "secret\x00junk" would pass as "secret".
		return fmt.Errorf("radius: password contains NUL: %w", backend.ErrRejected)
	}

	deadline := time.Now().Add(b.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	wire, err := b.request(user, passwd)
	if err != nil {
		return fmt.Errorf("radius: encoding the request: %w: %w", err, backend.ErrUnavailable)
	}
	resp, err := b.exchange(ctx, wire, deadline)
	if err != nil {
		return err
	}
	switch resp.Code {
	case radius.CodeAccessAccept:
		if !b.filterIDRoles {
			return nil
		}
		ids, _ := rfc2865.FilterID_GetStrings(resp)
		for _, v := range ids {
			if role, ok := filterIDRoles[v]; ok {
				b.rolesMu.Lock()
				b.roles[user] = role
				b.rolesMu.Unlock()
				return nil
			}
		}
		return fmt.Errorf("radius: %s: Access-Accept without a Filter-Id of kvmd-admin, kvmd-operator or kvmd-viewer: %w", b.server, backend.ErrRejected)
	case radius.CodeAccessReject:
		// The Reply-Message is the server's text for the user; it may
		// say why (an expired account), so it goes into the log, cut.
		if msg := rfc2865.ReplyMessage_GetString(resp); msg != "" {
			if len(msg) > 120 {
				msg = strings.ToValidUTF8(msg[:120], "") + "..."
			}
			return fmt.Errorf("radius: %s: Access-Reject (Reply-Message %q): %w", b.server, msg, backend.ErrRejected)
		}
		return fmt.Errorf("radius: %s: Access-Reject: %w", b.server, backend.ErrRejected)
	case radius.CodeAccessChallenge:
		return fmt.Errorf("radius: %s: Access-Challenge is not supported (a challenge-response or one-time-password policy): %w",
			b.server, backend.ErrUnavailable)
	default:
		return fmt.Errorf("radius: %s: unexpected %v: %w", b.server, resp.Code, backend.ErrUnavailable)
	}
}

// request returns the encoded Access-Request: Message-Authenticator
// first, as draft-ietf-radext-deprecating-radius asks, then User-Name,
// User-Password and NAS-Identifier.
func (b *Backend) request(user, passwd string) ([]byte, error) {
	p := radius.New(radius.CodeAccessRequest, b.secret)
	if err := rfc2869.MessageAuthenticator_Add(p, make([]byte, md5.Size)); err != nil {
		return nil, err
	}
	if err := rfc2865.UserName_SetString(p, user); err != nil {
		return nil, err
	}
	if err := rfc2865.UserPassword_SetString(p, passwd); err != nil {
		return nil, errors.New("hiding the password failed")
	}
	if err := rfc2865.NASIdentifier_SetString(p, b.nasID); err != nil {
		return nil, err
	}
	wire, err := p.Encode()
	if err != nil {
		return nil, err
	}
	// An Access-Request's Message-Authenticator is the HMAC-MD5 of the
	// packet with the attribute's value zeroed (RFC 3579 section 3.2),
	// and the Request Authenticator is random, so it is computed last.
	mac := hmac.New(md5.New, b.secret)
	mac.Write(wire)
	mac.Sum(wire[20+2 : 20+2 : 20+maLen])
	return wire, nil
}

// exchange sends wire in Retries+1 slots up to deadline and returns the
// first authentic answer.
func (b *Backend) exchange(ctx context.Context, wire []byte, deadline time.Time) (*radius.Packet, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", b.server)
	if err != nil {
		return nil, fmt.Errorf("radius: %s: %w: %w", b.server, backend.ErrUnavailable, err)
	}
	defer conn.Close()
	// A cancelled ctx ends a pending Read through the closed socket.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	start := time.Now()
	slots := b.retries + 1
	slot := deadline.Sub(start) / time.Duration(slots)
	buf := make([]byte, radius.MaxPacketLength+1)
	sent, bad := 0, 0
	var lastBad error
	for i := range slots {
		if ctx.Err() != nil {
			break
		}
		if _, err := conn.Write(wire); err != nil {
			return nil, b.ioError(ctx, err)
		}
		sent++
		end := deadline
		if i < slots-1 {
			end = start.Add(slot * time.Duration(i+1))
		}
		if err := conn.SetReadDeadline(end); err != nil {
			return nil, b.ioError(ctx, err)
		}
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ctx.Err() != nil || isTimeout(err) {
					break // the next slot, or the end
				}
				return nil, b.ioError(ctx, err)
			}
			resp, err := b.parseResponse(buf[:n], wire)
			if err != nil {
				bad++
				lastBad = err
				continue
			}
			return resp, nil
		}
	}
	msg := fmt.Sprintf("radius: %s: no valid answer in %v (%d requests sent",
		b.server, time.Since(start).Round(time.Millisecond), sent)
	if bad > 0 {
		msg += fmt.Sprintf(", %d invalid responses ignored, the last for %v: is the shared secret right?", bad, lastBad)
	}
	msg += ")"
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%s: %w: %w", msg, backend.ErrUnavailable, err)
	}
	return nil, fmt.Errorf("%s: %w", msg, backend.ErrUnavailable)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ioError wraps a socket error, or ctx's error when ctx ended the wait.
func (b *Backend) ioError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = ctx.Err()
	} else if errors.Is(err, syscall.ECONNREFUSED) {
		err = errors.New("port unreachable (connection refused)")
	}
	return fmt.Errorf("radius: %s: %w: %w", b.server, backend.ErrUnavailable, err)
}

// parseResponse returns the packet in b when it is an authentic
// response to the request req.
func (b *Backend) parseResponse(resp, req []byte) (*radius.Packet, error) {
	if len(resp) < 20 {
		return nil, errors.New("short packet")
	}
	n := int(binary.BigEndian.Uint16(resp[2:4]))
	if n < 20 || n > radius.MaxPacketLength || n > len(resp) {
		return nil, errors.New("bad length")
	}
	resp = resp[:n] // octets past Length are padding (RFC 2865 section 3)
	if resp[1] != req[1] {
		return nil, errors.New("another request's identifier")
	}
	if !radius.IsAuthenticResponse(resp, req, b.secret) {
		return nil, errors.New("bad Response Authenticator")
	}
	p, err := radius.Parse(resp, b.secret)
	if err != nil {
		return nil, err
	}
	if err := b.checkMessageAuthenticator(resp, req); err != nil {
		return nil, err
	}
	return p, nil
}

// checkMessageAuthenticator checks a response's Message-Authenticator,
// if it has one: the HMAC-MD5 of the packet with the Request
// Authenticator in place of the Response Authenticator and the
// attribute's value zeroed (RFC 3579 section 3.2).
func (b *Backend) checkMessageAuthenticator(resp, req []byte) error {
	at := -1
	for i := 20; i+2 <= len(resp); i += int(resp[i+1]) {
		if resp[i+1] < 2 {
			return errors.New("bad attribute length")
		}
		if radius.Type(resp[i]) != rfc2869.MessageAuthenticator_Type {
			continue
		}
		if at >= 0 || resp[i+1] != maLen || i+maLen > len(resp) {
			return errors.New("bad Message-Authenticator")
		}
		at = i
	}
	if at < 0 {
		return nil
	}
	c := append([]byte(nil), resp...)
	copy(c[4:20], req[4:20])
	clear(c[at+2 : at+maLen])
	mac := hmac.New(md5.New, b.secret)
	mac.Write(c)
	if !hmac.Equal(mac.Sum(nil), resp[at+2:at+maLen]) {
		return errors.New("bad Message-Authenticator")
	}
	return nil
}
