package wol

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"

	"kvmd/internal/netnstest"
)

func TestPacket(t *testing.T) {
	mac, err := ParseMAC("52:54:00:12:34:56")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Packet(mac)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 102 {
		t.Fatalf("%d bytes", len(p))
	}
	// Written out as the magic packet is defined (AMD's white paper:
	// a synchronisation stream of six FF, then the address 16 times).
	want := "ffffffffffff" + repeat("525400123456", 16)
	if got := hexOf(p); got != want {
		t.Errorf("packet\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{"", "52:54:00:12:34", "52:54:00:12:34:56:78", "02:00:5e:10:00:00:00:01", "zz:54:00:12:34:56", "525400123456", "5254.0012.3456", "52:54-00:12:34:56"} {
		if _, err := ParseMAC(bad); !errors.Is(err, ErrBadMAC) {
			t.Errorf("ParseMAC(%q): %v", bad, err)
		}
	}
	if m, err := ParseMAC("52-54-00-AB-cd-EF"); err != nil || m.String() != "52:54:00:ab:cd:ef" {
		t.Errorf("dashes, mixed case: %v %v", m, err)
	}
}

func TestCheck(t *testing.T) {
	mac, _ := ParseMAC("52:54:00:12:34:56")
	for _, tt := range []struct {
		s    Sender
		want error
	}{
		{Sender{MAC: mac, Addr: DefaultAddr}, nil},
		{Sender{MAC: mac[:5], Addr: DefaultAddr}, ErrBadMAC},
		{Sender{MAC: mac, Addr: netip.MustParseAddrPort("[::1]:9")}, ErrBadAddr},
		{Sender{MAC: mac, Addr: netip.MustParseAddrPort("10.0.0.255:0")}, ErrBadAddr},
		{Sender{MAC: mac}, ErrBadAddr},
	} {
		if err := tt.s.Check(); !errors.Is(err, tt.want) {
			t.Errorf("Check(%v): %v, want %v", tt.s, err, tt.want)
		}
		if tt.want != nil {
			if err := tt.s.Send(context.Background()); !errors.Is(err, tt.want) {
				t.Errorf("Send(%v): %v, want %v", tt.s, err, tt.want)
			}
		}
	}
}

// TestSendBroadcast sends the magic packet from one network namespace to
// kvmd's default destination, 255.255.255.255:9, and reads it in another
// namespace on the far end of a veth pair, as a sleeping machine's network
// card would see it on the LAN (the kernel refuses a datagram to a
// broadcast address from a socket without SO_BROADCAST: EACCES). A
// directed broadcast (10.213.N.255) arrives too.
func TestSendBroadcast(t *testing.T) {
	p := netnstest.New(t)
	ln := p.ListenUDP(t, p.B, 9)
	mac, _ := ParseMAC("52:54:00:12:34:56")
	want, _ := Packet(mac)
	directed := netip.AddrFrom4([4]byte{10, 213, p.AddrA.As4()[2], 255})
	for _, to := range []netip.AddrPort{DefaultAddr, netip.AddrPortFrom(directed, 9)} {
		if err := p.Do(p.A, func() error { return Sender{MAC: mac, Addr: to}.Send(context.Background()) }); err != nil {
			t.Fatalf("send to %s: %v", to, err)
		}
		got, from := netnstest.ReadFrom(t, ln)
		if !bytes.Equal(got, want) {
			t.Errorf("to %s: read %x", to, got)
		}
		if from.Addr() != p.AddrA {
			t.Errorf("to %s: from %s, want %s", to, from, p.AddrA)
		}
		t.Logf("to %s: %d bytes from %s", to, len(got), from)
	}
}

func repeat(s string, n int) string { return string(bytes.Repeat([]byte(s), n)) }

func hexOf(p []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(p))
	for _, b := range p {
		out = append(out, digits[b>>4], digits[b&15])
	}
	return string(out)
}
