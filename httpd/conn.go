package httpd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
)

// connInfo is what the server knows of a connection beyond its address.
type connInfo struct {
	conn *conn
	unix bool
	// peer is the TCP peer's address (peerText as the log shows it) and
	// trusted whether it is in Config.TrustedProxies, found once for the
	// connection (the zero Addr over the unix socket).
	peer     netip.Addr
	peerText string
	trusted  bool
	secure   bool
	peerOK   bool   // the unix-socket peer may act without a password
	peerName string // as whom
}

type connInfoKey struct{}

func connInfoFrom(ctx context.Context) *connInfo {
	ci, _ := ctx.Value(connInfoKey{}).(*connInfo)
	return ci
}

// conn is every connection the server reads: it carries connInfo, and it
// turns the plain-text error replies net/http writes by itself (before any
// handler runs: headers too large, malformed request line) into the JSON
// envelope, so that every answer a client gets is one kvmd clients parse.
type conn struct {
	net.Conn
	info connInfo
	slot connSlot
	// fresh: Serve's list of connections without a whole request yet
	// has this one.
	fresh atomic.Bool
}

// Close gives the connection's place in the connTable back.
func (c *conn) Close() error {
	c.release()
	return c.Conn.Close()
}

// CloseWrite lets net/http half-close the connection as it does for TCP.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// stdErrorHeaders follow the status line of every reply net/http writes by
// itself. A handler's reply can never start this way: net/http sorts
// headers, so the security headers' mark (or, in its place, Cache-Control)
// would come first, and adds Date.
const stdErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// expectFailed follows the version in net/http's 417; a handler's reply has
// the mark or Cache-Control, which sort before Connection.
const expectFailed = "417 Expectation Failed\r\nConnection: close\r\n"

