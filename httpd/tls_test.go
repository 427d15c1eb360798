package httpd

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	cert := testutil.SelfSigned(t)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	return cert, pool
}

// tlsEnv is env's server also served, through a second Serve, with TLS on
// a TCP port and (never TLS) on a unix socket.
type tlsEnv struct {
	*env
	addr   string // host:port of the TLS listener
	sock   string
	client *tls.Config
}

func newTLSEnv(t *testing.T, o envOpts) *tlsEnv {
	e := newEnv(t, o)
	cert, pool := selfSigned(t)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.dir, "tls-serve.sock")
	unixLn, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, e.srv, []net.Listener{tcp, unixLn}, &tls.Config{Certificates: []tls.Certificate{cert}})
	return &tlsEnv{env: e, addr: tcp.Addr().String(), sock: sock,
		client: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
}

func (te *tlsEnv) do(method, path string, hdr map[string]string, body string) reply {
	te.t.Helper()
	tr := &http.Transport{TLSClientConfig: te.client.Clone()}
	return te.reqWith(tr, "https://"+te.addr, method, path, hdr, body)
}

func (te *tlsEnv) dialTLS(t *testing.T) net.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", te.addr, te.client)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLS(t *testing.T) {
	te := newTLSEnv(t, envOpts{headerTimeout: 500 * time.Millisecond, lifetime: time.Hour})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	t.Run("login sets a Secure cookie", func(t *testing.T) {
		r := te.do("POST", "/api/auth/login", form, "user=admin&passwd=admin-pass")
		if r.status != 200 {
			t.Fatalf("login over TLS: %d %s", r.status, r.body)
		}
		cs := (&http.Response{Header: r.header}).Cookies()
		if len(cs) != 1 {
			t.Fatalf("cookies %q", r.header.Values("Set-Cookie"))
		}
		c := cs[0]
		if c.Name != "auth_token" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 3600 {
			t.Errorf("Set-Cookie %q: want auth_token; Path=/; Max-Age=3600; HttpOnly; Secure; SameSite=Strict", r.header.Get("Set-Cookie"))
		}
		ck := map[string]string{"Cookie": "auth_token=" + c.Value}
		r = te.do("GET", "/api/auth/check", ck, "")
		if r.status != 200 {
			t.Errorf("session over TLS: %d", r.status)
		}
		// The security headers, spliced in below TLS (secheaders.go).
		if _, err := checkEnvelope(r.status, r.header, r.body); err != nil {
			t.Errorf("check over TLS: %v", err)
		}
		r = te.do("POST", "/api/auth/logout", ck, "")
		if sc := r.header.Get("Set-Cookie"); r.status != 200 || !strings.Contains(sc, "Secure") || !strings.Contains(sc, "Max-Age=0") {
			t.Errorf("logout over TLS: %d, Set-Cookie %q; want 200 and a Secure clearing cookie", r.status, sc)
		}
		// The same server over plain HTTP does not mark its cookie Secure.
		r = te.req("POST", "/api/auth/login", form, "user=admin&passwd=admin-pass")
		if sc := r.header.Get("Set-Cookie"); r.status != 200 || strings.Contains(sc, "Secure") {
			t.Errorf("login over plain HTTP: %d, Set-Cookie %q", r.status, sc)
		}
	})

	t.Run("10 MB of headers", func(t *testing.T) {
		payload := []byte("GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nX-Big: " + strings.Repeat("a", 10<<20) + "\r\n\r\n")
		r, err := exchange(te.dialTLS(t), payload, 10*time.Second)
		expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
	})

	t.Run("malformed request", func(t *testing.T) {
		r, err := exchange(te.dialTLS(t), []byte("GARBAGE\r\n\r\n"), 5*time.Second)
		expect(t, r, err, http.StatusBadRequest, "BadRequestError")
	})

	t.Run("plain HTTP to the TLS port", func(t *testing.T) {
		c, err := net.Dial("tcp", te.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.SetDeadline(start.Add(3 * time.Second))
		io.WriteString(c, "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\n"+adminLines+"\r\n\r\n")
		b, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("not closed: %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("closed after %v", d)
		}
		if bytes.Contains(b, []byte("HTTP/1.1 200")) || bytes.Contains(b, []byte("ok\":true")) {
			t.Errorf("plain HTTP served on the TLS port: %q", b)
		}
	})

	t.Run("silent client", func(t *testing.T) {
		c, err := net.Dial("tcp", te.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		c.SetDeadline(start.Add(3 * time.Second))
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a client that never says hello is not cut: %v", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("cut after %v, want about the 500 ms header timeout", d)
		}
	})

	t.Run("slow headers after the handshake", func(t *testing.T) {
		c := te.dialTLS(t)
		defer c.Close()
		stop := make(chan struct{})
		done := make(chan struct{})
		defer func() { close(stop); <-done }()
		start := time.Now()
		go func() {
			defer close(done)
			slowWriter(c, "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nX-Slow: "+strings.Repeat("s", 50), 100*time.Millisecond, stop)
		}()
		c.SetReadDeadline(start.Add(3 * time.Second))
		if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, os.ErrClosed) {
			t.Fatalf("not cut: %v", err)
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("cut after %v", d)
		}
	})

	t.Run("unix socket stays plain", func(t *testing.T) {
		c, err := net.Dial("unix", te.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		io.WriteString(c, rawRequest("GET", "/api/auth/check", []string{adminLines}, ""))
		r, err := readEnvelope(bufio.NewReader(c))
		expect(t, r, err, 200, "")
	})

	if r := te.do("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("TLS after all that: %d", r.status)
	}
}
