package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/internal/netnstest"
	"kvmd/wol"
)

// unixClient talks HTTP to a daemon's unix socket: the socket's file is
// reachable from any network namespace.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// post POSTs path as the operator and returns the status and the
// envelope's error name.
func post(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://kvmd"+path, nil)
	req.SetBasicAuth("op", "oppass")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Result struct {
			Error string `json:"error"`
		} `json:"result"`
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &env)
	return resp.StatusCode, env.Result.Error
}

// TestWakeOnLAN runs the demo daemon in a network namespace of its own,
// joined to a second one by a veth pair, with kvmd's __wol__ channel for a
// MAC address: POST /api/gpio/pulse?channel=__wol__ sends the magic packet
// to 255.255.255.255:9, and a listener in the second namespace, where the
// machine to wake would be, reads it. A second pulse while the channel is
// busy is 409; switching it, bad parameters and an unknown channel are
// kvmd's 400s.
func TestWakeOnLAN(t *testing.T) {
	p := netnstest.New(t)
	var ln *net.UDPConn
	if err := p.Do(p.B, func() (err error) {
		ln, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 9})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	users := usersFile(t, "op", "oppass")
	if _, stderr, err := runKvmd(t, "", "user", "set", "op", "--role", "operator", "--users", users); err != nil {
		t.Fatalf("user set: %v %s", err, stderr)
	}
	sock := filepath.Join(t.TempDir(), "kvmd.sock")
	const mac = "52:54:00:ab:cd:ef"
	d := startProc(t, p.Command(p.A, kvmdBin, "serve", "--demo", "--users", users, "--listen", "unix:"+sock, "--wol-mac", mac))
	d.stderr.wait(t, `kvmd listening`)
	c := unixClient(sock)
	defer c.CloseIdleConnections()

	var st struct {
		Model struct {
			Scheme struct {
				Outputs map[string]struct {
					Switch bool `json:"switch"`
					HW     struct {
						Driver string `json:"driver"`
					} `json:"hw"`
				} `json:"outputs"`
			} `json:"scheme"`
		} `json:"model"`
	}
	getJSON(t, c, "/api/gpio", &st)
	if o, ok := st.Model.Scheme.Outputs["__wol__"]; !ok || o.Switch || o.HW.Driver != "__wol__" {
		t.Errorf("/api/gpio's outputs: %+v", st.Model.Scheme.Outputs)
	}
	if status, name := post(t, c, "/api/gpio/pulse?channel=__wol__"); status != 200 {
		t.Fatalf("pulse: %d %s", status, name)
	}
	if status, name := post(t, c, "/api/gpio/pulse?channel=__wol__"); status != 409 || name != "GpioChannelIsBusyError" {
		t.Errorf("a second pulse at once: %d %s", status, name)
	}
	want, _ := wol.Packet(mustMAC(t, mac))
	buf := make([]byte, 512)
	ln.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := ln.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no magic packet in the far namespace: %v", err)
	}
	if !bytes.Equal(buf[:n], want) || from.Addr() != p.AddrA {
		t.Errorf("read %x from %s, want %x from %s", buf[:n], from, want, p.AddrA)
	}
	if status, name := post(t, c, "/api/gpio/switch?channel=__wol__&state=1"); status != 400 || name != "GpioSwitchNotSupported" {
		t.Errorf("switch of __wol__: %d %s", status, name)
	}
	for _, q := range []string{"channel=", "channel=__wol__&delay=x", "channel=__wol__&wait=maybe", "channel=" + strings.Repeat("x", 300)} {
		if status, name := post(t, c, "/api/gpio/pulse?"+q); status != 400 || name != "ValidatorError" {
			t.Errorf("pulse?%s: %d %s", q, status, name)
		}
	}
	if status, name := post(t, c, "/api/gpio/pulse?channel=nope"); status != 400 || name != "GpioChannelNotFoundError" {
		t.Errorf("unknown channel: %d %s", status, name)
	}

	// The demo's output channel, on the demo host's pin, which says in
	// the log when it goes high and low: a pulse, then a switch.
	for _, q := range []string{"pulse?channel=demo_relay&delay=0.1&wait=1", "switch?channel=demo_relay&state=1&wait=1"} {
		if status, name := post(t, c, "/api/gpio/"+q); status != 200 {
			t.Fatalf("%s: %d %s", q, status, name)
		}
	}
	if n := strings.Count(d.stderr.String(), "demo host: DEMO_OUT high"); n != 2 || strings.Count(d.stderr.String(), "demo host: DEMO_OUT low") != 1 {
		t.Errorf("the demo's output pin went high %d times:\n%s", n, d.stderr)
	}
	var out struct {
		State struct {
			Outputs map[string]struct{ Online, State, Busy bool } `json:"outputs"`
		} `json:"state"`
	}
	getJSON(t, c, "/api/gpio", &out)
	if o := out.State.Outputs["demo_relay"]; !o.Online || !o.State || o.Busy {
		t.Errorf("demo_relay after switching on: %+v", o)
	}
}

func mustMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	m, err := wol.ParseMAC(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// getJSON GETs path over c as the operator into v (the envelope's result).
func getJSON(t *testing.T, c *http.Client, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://kvmd"+path, nil)
	req.SetBasicAuth("op", "oppass")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Result, v); err != nil {
		t.Fatal(err)
	}
}
