package httpd

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/atx"
	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/info"
	"kvmd/internal/fixture"
	"kvmd/subsystem"
)

// rawUpgrade sends a WebSocket handshake as written, over network (tcp from
// 127.0.0.1, or unix) to e, and returns the reply's status; with a 101 it
// also reads the first frame the server sends and returns its text.
func rawUpgrade(t *testing.T, e *env, network, request string) (status int, first string) {
	t.Helper()
	addr := strings.TrimPrefix(e.base, "http://")
	if network == "unix" {
		addr = e.sock
	}
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, strings.ReplaceAll(request, "\n", "\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, ""
	}
	if !headerHasToken(resp.Header, "Upgrade", "websocket") || !headerHasToken(resp.Header, "Connection", "upgrade") {
		t.Errorf("101 without Upgrade: websocket and Connection: Upgrade: %v", resp.Header)
	}
	return resp.StatusCode, readFrame(t, br)
}

// readFrame reads one unmasked server frame (RFC 6455 section 5.2) and
// returns its payload.
func readFrame(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	n := uint64(hdr[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		t.Fatalf("frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return string(p)
}

// pikvmUpgrade is the /api/ws handshake as PiKVM's nginx passes it on to
// kvmd (pikvm/kvmd at f14596e8, configs/nginx/kvmd.ctx-server.conf,
// location /api/ws: the path rewritten to /ws, proxy_pass to the unix
// socket, no proxy_http_version, so HTTP/1.0; loc-proxy.conf: Host $host,
// which has no port, X-Real-IP, X-Scheme, X-Forwarded-Proto,
// X-Forwarded-Port $server_port, X-Forwarded-For; loc-websocket.conf:
// Upgrade $http_upgrade, Connection "upgrade"), with the browser's own
// headers after them: here, from a page at https://pikvm.local:8443/kvm/.
func pikvmUpgrade(host, port, origin string, extra ...string) string {
	return "GET /ws HTTP/1.0\n" +
		"Host: " + host + "\n" +
		"X-Real-IP: 192.0.2.7\n" +
		"X-Scheme: https\n" +
		"X-Forwarded-Proto: https\n" +
		"X-Forwarded-Port: " + port + "\n" +
		"X-Forwarded-For: 192.0.2.7\n" +
		"Upgrade: websocket\n" +
		"Connection: upgrade\n" +
		"Origin: " + origin + "\n" +
		"Sec-WebSocket-Version: 13\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n" +
		"X-KVMD-User: admin\nX-KVMD-Passwd: admin-pass\n" +
		strings.Join(extra, "") + "\n"
}

// TestWSBehindPiKVMNginx: PiKVM's nginx sends the upgrade as HTTP/1.0 with
// a Host without the port; kvmd (aiohttp) accepts it, so must we. An
// Origin of another site, or of another port of the same host, is still
// refused.
func TestWSBehindPiKVMNginx(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"HTTP/1.0 on port 8443", pikvmUpgrade("pikvm.local", "8443", "https://pikvm.local:8443"), 101},
		{"HTTP/1.0 on port 443", pikvmUpgrade("pikvm.local", "443", "https://pikvm.local"), 101},
		{"origin's host in another case", pikvmUpgrade("PiKVM.local", "8443", "https://pikvm.LOCAL:8443"), 101},
		{"another site", pikvmUpgrade("pikvm.local", "8443", "https://evil.example:8443"), 403},
		{"another port of the host", pikvmUpgrade("pikvm.local", "8443", "https://pikvm.local:9443"), 403},
		{"the default port, not the proxy's", pikvmUpgrade("pikvm.local", "8443", "https://pikvm.local"), 403},
		{"an opaque origin", pikvmUpgrade("pikvm.local", "8443", "null"), 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, first := rawUpgrade(t, e, "unix", tc.req)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if status == 101 && !strings.HasPrefix(first, `{"event_type":"loop"`) {
				t.Errorf("first event %q, want loop", first)
			}
		})
	}
}

