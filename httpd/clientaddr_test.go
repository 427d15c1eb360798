package httpd

import (
	"kvmd/auth"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestForwardedFor(t *testing.T) {
	trustedNets := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	trusted := func(a netip.Addr) bool {
		return slices.ContainsFunc(trustedNets, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	peer := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name string
		hdr  [][2]string
		want string // "" for the zero Addr
	}{
		{"nothing forwarded: the peer", nil, "10.0.0.1"},
		{"X-Real-IP", [][2]string{{"X-Real-IP", "192.0.2.7"}}, "192.0.2.7"},
		{"X-Real-IP wins over X-Forwarded-For", [][2]string{{"X-Real-IP", "192.0.2.7"}, {"X-Forwarded-For", "198.51.100.1"}}, "192.0.2.7"},
		{"X-Real-IP with a port", [][2]string{{"X-Real-IP", "192.0.2.7:5555"}}, "192.0.2.7"},
		{"X-Real-IP IPv6", [][2]string{{"X-Real-IP", "2001:db8::7"}}, "2001:db8::7"},
		{"X-Real-IP mapped IPv4", [][2]string{{"X-Real-IP", "::ffff:192.0.2.7"}}, "192.0.2.7"},
		{"X-Real-IP garbage falls to XFF", [][2]string{{"X-Real-IP", "nonsense"}, {"X-Forwarded-For", "198.51.100.1"}}, "198.51.100.1"},
		{"the last X-Real-IP", [][2]string{{"X-Real-IP", "192.0.2.1"}, {"X-Real-IP", "192.0.2.2"}}, "192.0.2.2"},
		// The client wrote everything left of what the proxy appended.
		{"XFF: rightmost, not leftmost", [][2]string{{"X-Forwarded-For", "1.2.3.4, 198.51.100.9"}}, "198.51.100.9"},
		{"XFF: trusted hops skipped", [][2]string{{"X-Forwarded-For", "1.2.3.4, 198.51.100.9, 10.1.1.1, 10.2.2.2"}}, "198.51.100.9"},
		{"XFF: over several lines", [][2]string{{"X-Forwarded-For", "1.2.3.4"}, {"X-Forwarded-For", "198.51.100.9, 10.1.1.1"}}, "198.51.100.9"},
		{"XFF: all trusted, the leftmost", [][2]string{{"X-Forwarded-For", "10.3.3.3, 10.2.2.2"}}, "10.3.3.3"},
		{"XFF: garbage left of the client is ignored", [][2]string{{"X-Forwarded-For", "x, 198.51.100.9"}}, "198.51.100.9"},
		{"XFF: garbage at the right: the peer", [][2]string{{"X-Forwarded-For", "198.51.100.9, junk"}}, "10.0.0.1"},
		{"XFF: garbage behind a trusted hop", [][2]string{{"X-Forwarded-For", "junk, 10.2.2.2"}}, "10.2.2.2"},
		{"XFF: empty entries", [][2]string{{"X-Forwarded-For", ", 198.51.100.9"}}, "198.51.100.9"},
		{"XFF: IPv6 trusted /48 skipped", [][2]string{{"X-Forwarded-For", "2001:db8:1::5, 2001:db8:ffff::1"}}, "2001:db8:1::5"},
		// RFC 7239 section 4 and 7 examples, and worse.
		{"Forwarded: RFC example", [][2]string{{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}}, "192.0.2.60"},
		{"Forwarded: quoted IPv6 with port", [][2]string{{"Forwarded", `For="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"Forwarded: rightmost untrusted", [][2]string{{"Forwarded", "for=192.0.2.43, for=198.51.100.17"}}, "198.51.100.17"},
		{"Forwarded: trusted hop skipped", [][2]string{{"Forwarded", "for=192.0.2.43, for=198.51.100.17;by=10.0.0.1, for=10.9.9.9"}}, "198.51.100.17"},
		{"Forwarded: several lines", [][2]string{{"Forwarded", "for=192.0.2.43"}, {"Forwarded", "for=198.51.100.17"}}, "198.51.100.17"},
		{"Forwarded: case and spaces", [][2]string{{"Forwarded", "  FOR = 192.0.2.9 ; Proto=https"}}, "192.0.2.9"},
		{"Forwarded: obfuscated client: the peer", [][2]string{{"Forwarded", "for=_hidden"}}, "10.0.0.1"},
		{"Forwarded: obfuscated behind a trusted hop", [][2]string{{"Forwarded", "for=_hidden, for=10.7.7.7"}}, "10.7.7.7"},
		{"Forwarded: unknown", [][2]string{{"Forwarded", "for=unknown"}}, "10.0.0.1"},
		{"Forwarded: obfuscated port, real address", [][2]string{{"Forwarded", `for="192.0.2.1:_abc"`}}, "192.0.2.1"},
		{"Forwarded: quoted comma is no separator", [][2]string{{"Forwarded", `for=198.51.100.3;host="a,b", for=192.0.2.44`}}, "192.0.2.44"},
		{"Forwarded: quoted comma, client at the right", [][2]string{{"Forwarded", `for=192.0.2.44, for=198.51.100.3;host="a,for=1.1.1.1"`}}, "198.51.100.3"},
		{"Forwarded: escaped quote", [][2]string{{"Forwarded", `for=192.0.2.44;ext="a\"b", for=198.51.100.5`}}, "198.51.100.5"},
		{"Forwarded: unclosed quote", [][2]string{{"Forwarded", `for=192.0.2.44, for="198.51.100.5`}}, "10.0.0.1"},
		{"Forwarded: no for", [][2]string{{"Forwarded", "proto=https;by=10.0.0.1"}}, "10.0.0.1"},
		{"Forwarded: two fors in an element", [][2]string{{"Forwarded", "for=1.1.1.1;for=198.51.100.5"}}, "10.0.0.1"},
		{"Forwarded: unquoted IPv6 tolerated", [][2]string{{"Forwarded", "for=2001:db8::9"}}, "2001:db8::9"},
		{"Forwarded: IPv6 with a zone", [][2]string{{"Forwarded", `for="[fe80::1%eth0]:80"`}}, "fe80::1"},
		{"XFF before Forwarded", [][2]string{{"X-Forwarded-For", "198.51.100.1"}, {"Forwarded", "for=192.0.2.60"}}, "198.51.100.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.hdr {
				h.Add(kv[0], kv[1])
			}
			got := forwardedFor(h, peer, trusted)
			if addrString(got) != tt.want {
				t.Errorf("got %s, want %s", addrString(got), tt.want)
			}
		})
	}
	// Over the unix socket there is no peer address.
	if got := forwardedFor(http.Header{"Forwarded": {"for=_x"}}, netip.Addr{}, trusted); got.IsValid() {
		t.Errorf("unix socket, obfuscated: %s, want local", got)
	}
}

func FuzzForwarded(f *testing.F) {
	for _, s := range []string{"for=192.0.2.60;proto=http", `for="[2001:db8:cafe::17]:4711"`, `for=_x, for="a\"b`, ",,;;==", `for="`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		nodes := forwardedNodes(v)
		if len(nodes) > strings.Count(v, ",")+1 {
			t.Fatalf("%q: %d elements from %d commas", v, len(nodes), strings.Count(v, ","))
		}
		for _, n := range nodes {
			if a, ok := parseNode(n); ok && (!a.IsValid() || a.Zone() != "" || a.Is4In6()) {
				t.Fatalf("%q: node %q gave %v", v, n, a)
			}
		}
	})
}

// TestClientAddrBehindProxy: the address the limiter and the log use, end
// to end, over the unix socket and TCP, trusted and not.
func TestClientAddrBehindProxy(t *testing.T) {
	e := newEnv(t, envOpts{
		trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("127.0.0.3/32")},
		extraRoutes: func(s *Server) {
			s.handle("GET", "/addr", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
				return WriteJSON(w, map[string]string{"addr": addrString(s.clientAddr(r))})
			})
		},
	})
	auth := xhdr("admin", "admin-pass")
	addr := func(r reply) string {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("status %d %s", r.status, r.body)
		}
		s := string(r.body)
		i := strings.Index(s, `"addr":"`)
		return s[i+8 : strings.LastIndexByte(s, '"')]
	}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for k, v := range auth {
			h[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	tests := []struct {
		name string
		send func(hdr map[string]string) reply
		hdr  map[string]string
		want string
	}{
		{"TCP, untrusted peer: headers ignored", func(h map[string]string) reply { return e.reqFrom("127.0.0.1", "GET", "/api/addr", h, "") },
			with("X-Real-IP", "192.0.2.1", "X-Forwarded-For", "192.0.2.2", "Forwarded", "for=192.0.2.3"), "127.0.0.1"},
		{"TCP, trusted proxy: X-Real-IP", func(h map[string]string) reply { return e.reqFrom("127.0.0.2", "GET", "/api/addr", h, "") },
			with("X-Real-IP", "192.0.2.1"), "192.0.2.1"},
		{"TCP, trusted proxy chain: XFF", func(h map[string]string) reply { return e.reqFrom("127.0.0.3", "GET", "/api/addr", h, "") },
			with("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 127.0.0.2"), "198.51.100.7"},
		{"TCP, trusted proxy, nothing forwarded", func(h map[string]string) reply { return e.reqFrom("127.0.0.2", "GET", "/api/addr", h, "") },
			with(), "127.0.0.2"},
		{"unix: X-Real-IP", e.reqUnixFn("/api/addr"), with("X-Real-IP", "192.0.2.1"), "192.0.2.1"},
		{"unix: XFF rightmost", e.reqUnixFn("/api/addr"), with("X-Forwarded-For", "6.6.6.6, 198.51.100.7"), "198.51.100.7"},
		{"unix: Forwarded only", e.reqUnixFn("/api/addr"), with("Forwarded", `for="[2001:db8:cafe::17]:4711";proto=https`), "2001:db8:cafe::17"},
		{"unix: nothing forwarded", e.reqUnixFn("/api/addr"), with(), "local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := addr(tt.send(tt.hdr)); got != tt.want {
				t.Errorf("client address %s, want %s", got, tt.want)
			}
		})
	}
}