func (c *conn) Write(p []byte) (int, error) {
	if i := markAt(p); i >= 0 {
		return c.writeSpliced(p, i) // secheaders.go
	}
	if status, msg, ok := stdError(p); ok {
		if _, err := c.Conn.Write(jsonErrorReply(status, msg)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// stdError recognizes a reply written by net/http itself and returns its
// status and text.
func stdError(p []byte) (status int, msg string, ok bool) {
	const proto = "HTTP/1.1 "
	// Its reply to an Expect other than 100-continue goes through the
	// response writer, but before the handler: no security headers.
	if (bytes.HasPrefix(p, []byte(proto)) || bytes.HasPrefix(p, []byte("HTTP/1.0 "))) &&
		bytes.HasPrefix(p[len(proto):], []byte(expectFailed)) {
		return http.StatusExpectationFailed, "unsupported Expect header", true
	}
	if len(p) < len(proto)+3 || string(p[:len(proto)]) != proto {
		return 0, "", false
	}
	// The headers follow the status line at once: they start at its
	// "\r\n", the first line end (a handler's reply, however long its
	// body, is not searched through).
	i := bytes.IndexByte(p, '\n') - 1
	if i < 0 || !bytes.HasPrefix(p[i:], []byte(stdErrorHeaders)) {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(p[len(proto) : len(proto)+3]))
	if err != nil {
		return 0, "", false
	}
	return status, string(p[i+len(stdErrorHeaders):]), true
}

func jsonErrorReply(status int, msg string) []byte {
	// Whatever net/http answers (400, 417, 501, 505), the client sent
	// something malformed: a 5xx would blame the server.
	e := &Error{Status: http.StatusBadRequest, Name: "BadRequestError", Msg: "Malformed request: " + msg}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		e = &Error{Status: http.StatusRequestEntityTooLarge, Name: "RequestTooLargeError", Msg: "Request headers are too large"}
	}
	body := errorBody(e)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", e.Status, http.StatusText(e.Status))
	b.WriteString("Content-Type: application/json\r\nConnection: close\r\n")
	for k, v := range securityHeaders {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v[0])
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	return b.Bytes()
}

// listener makes conns: TLS is done here rather than by net/http, so that
// the reply rewriting above sees the plain text.
type listener struct {
	net.Listener
	tls   *tls.Config
	unix  bool
	peer  func(uid, gid uint32) (string, bool)
	table *connTable
	// trusted tells an address of Config.TrustedProxies.
	trusted func(netip.Addr) bool
}

func (l *listener) Accept() (net.Conn, error) {
	var c net.Conn
	kc := &conn{}
	for {
		var err error
		c, err = l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.table.admit(kc, c, l.unix) {
			break
		}
		c.Close() // over a cap: closed at once, nothing read
		kc = &conn{}
	}
	kc.Conn, kc.info = c, connInfo{conn: kc, unix: l.unix}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && !l.unix {
		kc.info.peer = ta.AddrPort().Addr().Unmap().WithZone("")
		kc.info.peerText = addrString(kc.info.peer)
		kc.info.trusted = l.trusted(kc.info.peer)
	}
	if l.unix && l.peer != nil {
		if uid, gid, ok := peerCred(c); ok {
			kc.info.peerName, kc.info.peerOK = l.peer(uid, gid)
		}
	}
	if l.tls != nil {
		kc.Conn = tls.Server(c, l.tls)
		kc.info.secure = true
	}
	return kc, nil
}

// aeadSuites are the TLS 1.2 suites offered: forward secret (ECDHE) and
// authenticated encryption only (AES-GCM, ChaCha20-Poly1305). Go's default
// list adds CBC suites, which have no place on a new server (Mozilla's
// "intermediate" profile has none either). TLS 1.3 suites are all AEAD and
// are not configurable.
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// Serve serves the listeners until ctx ends, then shuts down gracefully:
// Done is closed so that streams end, requests in flight get
// ShutdownTimeout to finish. TCP listeners use TLS when tlsConf is set;
// unix sockets never do. ready, when not nil, is called once every
// listener is being served.
func (s *Server) Serve(ctx context.Context, lns []net.Listener, tlsConf *tls.Config) error {
	if tlsConf != nil {
		tlsConf = tlsConf.Clone()
		tlsConf.NextProtos = []string{"http/1.1"}
		if tlsConf.MinVersion == 0 {
			tlsConf.MinVersion = tls.VersionTLS12
		}
		if tlsConf.CipherSuites == nil {
			tlsConf.CipherSuites = aeadSuites
		}
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    32 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if kc, ok := c.(*conn); ok {
				return context.WithValue(ctx, connInfoKey{}, &kc.info)
			}
			return ctx
		},
	}
	// Connections that have not sent a whole request yet (browsers open
	// some ahead of need) would hold Shutdown for 5 s, after which net/http
	// takes them for idle: close them as soon as the listeners are.
	// The map is touched twice in a connection's life, not on each of
	// its requests' state changes (active, idle): conn.fresh says whether
	// it is in there.
	var mu sync.Mutex
	fresh := map[net.Conn]bool{}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		kc, ok := c.(*conn)
		if ok && st != http.StateNew && !kc.fresh.Load() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if st == http.StateNew {
			fresh[c] = true
		} else {
			delete(fresh, c)
		}
		if ok {
			kc.fresh.Store(st == http.StateNew)
		}
	}
	srv.RegisterOnShutdown(func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range fresh {
			c.Close()
		}
	})
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		l := &listener{Listener: ln, peer: s.cfg.PeerAuth, table: s.conns, trusted: s.trustedProxy}
		if ln.Addr().Network() == "unix" {
			l.unix = true
		} else {
			l.tls = tlsConf
		}
		go func() { errc <- srv.Serve(l) }()
	}

	var err error
	pending := len(lns)
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
	}
	s.shutdown(srv)
	for range pending {
		<-errc
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) shutdown(srv *http.Server) {
	s.doneOnce.Do(func() { close(s.done) })
	s.cancelBase()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		s.cfg.Log.Warn("requests still running at shutdown were cut", "err", err)
		srv.Close()
	}
}
