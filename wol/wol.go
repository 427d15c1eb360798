// Package wol sends Wake-on-LAN magic packets, as kvmd's "wol" GPIO driver
// does (kvmd/plugins/ugpio/wol.py in github.com/pikvm/kvmd, read at
// f14596e8): one UDP datagram of six 0xFF bytes then the target's MAC
// address sixteen times, to a configured IPv4 address and port, by default
// the limited broadcast 255.255.255.255 on port 9 (discard). Go's net
// package sets SO_BROADCAST on every UDP socket (setDefaultSockopts), so a
// broadcast address may be the destination as it is.
package wol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// DefaultAddr is kvmd's default destination: the limited broadcast
// address, port 9.
var DefaultAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), 9)

// PacketSize is the size of a magic packet: 6 + 16*6 bytes.
const PacketSize = 6 + 16*6

// ErrBadMAC is a MAC address that is not six bytes (EUI-48): a magic
// packet carries only those.
var ErrBadMAC = errors.New("wol: not a 6-byte MAC address")

// ErrBadAddr is a destination that is not an IPv4 address and port: kvmd
// sends over IPv4 only, where a broadcast exists.
var ErrBadAddr = errors.New("wol: not an IPv4 address and port")

// Packet returns the magic packet that wakes mac.
func Packet(mac net.HardwareAddr) ([]byte, error) {
	if len(mac) != 6 {
		return nil, ErrBadMAC
	}
	p := bytes.Repeat([]byte{0xff}, 6)
	for range 16 {
		p = append(p, mac...)
	}
	return p, nil
}

// ParseMAC reads a MAC address as kvmd's valid_mac takes it: six pairs of
// hex digits separated by colons (or dashes, all alike), any case.
func ParseMAC(s string) (net.HardwareAddr, error) {
	sep := len(s) == 17
	for i := 2; sep && i < len(s); i += 3 {
		sep = (s[i] == ':' || s[i] == '-') && s[i] == s[2]
	}
	mac, err := net.ParseMAC(s)
	if !sep || err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%w: %q", ErrBadMAC, s)
	}
	return mac, nil
}

// Sender sends the magic packet of one MAC address to one destination.
type Sender struct {
	MAC  net.HardwareAddr
	Addr netip.AddrPort
}

// Check says whether s can send at all, for the configuration's check at
// start.
func (s Sender) Check() error {
	if len(s.MAC) != 6 {
		return ErrBadMAC
	}
	if !s.Addr.IsValid() || !s.Addr.Addr().Unmap().Is4() || s.Addr.Port() == 0 {
		return fmt.Errorf("%w: %s", ErrBadAddr, s.Addr)
	}
	return nil
}

// Send sends one magic packet. Its socket lives for the call only.
func (s Sender) Send(ctx context.Context) error {
	if err := s.Check(); err != nil {
		return err
	}
	p, _ := Packet(s.MAC)
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp4", netip.AddrPortFrom(s.Addr.Addr().Unmap(), s.Addr.Port()).String())
	if err != nil {
		return fmt.Errorf("wol: %w", err)
	}
	defer c.Close()
	if _, err := c.Write(p); err != nil {
		return fmt.Errorf("wol: sending to %s: %w", s.Addr, err)
	}
	return nil
}
