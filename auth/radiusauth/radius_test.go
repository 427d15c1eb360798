package radiusauth_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"kvmd/auth/backend"
	"kvmd/auth/radiusauth"
	"kvmd/auth/radiusauth/radiustest"
)

const (
	alicePass = "wonderland"
	// odd exercises the users file's quoting and PAP's 16-byte blocks.
	oddUser = `dr. "who"`
	oddPass = `tardis \ "blue" box 1963-11-23!`
)

func newBackend(t *testing.T, cfg radiusauth.Config) *radiusauth.Backend {
	t.Helper()
	b, err := radiusauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkErr fails t unless err is nil (want nil) or wraps want, and
// makes sure no error shows the password.
func checkErr(t *testing.T, err, want error, passwd string) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("Verify: %v, want nil", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("Verify: %v, want an error wrapping %q", err, want)
	}
	if err != nil && passwd != "" && strings.Contains(err.Error(), passwd) {
		t.Fatalf("Verify: the error %q shows the password", err)
	}
}

// TestFreeRADIUS asks a real FreeRADIUS (Debian 12's 3.2.1), configured
// with require_message_authenticator = yes, so every answered request
// also proves the Message-Authenticator right.
func TestFreeRADIUS(t *testing.T) {
	srv := radiustest.Start(t, radiustest.Config{Users: map[string]string{
		"alice": alicePass,
		oddUser: oddPass,
	}})
	b := newBackend(t, radiusauth.Config{Server: srv.Addr, Secret: []byte(srv.Secret), Timeout: 2 * time.Second, Retries: 1})

	for _, tc := range []struct {
		name, user, passwd string
		want               error
	}{
		{"ok", "alice", alicePass, nil},
		{"quoted user, long password", oddUser, oddPass, nil},
		{"wrong password", "alice", "wonderlant", backend.ErrRejected},
		{"password prefix", "alice", "wonder", backend.ErrRejected},
		{"unknown user", "bob", alicePass, backend.ErrRejected},
		{"user name case", "Alice", alicePass, backend.ErrRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := b.Verify(context.Background(), tc.user, tc.passwd)
			checkErr(t, err, tc.want, tc.passwd)
			if d := time.Since(start); d > time.Second {
				t.Errorf("Verify took %v; the server answers at once (reject_delay = 0)", d)
			}
		})
	}

	t.Run("wrong secret", func(t *testing.T) {
		// FreeRADIUS checks the Message-Authenticator first and drops
		// the request silently ("invalid Message-Authenticator! (Shared
		// secret is incorrect.)"), so the client hears nothing and
		// gives up when the time is up.
		const timeout = 600 * time.Millisecond
		b := newBackend(t, radiusauth.Config{Server: srv.Addr, Secret: []byte("not-" + srv.Secret), Timeout: timeout, Retries: 1})
		start := time.Now()
		err := b.Verify(context.Background(), "alice", alicePass)
		elapsed := time.Since(start)
		checkErr(t, err, backend.ErrUnavailable, alicePass)
		if elapsed < timeout-50*time.Millisecond || elapsed > timeout+time.Second {
			t.Errorf("Verify took %v, want about %v", elapsed, timeout)
		}
		waitFor(t, func() bool { return strings.Contains(srv.Log(), "Shared secret is incorrect") },
			"the server log to show the dropped request")
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 40 {
			wg.Go(func() {
				user, passwd, want := "alice", alicePass, error(nil)
				switch i % 3 {
				case 1:
					passwd, want = "wrong", backend.ErrRejected
				case 2:
					user, passwd = oddUser, oddPass
				}
				err := b.Verify(context.Background(), user, passwd)
				if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
					errs <- fmt.Errorf("Verify #%d (%s): %v, want %v", i, user, err, want)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// waitFor waits up to two seconds for cond.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sink is a UDP socket that reads and never answers, keeping what it got.
type sink struct {
	conn net.PacketConn
	mu   sync.Mutex
	got  [][]byte
	at   []time.Time
}

func newSink(t *testing.T) *sink {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{conn: c}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.got = append(s.got, bytes.Clone(buf[:n]))
			s.at = append(s.at, time.Now())
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return s
}

func (s *sink) addr() string { return s.conn.LocalAddr().String() }

func (s *sink) packets() ([][]byte, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.got...), append([]time.Time(nil), s.at...)
}

func TestNoRequest(t *testing.T) {
	s := newSink(t)
	b := newBackend(t, radiusauth.Config{Server: s.addr(), Secret: []byte("s3cret"), Timeout: time.Second})
	for _, tc := range []struct{ name, user, passwd string }{
		{"empty password", "alice", ""},
		{"empty user", "", "pw"},
		{"user with newline", "alice\nroot", "pw"},
		{"user with escape", "alice\x1b[2J", "pw"},
		{"user with DEL", "alice\x7f", "pw"},
		{"user with C1 control", "alice\u0085", "pw"},
		{"user not UTF-8", "alice\xff", "pw"},
		{"long user", strings.Repeat("a", 254), "pw"},
		{"long password", "alice", strings.Repeat("p", 129)},
		{"password with NUL", "alice", "wonderland\x00junk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := b.Verify(context.Background(), tc.user, tc.passwd)
			checkErr(t, err, backend.ErrRejected, tc.passwd)
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("Verify took %v", d)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if got, _ := s.packets(); len(got) != 0 {
		t.Errorf("the server got %d packets, want none", len(got))
	}
}

func TestServerDown(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	c.Close()
	const timeout = time.Second
	b := newBackend(t, radiusauth.Config{Server: addr, Secret: []byte("s3cret"), Timeout: timeout, Retries: 2})
	start := time.Now()
	err = b.Verify(context.Background(), "alice", alicePass)
	elapsed := time.Since(start)
	checkErr(t, err, backend.ErrUnavailable, alicePass)
	// On loopback the kernel answers with ICMP port unreachable, which
	// ends the wait early; elsewhere it would be the deadline.
	if elapsed > timeout+time.Second {
		t.Errorf("Verify took %v, want at most %v", elapsed, timeout)
	}
	t.Logf("after %v: %v", elapsed, err)
}

func TestSlowServer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		ctx      time.Duration // 0: no context deadline
		retries  int
		wantTime time.Duration
	}{
		{"timeout, no retries", 500 * time.Millisecond, 0, 0, 500 * time.Millisecond},
		{"timeout, 3 retries", time.Second, 0, 3, time.Second},
		{"context deadline first", 5 * time.Second, 800 * time.Millisecond, 2, 800 * time.Millisecond},
	} {
		// Not parallel: the sends are timed, and the machine may be busy
		// enough already (go test runs packages side by side).
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t)
			b := newBackend(t, radiusauth.Config{Server: s.addr(), Secret: []byte("s3cret"), Timeout: tc.timeout, Retries: tc.retries})
			ctx := context.Background()
			if tc.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctx)
				defer cancel()
			}
			start := time.Now()
			err := b.Verify(ctx, "alice", alicePass)
			elapsed := time.Since(start)
			checkErr(t, err, backend.ErrUnavailable, alicePass)
			if elapsed < tc.wantTime-20*time.Millisecond || elapsed >= tc.wantTime+time.Second {
				t.Errorf("Verify took %v, want %v", elapsed, tc.wantTime)
			}
			time.Sleep(50 * time.Millisecond) // let the sink read the last datagram
			got, at := s.packets()
			if len(got) != tc.retries+1 {
				t.Fatalf("the server got %d requests, want %d (1 + %d retransmissions)", len(got), tc.retries+1, tc.retries)
			}
			slot := tc.wantTime / time.Duration(tc.retries+1)
			for i := range got {
				if !bytes.Equal(got[i], got[0]) {
					t.Errorf("retransmission %d differs from the request: %x, want %x", i, got[i], got[0])
				}
				if d := at[i].Sub(start); d < slot*time.Duration(i)-20*time.Millisecond || d > slot*time.Duration(i)+500*time.Millisecond {
					t.Errorf("request %d sent after %v, want %v", i, d, slot*time.Duration(i))
				}
			}
			if want := fmt.Sprintf("%d requests sent", tc.retries+1); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	s := newSink(t)
	b := newBackend(t, radiusauth.Config{Server: s.addr(), Secret: []byte("s3cret"), Timeout: 5 * time.Second, Retries: 2})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err := b.Verify(ctx, "alice", alicePass)
	checkErr(t, err, backend.ErrUnavailable, alicePass)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Verify: %v, want it to wrap context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Verify took %v after a cancel at 200ms", d)
	}
}

// fakeServer answers each Access-Request with what reply makes of it,
// after checking the request's Message-Authenticator and password
// hiding with secret.
func fakeServer(t *testing.T, secret string, reply func(req *radius.Packet) [][]byte) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			wire := bytes.Clone(buf[:n])
			req, err := radius.Parse(wire, []byte(secret))
			if err != nil {
				t.Errorf("fake server: %v", err)
				continue
			}
			if err := checkRequest(wire, req, secret); err != nil {
				t.Errorf("fake server: %v", err)
				continue
			}
			for _, out := range reply(req) {
				c.WriteTo(out, from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}

// checkRequest checks what a RADIUS server would: Message-Authenticator
// first and right, the attributes, and the hidden password.
func checkRequest(wire []byte, req *radius.Packet, secret string) error {
	if req.Code != radius.CodeAccessRequest {
		return fmt.Errorf("code %v", req.Code)
	}
	if len(req.Attributes) == 0 || req.Attributes[0].Type != rfc2869.MessageAuthenticator_Type {
		return errors.New("Message-Authenticator is not the first attribute")
	}
	c := bytes.Clone(wire)
	clear(c[22:38])
	mac := hmac.New(md5.New, []byte(secret))
	mac.Write(c)
	if !hmac.Equal(mac.Sum(nil), wire[22:38]) {
		return errors.New("bad Message-Authenticator")
	}
	if got := rfc2865.UserName_GetString(req); got != "alice" {
		return fmt.Errorf("User-Name %q", got)
	}
	if got := rfc2865.UserPassword_GetString(req); got != alicePass {
		return fmt.Errorf("User-Password %q", got)
	}
	if got := rfc2865.NASIdentifier_GetString(req); got != "kvm-7" {
		return fmt.Errorf("NAS-Identifier %q", got)
	}
	return nil
}

// response encodes a response to req signed with secret, with a
// Message-Authenticator when withMA (corrupted when badMA).
func response(t *testing.T, req *radius.Packet, code radius.Code, secret string, withMA, badMA bool) []byte {
	p := req.Response(code)
	p.Secret = []byte(secret)
	if withMA {
		p.Add(rfc2869.MessageAuthenticator_Type, make([]byte, md5.Size))
	}
	rfc2865.ReplyMessage_SetString(p, "from the fake")
	if withMA {
		b, err := p.MarshalBinary() // with the Request Authenticator
		if err != nil {
			t.Error(err)
		}
		mac := hmac.New(md5.New, []byte(secret))
		mac.Write(b)
		sum := mac.Sum(nil)
		if badMA {
			sum[0] ^= 1
		}
		p.Attributes[0].Attribute = sum
	}
	b, err := p.Encode()
	if err != nil {
		t.Error(err)
	}
	return b
}

func TestResponses(t *testing.T) {
	const secret = "s3cret"
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T, req *radius.Packet) [][]byte
		want  error
	}{
		{"accept", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessAccept, secret, false, false)}
		}, nil},
		{"accept with Message-Authenticator", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessAccept, secret, true, false)}
		}, nil},
		{"reject", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessReject, secret, true, false)}
		}, backend.ErrRejected},
		{"challenge", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessChallenge, secret, true, false)}
		}, backend.ErrUnavailable},
		{"accounting response", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccountingResponse, secret, false, false)}
		}, backend.ErrUnavailable},
		{"accept signed with another secret", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessAccept, "other", false, false)}
		}, backend.ErrUnavailable},
		{"accept with a bad Message-Authenticator", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{response(t, req, radius.CodeAccessAccept, secret, true, true)}
		}, backend.ErrUnavailable},
		{"accept for another identifier", func(t *testing.T, req *radius.Packet) [][]byte {
			other := *req
			other.Identifier++
			return [][]byte{response(t, &other, radius.CodeAccessAccept, secret, true, false)}
		}, backend.ErrUnavailable},
		{"garbage", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{[]byte("hello"), make([]byte, 20)}
		}, backend.ErrUnavailable},
		{"forged accept, then the real reject", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{
				response(t, req, radius.CodeAccessAccept, "other", true, false),
				response(t, req, radius.CodeAccessReject, secret, true, false),
			}
		}, backend.ErrRejected},
		{"padding after Length", func(t *testing.T, req *radius.Packet) [][]byte {
			return [][]byte{append(response(t, req, radius.CodeAccessAccept, secret, true, false), 0, 0, 0)}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := fakeServer(t, secret, func(req *radius.Packet) [][]byte { return tc.reply(t, req) })
			const timeout = 400 * time.Millisecond
			b := newBackend(t, radiusauth.Config{Server: addr, Secret: []byte(secret), Timeout: timeout, Retries: 1, NASIdentifier: "kvm-7"})
			start := time.Now()
			err := b.Verify(context.Background(), "alice", alicePass)
			elapsed := time.Since(start)
			checkErr(t, err, tc.want, alicePass)
			if elapsed > timeout+time.Second {
				t.Errorf("Verify took %v", elapsed)
			}
			t.Logf("%v: %v", elapsed, err)
		})
	}
}
