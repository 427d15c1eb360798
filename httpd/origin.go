package httpd

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// sameOrigin reports whether origin, the Origin header of a WebSocket
// handshake, is a page of this device: its host and port are those the
// browser addressed the request to. A browser sends the cookie with a
// handshake from any site, and a page cannot set the headers read here
// (Host, X-Forwarded-*, Forwarded) on one, so this is what keeps another
// site's page out (the WebSocket form of cross-site request forgery).
//
// Without a proxy the address is the Host header. A reverse proxy may
// rewrite Host: PiKVM's nginx sends $host, without the port
// (configs/nginx/loc-proxy.conf), and says the port in X-Forwarded-Port
// instead; other proxies pass the browser's host on in X-Forwarded-Host or
// RFC 7239 Forwarded's host=. Those are believed only from a trusted proxy
// (the unix socket, or Config.TrustedProxies), as the client address is
// (clientaddr.go); from a trusted proxy the origin may match any of them.
//
// A host without a port, and no X-Forwarded-Port, was addressed on its
// scheme's default port, which the browser leaves out of Host: it matches
// an origin on its own scheme's default port (https://kvm.example and
// Host kvm.example), and only that.
func (s *Server) sameOrigin(r *http.Request, origin string) bool {
	o, err := url.Parse(origin)
	if err != nil || (o.Scheme != "http" && o.Scheme != "https") || o.Hostname() == "" || o.User != nil {
		return false // "null" (an opaque origin), or not an origin at all
	}
	def := defaultPort(o.Scheme)
	oport := o.Port()
	if oport == "" {
		oport = def
	}
	hosts := []string{r.Host}
	var fwdPort string
	if s.viaTrustedProxy(r) {
		hosts = append(hosts, headerList(r.Header, "X-Forwarded-Host")...)
		if v := r.Header.Values("Forwarded"); len(v) > 0 {
			hosts = append(hosts, forwardedParam(strings.Join(v, ","), "host")...)
		}
		// The first proxy's: the port the browser connected to.
		if p := headerList(r.Header, "X-Forwarded-Port"); len(p) > 0 && validPort(p[0]) {
			fwdPort = p[0]
		}
	}
	for _, h := range hosts {
		u := url.URL{Host: h}
		name, port := u.Hostname(), u.Port()
		if name == "" || !strings.EqualFold(name, o.Hostname()) || (port != "" && !validPort(port)) {
			continue
		}
		if port == "" {
			port = fwdPort
		}
		if port == oport || (port == "" && oport == def) {
			return true
		}
	}
	return false
}

// viaTrustedProxy reports whether r came from a trusted proxy: over the
// unix socket, or from a TCP peer in Config.TrustedProxies.
func (s *Server) viaTrustedProxy(r *http.Request) bool {
	if ci := connInfoFrom(r.Context()); ci != nil && ci.unix {
		return true
	}
	peer, ok := remoteAddr(r)
	return ok && s.trustedProxy(peer)
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536 && p[0] != '0' && p[0] != '+'
}

// headerList returns the comma-separated elements of every name header,
// in order, blanks trimmed and empty ones left out.
func headerList(h http.Header, name string) []string {
	var out []string
	for _, line := range h.Values(name) {
		for e := range strings.SplitSeq(line, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}
