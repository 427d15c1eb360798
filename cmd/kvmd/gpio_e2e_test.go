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

// post POSTs path over c as the operator and returns the status and the
// envelope's error name.
func post(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	return apiDo(t, c, "POST", "http://kvmd"+path, "op", "oppass", nil)
}

// apiDo sends a request to url with Basic credentials and returns its
// status and the envelope's error name; v, when set, gets its result.
func apiDo(t *testing.T, c *http.Client, method, url, user, passwd string, v any) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.SetBasicAuth(user, passwd)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s %s: not the envelope: %s", method, url, b)
	}
	json.Unmarshal(env.Result, &e)
	if v != nil {
		if err := json.Unmarshal(env.Result, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode, e.Error
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
	ln := p.ListenUDP(t, p.B, 9)
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
	if got, from := netnstest.ReadFrom(t, ln); !bytes.Equal(got, want) || from.Addr() != p.AddrA {
		t.Errorf("read %x from %s, want %x from %s", got, from, want, p.AddrA)
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
	apiDo(t, c, "GET", "http://kvmd"+path, "op", "oppass", v)
}