// TestWSOriginThroughProxies: a reverse proxy's X-Forwarded-Host,
// Forwarded host= and X-Forwarded-Port say which host the browser asked
// for, and are believed from a trusted proxy only (the unix socket, or
// Config.TrustedProxies); a direct client's Host must match its Origin, as
// before, whatever it forwards.
func TestWSOriginThroughProxies(t *testing.T) {
	d, _ := testDevices(t)
	untrusted := newEnv(t, envOpts{devices: d})
	d2, _ := testDevices(t)
	trusted := newEnv(t, envOpts{devices: d2, trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	upgrade := func(proto, host, origin string, fwd ...string) string {
		return "GET /api/ws " + proto + "\nHost: " + host + "\nUpgrade: websocket\nConnection: Upgrade\n" +
			"Origin: " + origin + "\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n" +
			"X-KVMD-User: admin\nX-KVMD-Passwd: admin-pass\n" + strings.Join(fwd, "") + "\n"
	}
	for _, tc := range []struct {
		name                  string
		req                   string
		viaTrusted, viaDirect int // over TCP, from a trusted proxy or not
		viaUnix               int
	}{
		{"same host and port", upgrade("HTTP/1.1", "kvm.example:8080", "http://kvm.example:8080"), 101, 101, 101},
		{"HTTP/1.0, same host and port", upgrade("HTTP/1.0", "kvm.example:8080", "http://kvm.example:8080"), 101, 101, 101},
		{"default port left out of both", upgrade("HTTP/1.1", "kvm.example", "https://kvm.example"), 101, 101, 101},
		{"default port written in the Host", upgrade("HTTP/1.1", "kvm.example:443", "https://kvm.example"), 101, 101, 101},
		{"another site", upgrade("HTTP/1.1", "kvm.example", "https://evil.example"), 403, 403, 403},
		{"X-Forwarded-Host", upgrade("HTTP/1.1", "127.0.0.1:8080", "https://kvm.example",
			"X-Forwarded-Host: kvm.example\n"), 101, 403, 101},
		{"X-Forwarded-Host with its port", upgrade("HTTP/1.1", "127.0.0.1:8080", "https://kvm.example:8443",
			"X-Forwarded-Host: kvm.example:8443\n"), 101, 403, 101},
		{"X-Forwarded-Host of another site", upgrade("HTTP/1.1", "127.0.0.1:8080", "https://kvm.example",
			"X-Forwarded-Host: evil.example\n"), 403, 403, 403},
		{"Forwarded host=", upgrade("HTTP/1.1", "127.0.0.1:8080", "https://kvm.example:8443",
			"Forwarded: for=192.0.2.7;host=\"kvm.example:8443\";proto=https\n"), 101, 403, 101},
		{"X-Forwarded-Port", upgrade("HTTP/1.1", "kvm.example", "https://kvm.example:8443",
			"X-Forwarded-Port: 8443\n"), 101, 403, 101},
		{"X-Forwarded-Port of another port", upgrade("HTTP/1.1", "kvm.example", "https://kvm.example:8443",
			"X-Forwarded-Port: 9443\n"), 403, 403, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, via := range []struct {
				name string
				e    *env
				net  string
				want int
			}{{"trusted proxy", trusted, "tcp", tc.viaTrusted}, {"direct", untrusted, "tcp", tc.viaDirect}, {"unix socket", untrusted, "unix", tc.viaUnix}} {
				if status, _ := rawUpgrade(t, via.e, via.net, tc.req); status != via.want {
					t.Errorf("%s: status %d, want %d", via.name, status, via.want)
				}
			}
		})
	}
}

// TestWSGreetingInfo: kvmd greets a new WebSocket client with loop, the
// subsystems' states, info among them after the streamer, one info event
// per info field ({"<field>": state}, kvmd's InfoManager poll_state), in
// the order of its InfoManager; each the value /api/info?fields=<field>
// gives. The info source is the real one, on a Raspberry Pi 4's tree.
func TestWSGreetingInfo(t *testing.T) {
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", "rpi4.ttar"), root); err != nil {
		t.Fatal(err)
	}
	src := info.New(info.Config{FS: hw.New(root), V4L2: &v4l2test.Fake{}, Version: "4.108.1"})
	d, b := testDevices(t)
	d.Subsystems = testSubsystems(atx.Subsystem{C: b.ctl}, nil, subsystem.Of[json.RawMessage](info.Subsystem{S: src}))
	e := newEnv(t, envOpts{devices: d, info: src})
	c := dialWS(t, e, "?stream=0", adminHeader)
	var types, fields []string
	for len(types) < 1+5+8 {
		ev := readEvent(t, c)
		types = append(types, ev.Type)
		if ev.Type != "info" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ev.Event, &m); err != nil || len(m) != 1 {
			t.Fatalf("info event %s: want one field", ev.Event)
		}
		for f, v := range m {
			fields = append(fields, f)
			r := e.req("GET", "/api/info?legacy=0&fields="+f, map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}, "")
			var want struct {
				Result map[string]json.RawMessage `json:"result"`
			}
			json.Unmarshal(r.body, &want)
			if f != "uptime" && f != "health" && string(want.Result[f]) != string(v) {
				t.Errorf("info event's %s %s, /api/info has %s", f, v, want.Result[f])
			}
		}
	}
	want := "loop gpio hid atx msd streamer info info info info info info info info"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("greeting %q, want %q", got, want)
	}
	if got, want := strings.Join(fields, " "), "system auth meta extras health uptime node fan"; got != want {
		t.Errorf("info fields %q, want %q", got, want)
	}
}

// FuzzSameOrigin: any Origin, Host and forwarded headers give an answer,
// never a panic; from a peer that is no trusted proxy the forwarded headers
// change nothing; an origin that is exactly http://Host matches.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range [][5]string{
		{"https://pikvm.local:8443", "pikvm.local", "", "", "8443"},
		{"null", "kvm.example", "evil.example", "host=evil.example", "443"},
		{"http://[::1]:8080", "[::1]:8080", "", "", ""},
		{"https://kvm.example", "127.0.0.1:8080", "kvm.example, other", `for=x;host="kvm.example:443"`, "x"},
		{"http://a:0", "a:0", "", "", "0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}}}
	f.Fuzz(func(t *testing.T, origin, host, xfh, fwd, xfp string) {
		r := httptest.NewRequest("GET", "/api/ws", nil)
		r.Host = host
		r.RemoteAddr = "198.51.100.7:4711" // not a trusted proxy
		bare := s.sameOrigin(r, origin)
		r.Header.Set("X-Forwarded-Host", xfh)
		r.Header.Set("Forwarded", fwd)
		r.Header.Set("X-Forwarded-Port", xfp)
		if got := s.sameOrigin(r, origin); got != bare {
			t.Fatalf("an untrusted peer's forwarded headers changed the answer: %v, without them %v", got, bare)
		}
		r.RemoteAddr = "192.0.2.1:4711"
		s.sameOrigin(r, origin)
		if u, err := url.Parse("http://" + host); err == nil && u.Host == host && u.Hostname() != "" && u.User == nil &&
			u.Path == "" && (u.Port() == "" || validPort(u.Port())) {
			r.RemoteAddr = "198.51.100.7:4711"
			if !s.sameOrigin(r, "http://"+host) {
				t.Fatalf("http://%s does not match Host %q", host, host)
			}
		}
	})
}
