// Package netnstest makes two network namespaces joined by a veth pair for
// a test, with iproute2's ip (the kernel's own network stack, not a fake):
// a packet one side sends is read on the other as it would be on a LAN.
// It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN); without, or without
// ip, the test ends through testutil.Missing.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/internal/testutil"
)

// Pair is two namespaces, A and B, each with one end of a veth pair: A is
// 10.213.N.1/24, B 10.213.N.2/24, and A's default route goes through B,
// so that A's limited broadcast (255.255.255.255) leaves on its veth.
type Pair struct {
	A, B         string // the namespaces' names (ip netns)
	AddrA, AddrB netip.Addr
	ip           string
}

// New makes a Pair, removed when t ends.
func New(t testing.TB) *Pair {
	t.Helper()
	ip := testutil.NeedTool(t, "iproute2", "ip")
	if os.Geteuid() != 0 {
		testutil.Missing(t, "network namespaces need root")
	}
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	n := int(b[0])%250 + 1
	p := &Pair{A: "kvmdtest-" + id + "-a", B: "kvmdtest-" + id + "-b", ip: ip,
		AddrA: netip.AddrFrom4([4]byte{10, 213, byte(n), 1}), AddrB: netip.AddrFrom4([4]byte{10, 213, byte(n), 2})}
	t.Cleanup(func() {
		// Deleting a namespace removes its end of the veth, and so both.
		exec.Command(ip, "netns", "del", p.A).Run()
		exec.Command(ip, "netns", "del", p.B).Run()
	})
	va, vb := "kv"+id+"a", "kv"+id+"b"
	for _, args := range [][]string{
		{"netns", "add", p.A},
		{"netns", "add", p.B},
		{"link", "add", va, "netns", p.A, "type", "veth", "peer", "name", vb, "netns", p.B},
		{"-n", p.A, "addr", "add", p.AddrA.String() + "/24", "dev", va},
		{"-n", p.B, "addr", "add", p.AddrB.String() + "/24", "dev", vb},
		{"-n", p.A, "link", "set", va, "up"},
		{"-n", p.B, "link", "set", vb, "up"},
		{"-n", p.A, "link", "set", "lo", "up"},
		{"-n", p.B, "link", "set", "lo", "up"},
		{"-n", p.A, "route", "add", "default", "via", p.AddrB.String()},
	} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return p
}

// Do runs f on a thread inside namespace ns: a socket f opens stays in ns
// after Do returns, wherever it is used from.
func (p *Pair) Do(ns string, f func() error) error {
	errc := make(chan error, 1)
	// A thread that entered another namespace is never given back to the
	// scheduler: it ends with this goroutine (LockOSThread without
	// Unlock), so no other goroutine runs in ns by chance.
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// Command returns cmd run inside namespace ns (ip netns exec).
func (p *Pair) Command(ns string, name string, args ...string) *exec.Cmd {
	return exec.Command(p.ip, append([]string{"netns", "exec", ns, name}, args...)...)
}

// ListenUDP listens on UDP port on every address of namespace ns, as a
// machine there would, until t ends.
func (p *Pair) ListenUDP(t testing.TB, ns string, port int) *net.UDPConn {
	t.Helper()
	var ln *net.UDPConn
	if err := p.Do(ns, func() (err error) {
		ln, err = net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// ReadFrom reads one datagram from ln within 5 s, and its sender.
func ReadFrom(t testing.TB, ln *net.UDPConn) ([]byte, netip.AddrPort) {
	t.Helper()
	buf := make([]byte, 2048)
	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := ln.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("nothing read in the far namespace: %v", err)
	}
	return buf[:n], from
}
