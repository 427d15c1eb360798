package httpd

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sendHead opens a connection and sends a request's line and headers,
// announcing a body of size bytes, and none of the body.
func sendHead(t *testing.T, e *env, method, path string, hdr map[string]string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: kvmd\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n", method, path, size)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the reply on c, which must come within 3 s.
func answer(t *testing.T, c net.Conn) (reply, *http.Response) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	return parseReply(t, resp), resp
}

// TestBodyNotReadBeforeAuth: a request that is not let in is answered
// from its headers, its body never read (none is sent here: the answer
// comes all the same), and its connection closed; one let in has its
// body read. Before the fix every body was read whole first, under the
// body timeout, and 240 unauthenticated 1 MiB prints held 240 MiB.
func TestBodyNotReadBeforeAuth(t *testing.T) {
	e := newHIDEnv(t)
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"no credentials", nil, 401},
		{"a wrong password", map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "wrong"}, 403},
		{"a viewer on an operator's route", viewerAuth, 403},
		{"a malformed cookie", map[string]string{"Cookie": "auth_token=zz"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sendHead(t, e.env, "POST", "/api/hid/print", tc.hdr, mib)
			r, resp := answer(t, c)
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
			if !resp.Close {
				t.Errorf("the connection stays open: its unread body would be drained")
			}
		})
	}
	// A query refused after the credentials: the body is not read either.
	c := sendHead(t, e.env, "POST", "/api/hid/print?slow=%zz", operatorAuth, mib)
	if r, _ := answer(t, c); r.status != 400 {
		t.Errorf("a bad query: %d %s", r.status, r.body)
	}
	if e.srv.bodies.peak != 0 {
		t.Errorf("bodies held for refused requests: %d bytes at most", e.srv.bodies.peak)
	}
	// Let in: the body is read, and typed.
	if r := e.req("POST", "/api/hid/print", operatorAuth, "ab"); r.status != 200 {
		t.Fatalf("the operator's print: %d %s", r.status, r.body)
	}
	if got := e.keys(); got != "[KeyA] [] [KeyB] []" {
		t.Errorf("typed: %s", got)
	}
	// The public login keeps its small limit, and works.
	if r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		"user=admin&passwd=admin-pass&x="+strings.Repeat("a", 5000)); r.status != 413 {
		t.Errorf("a login of 5 KB: %d", r.status)
	}
	if r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		"user=admin&passwd=admin-pass"); r.status != 200 {
		t.Errorf("a login: %d %s", r.status, r.body)
	}
}

// TestBodiesBudget: the bytes held in large bodies at once are bounded
// (Config.MaxBodies): users below admin get three quarters of it, and a
// body beyond is refused with a 503 in the envelope before any of it is
// read; an admin still has the rest; the budget comes back when the
// requests end.
func TestBodiesBudget(t *testing.T) {
	const mib = 1 << 20
	h, _ := testHID(t)
	d, _ := testDevices(t)
	d.HID = h
	e := newEnv(t, envOpts{devices: d, maxBodies: 3 * mib})
	// Two operators' prints being sent, slowly: 2 MiB of the 2.25 open
	// to them.
	var slow []net.Conn
	for range 2 {
		c := sendHead(t, e, "POST", "/api/hid/print", operatorAuth, mib)
		c.Write([]byte("ab"))
		slow = append(slow, c)
	}
	eventually(t, "2 MiB held", heldIs(e, 2*mib))
	c := sendHead(t, e, "POST", "/api/hid/print", operatorAuth, mib/2)
	r, resp := answer(t, c)
	if r.status != 503 || r.errName != "UnavailableError" || resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Errorf("a third operator's print: %d %s %v", r.status, r.body, resp.Header)
	}
	// A small body is not held back by the large ones.
	if r := e.req("POST", "/api/hid/print", operatorAuth, "c"); r.status != 200 {
		t.Errorf("a small print: %d %s", r.status, r.body)
	}
	// The admin's quarter.
	c = sendHead(t, e, "POST", "/api/hid/print", adminHdr, mib)
	c.Write([]byte("ab"))
	eventually(t, "3 MiB held", heldIs(e, 3*mib))
	c.Close()
	for _, c := range slow {
		c.Close()
	}
	eventually(t, "none held", heldIs(e, 0))
	if e.srv.bodies.peak > 3*mib {
		t.Errorf("held %d bytes at most, over the budget", e.srv.bodies.peak)
	}
}

// heldIs tells whether the server holds n bytes in large bodies.
func heldIs(e *env, n int64) func() bool {
	return func() bool {
		e.srv.bodies.mu.Lock()
		defer e.srv.bodies.mu.Unlock()
		return e.srv.bodies.held == n
	}
}
