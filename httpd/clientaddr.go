package httpd

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// The client address is what rate limits, connection caps and logs use.
// A client must never choose its own: only a trusted proxy (a request
// over the unix socket, which only local processes reach, or from a
// Config.TrustedProxies network) may say whom it forwards, in this order:
//
//  1. X-Real-IP, which nginx sets to the address it saw (and which
//     replaces whatever the client sent under that name);
//  2. X-Forwarded-For, read from the right: each proxy appends the
//     address it saw, so the rightmost entry that is not itself a trusted
//     proxy is the client, and everything left of it is the client's own
//     writing;
//  3. RFC 7239 Forwarded, read the same way through its for= parameters.
//
// Walking right to left stops at an entry that is no address (garbage,
// "unknown" or an obfuscated identifier such as "_hidden"): the address
// is then the last trusted hop passed, or the peer itself.

// clientAddr returns the request's client address, worked out once for
// the request (ServeHTTP); the zero Addr is a local process on the unix
// socket that forwarded no address.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	if q := requestFrom(r.Context()); q != nil {
		return q.addr
	}
	return s.findClientAddr(r, connInfoFrom(r.Context()))
}

// findClientAddr works out r's client address; ci is its connection's
// (nil for a request that did not come through Serve), which knows its
// TCP peer and whether that is a trusted proxy.
func (s *Server) findClientAddr(r *http.Request, ci *connInfo) netip.Addr {
	var peer netip.Addr
	trusted := false
	switch {
	case ci != nil && ci.unix:
		trusted = true
	case ci != nil && ci.peer.IsValid():
		peer, trusted = ci.peer, ci.trusted
	default:
		var ok bool
		if peer, ok = remoteAddr(r); !ok {
			return netip.Addr{}
		}
		trusted = s.trustedProxy(peer)
	}
	if !trusted {
		return peer
	}
	return forwardedFor(r.Header, peer, s.trustedProxy)
}

// remoteAddr returns the address of r's TCP peer.
func remoteAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

// trustedProxy reports whether a is in one of the trusted networks.
func (s *Server) trustedProxy(a netip.Addr) bool {
	return slices.ContainsFunc(s.cfg.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// forwardedFor returns the client address a trusted proxy forwarded in h,
// or peer when it forwarded none.
func forwardedFor(h http.Header, peer netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	if v := h.Values(hdrRealIP); len(v) > 0 {
		// Several: the last is the one the nearest proxy set.
		if a, ok := parseNode(strings.TrimSpace(v[len(v)-1])); ok {
			return a
		}
	}
	if v := h.Values("X-Forwarded-For"); len(v) > 0 {
		var hops []string
		for _, line := range v {
			for hop := range strings.SplitSeq(line, ",") {
				hops = append(hops, strings.TrimSpace(hop))
			}
		}
		return rightmostUntrusted(hops, peer, trusted)
	}
	if v := h.Values("Forwarded"); len(v) > 0 {
		return rightmostUntrusted(forwardedNodes(strings.Join(v, ",")), peer, trusted)
	}
	return peer
}

// rightmostUntrusted walks hops (nearest last) back from the right.
func rightmostUntrusted(hops []string, peer netip.Addr, trusted func(netip.Addr) bool) netip.Addr {
	last := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			break
		}
		last = a
		if !trusted(a) {
			break
		}
	}
	return last
}

// parseNode reads one hop: an address, optionally with a port, IPv6 in
// brackets when it has one ("192.0.2.1", "192.0.2.1:4711",
// "[2001:db8::1]:4711", "2001:db8::1"). "unknown" and obfuscated
// identifiers are no address.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" || s[0] == '_' || strings.EqualFold(s, "unknown") {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	host := s
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
			return netip.Addr{}, false
		}
		host = s[1:end]
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.IndexByte(s[:i], ':') < 0 {
		host = s[:i] // IPv4 with a port
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// forwardedNodes returns the for= value of each element of an RFC 7239
// Forwarded header, in order; "" for an element without one. A malformed
// element gives "" (no address), so the walk from the right stops there.
func forwardedNodes(v string) []string { return forwardedParam(v, "for") }

// forwardedParam returns the value of parameter param (for, host, proto)
// in each element of an RFC 7239 Forwarded header, in order; "" for an
// element without one, or a malformed one. Elements are separated by
// commas, pairs by semicolons; a value is a token or a quoted string, and
// a comma or semicolon inside quotes separates nothing.
func forwardedParam(v, param string) []string {
	var nodes []string
	var cur string // this element's value of param
	bad := false
	i := 0
	for {
		// One pair: token "=" value.
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		start := i
		for i < len(v) && v[i] != '=' && v[i] != ';' && v[i] != ',' {
			i++
		}
		name := strings.TrimSpace(v[start:i])
		var value string
		if i < len(v) && v[i] == '=' {
			i++
			if i < len(v) && v[i] == '"' {
				var b strings.Builder
				i++
				closed := false
				for i < len(v) {
					c := v[i]
					i++
					if c == '\\' && i < len(v) {
						b.WriteByte(v[i])
						i++
						continue
					}
					if c == '"' {
						closed = true
						break
					}
					b.WriteByte(c)
				}
				if !closed {
					bad = true
				}
				value = b.String()
			} else {
				start := i
				for i < len(v) && v[i] != ';' && v[i] != ',' {
					i++
				}
				value = strings.TrimSpace(v[start:i])
			}
			for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
				i++
			}
		} else if name != "" {
			bad = true // a pair without "="
		}
		if strings.EqualFold(name, param) {
			if cur != "" {
				bad = true // the parameter twice in one element
			}
			cur = value
		}
		if i < len(v) && v[i] != ';' && v[i] != ',' {
			bad = true // something after a quoted string
			for i < len(v) && v[i] != ';' && v[i] != ',' {
				i++
			}
		}
		if i >= len(v) || v[i] == ',' {
			if bad {
				cur = ""
			}
			nodes = append(nodes, cur)
			cur, bad = "", false
			if i >= len(v) {
				return nodes
			}
		}
		i++ // past ';' or ','
	}
}