func (e *env) reqUnixFn(path string) func(map[string]string) reply {
	return func(h map[string]string) reply { return e.reqUnix("GET", path, h, "") }
}

// TestRotatingForwardedForIsBlocked: a client behind the proxy that sends
// a new X-Forwarded-For with every guess is still one address to the
// limiter, and is blocked after its free failures.
func TestRotatingForwardedForIsBlocked(t *testing.T) {
	e := newEnv(t, envOpts{limiterFreeFail: 3})
	for i := range 10 {
		hdr := xhdr("admin", "wrong")
		// What nginx sends: the client's header with its own address
		// ($remote_addr) appended.
		hdr["X-Forwarded-For"] = "203.0.113." + strconv.Itoa(i) + ", 198.51.100.77"
		r := e.reqUnix("GET", "/api/auth/check", hdr, "")
		want := 403 // the fourth failure sets the block
		if i >= 4 {
			want = 429
		}
		if r.status != want {
			t.Fatalf("guess %d: %d, want %d", i+1, r.status, want)
		}
	}
	// Another client of the same proxy is not blocked.
	hdr := xhdr("admin", "admin-pass")
	hdr["X-Forwarded-For"] = "198.51.100.78"
	if r := e.reqUnix("GET", "/api/auth/check", hdr, ""); r.status != 200 {
		t.Errorf("another client: %d, want 200", r.status)
	}
	// Forwarded only (a proxy that sends nothing else): each client is its
	// own address, not "local" for everyone.
	for i := range 4 {
		hdr := xhdr("admin", "wrong")
		hdr["Forwarded"] = "for=192.0.2.1"
		e.reqUnix("GET", "/api/auth/check", hdr, "")
		_ = i
	}
	hdr = xhdr("admin", "admin-pass")
	hdr["Forwarded"] = "for=192.0.2.2"
	if r := e.reqUnix("GET", "/api/auth/check", hdr, ""); r.status != 200 {
		t.Errorf("Forwarded: another client blocked with the guesser: %d, want 200", r.status)
	}
	if !strings.Contains(e.logs.String(), "addr=192.0.2.1") {
		t.Errorf("the log does not name the Forwarded client 192.0.2.1:\n%s", e.logs.String())
	}
}
