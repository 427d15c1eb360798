package httpd

import (
	"bufio"
	"kvmd/auth"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// dialFrom opens a TCP connection to the env from a loopback source.
func (e *env) dialFrom(t *testing.T, src string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", e.tcpAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedSoon reports whether the server closes c within d, having sent
// nothing.
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// checkFrom sends a real authenticated request from src and returns how
// long it took, failing on anything but 200.
func (e *env) checkFrom(t *testing.T, src string) time.Duration {
	t.Helper()
	start := time.Now()
	if r := e.reqFrom(src, "GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Fatalf("check from %s: %d", src, r.status)
	}
	return time.Since(start)
}

func TestConnectionCaps(t *testing.T) {
	t.Run("per address", func(t *testing.T) {
		e := newEnv(t, envOpts{maxConns: 100, maxConnsPerAddr: 5,
			trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}})
		e.checkFrom(t, "127.0.0.1") // the password is cached from here on
		var held []net.Conn
		for range 5 {
			held = append(held, e.dialFrom(t, "127.0.0.2"))
		}
		extra := e.dialFrom(t, "127.0.0.2")
		if !closedSoon(extra, time.Second) {
			t.Error("a sixth connection from one address stays open")
		}
		for _, c := range held {
			if closedSoon(c, 10*time.Millisecond) {
				t.Error("a connection within the cap was closed")
			}
		}
		if d := e.checkFrom(t, "127.0.0.4"); d > 3*time.Second {
			t.Errorf("another address waited %v", d)
		}
		// A trusted proxy carries many clients: not capped per address.
		for range 8 {
			held = append(held, e.dialFrom(t, "127.0.0.3"))
		}
		if d := e.checkFrom(t, "127.0.0.3"); d > time.Second {
			t.Errorf("the trusted proxy's ninth connection waited %v", d)
		}
		// Closing gives the slot back.
		held[0].Close()
		eventually(t, "a slot freed by a close", func() bool {
			c := e.dialFrom(t, "127.0.0.2")
			defer c.Close()
			return !closedSoon(c, 50*time.Millisecond)
		})
	})

	t.Run("slow clients make way", func(t *testing.T) {
		e := newEnv(t, envOpts{maxConns: 30, maxConnsPerAddr: 10})
		e.checkFrom(t, "127.0.0.1")
		// 30 connections from three addresses that send half a request
		// and then nothing (slowloris), filling the table.
		var slow []net.Conn
		for i := range 30 {
			c := e.dialFrom(t, []string{"127.0.1.1", "127.0.1.2", "127.0.1.3"}[i%3])
			c.Write([]byte("GET /api/auth/check HTTP/1.1\r\nHost: x\r\n"))
			slow = append(slow, c)
		}
		time.Sleep(50 * time.Millisecond)
		// Normal requests still get through, quickly, each taking the
		// place of the slow connection that waited longest.
		for i := range 5 {
			if d := e.checkFrom(t, "127.0.2.1"); d > time.Second {
				t.Errorf("request %d under the slow flood took %v", i, d)
			}
		}
		open, _, evicted := e.srv.conns.counts()
		if open > 30 {
			t.Errorf("%d connections open, cap 30", open)
		}
		// Each normal connection closes after its request: one eviction
		// makes room for all five.
		if evicted < 1 {
			t.Errorf("%d slow connections evicted, want at least 1", evicted)
		}
		if !closedSoon(slow[0], time.Second) {
			t.Error("the oldest slow connection is still open")
		}
	})

	t.Run("all busy: the new one is refused at once", func(t *testing.T) {
		release := make(chan struct{})
		var started sync.WaitGroup
		e := newEnv(t, envOpts{maxConns: 4, maxConnsPerAddr: 10, extraRoutes: func(s *Server) {
			s.handle("GET", "/hold", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
				started.Done()
				<-release
				return WriteJSON(w, nil)
			})
		}})
		defer close(release)
		started.Add(4)
		for range 4 {
			c := e.dialFrom(t, "127.0.0.1")
			c.Write([]byte("GET /api/hold HTTP/1.1\r\nHost: x\r\nX-KVMD-User: admin\r\nX-KVMD-Passwd: admin-pass\r\n\r\n"))
		}
		started.Wait()
		start := time.Now()
		c := e.dialFrom(t, "127.0.0.5")
		c.Write([]byte("GET /api/auth/check HTTP/1.1\r\nHost: x\r\n\r\n"))
		if !closedSoon(c, time.Second) {
			t.Error("a connection over the cap, every other busy, stays open")
		}
		// Quick, not at a timeout (the header timeout is far longer); the
		// bound leaves room for a loaded test machine.
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("refusing took %v", d)
		}
		_, refused, _ := e.srv.conns.counts()
		if refused == 0 {
			t.Error("no refusal counted")
		}
	})

	t.Run("keep-alive connections are reused", func(t *testing.T) {
		e := newEnv(t, envOpts{maxConns: 3, maxConnsPerAddr: 3})
		c := e.dialFrom(t, "127.0.0.1")
		br := bufio.NewReader(c)
		for i := range 5 {
			c.Write([]byte("GET /api/auth/check HTTP/1.1\r\nHost: x\r\nX-KVMD-User: admin\r\nX-KVMD-Passwd: admin-pass\r\n\r\n"))
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("request %d on one connection: %v %v", i, err, resp)
			}
			resp.Body.Close()
		}
		if open, _, _ := e.srv.conns.counts(); open != 1 {
			t.Errorf("%d connections counted, want 1", open)
		}
	})
}

// TestConnectionCapDefaults: a server with the default caps refuses a
// connection from one address beyond DefaultMaxConnsPerAddr.
func TestConnectionCapDefaults(t *testing.T) {
	s, err := New(Config{ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUntilCleanup(t, s, []net.Listener{ln}, nil)
	e := &env{t: t, base: "http://" + ln.Addr().String()}
	for range 64 { // DefaultMaxConnsPerAddr
		if c := e.dialFrom(t, "127.0.0.9"); closedSoon(c, time.Millisecond) {
			t.Fatal("a connection within the default cap was closed")
		}
	}
	if c := e.dialFrom(t, "127.0.0.9"); !closedSoon(c, time.Second) {
		t.Error("connection 65 from one address stays open")
	}
}
