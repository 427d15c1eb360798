package vnc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/auth/backend/backendtest"
	"kvmd/gadget"
)

// TestPicture: a Tight client at a quality the stream gives gets the
// streamer's JPEG as it is; at a lower quality, one encoded again; a Raw
// client gets the pixels, in 32- and 16-bit formats, each the bars.
func TestPicture(t *testing.T) {
	e := newEnv(t, envOpts{quality: 80})
	src, _, _ := e.src.current()

	c := dial(t, e.addr)
	c.mustLogin(e, "watch", "watchpass")
	if c.w != 640 || c.h != 480 {
		t.Fatalf("ServerInit %dx%d, want the picture's 640x480", c.w, c.h)
	}
	c.setEncodings(encTight, encJPEGQualityLowest+8) // level 8: quality 90
	r := c.picture()
	if r.enc != encTight || !bytes.Equal(r.jpeg, src) {
		t.Errorf("Tight at quality 90: encoding %d, %d bytes; want the stream's %d bytes as they are", r.enc, len(r.jpeg), len(src))
	}
	if d := barsDiff(r.img); d > 8 {
		t.Errorf("Tight picture differs from the bars by %.1f", d)
	}

	c.setEncodings(encTight, encJPEGQualityLowest+1) // quality 20
	r = c.picture()
	if r.enc != encTight || bytes.Equal(r.jpeg, src) || len(r.jpeg) >= len(src) {
		t.Errorf("Tight at quality 20: %d bytes, want fewer than the stream's %d", len(r.jpeg), len(src))
	}
	if d := barsDiff(r.img); d > 16 {
		t.Errorf("Tight quality 20 picture differs from the bars by %.1f", d)
	}

	c.setEncodings(encRaw)
	r = c.picture()
	if r.enc != encRaw || r.w != 640 || r.h != 480 {
		t.Fatalf("Raw: %+v", r)
	}
	if d := barsDiff(r.img); d > 8 {
		t.Errorf("Raw picture differs from the bars by %.1f", d)
	}
	c.setPixelFormat(PixelFormat{BPP: 16, Depth: 16, BigEndian: true, TrueColour: true,
		RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5, BlueShift: 0})
	r = c.picture()
	if d := barsDiff(r.img); d > 10 {
		t.Errorf("Raw 16-bit picture differs from the bars by %.1f", d)
	}
}

// TestResize: a new size is sent as ExtendedDesktopSize or DesktopSize,
// then the picture at it; a client with neither gets the picture scaled
// to its size; SetDesktopSize is answered "prohibited".
func TestResize(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, tt := range []struct {
		name   string
		encs   []int32
		resize int32
	}{
		{"extended", []int32{encTight, encJPEGQualityHighest, encExtendedDesktopSize, encDesktopSize}, encExtendedDesktopSize},
		{"desktopsize", []int32{encRaw, encDesktopSize}, encDesktopSize},
		{"none", []int32{encRaw}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.src.set(t, bars(640, 480))
			c := dial(t, e.addr)
			c.mustLogin(e, "oper", "operpass")
			c.setEncodings(tt.encs...)
			c.picture()
			e.src.set(t, bars(320, 240))
			c.request(true)
			rs, err := c.update()
			if err != nil {
				t.Fatal(err)
			}
			if tt.resize == 0 {
				if len(rs) != 1 || rs[0].w != 640 || rs[0].h != 480 {
					t.Fatalf("update %+v, want the picture at the client's 640x480", rs)
				}
				if d := barsDiff(rs[0].img); d > 10 {
					t.Errorf("the scaled picture differs from the bars by %.1f", d)
				}
				return
			}
			if len(rs) != 1 || rs[0].enc != tt.resize || rs[0].w != 320 || rs[0].h != 240 {
				t.Fatalf("update %+v, want the size alone, 320x240 by %d", rs, tt.resize)
			}
			r := c.picture()
			if r.w != 320 || r.h != 240 || barsDiff(r.img) > 10 {
				t.Errorf("picture after the resize: %dx%d, %.1f from the bars", r.w, r.h, barsDiff(r.img))
			}
			if tt.resize != encExtendedDesktopSize {
				return
			}
			b := []byte{msgSetDesktopSize, 0, 0x04, 0, 0x03, 0, 1, 0}
			b = append(b, make([]byte, 16)...)
			c.conn.Write(b)
			c.request(false)
			rs, err = c.update()
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].enc != encExtendedDesktopSize || rs[0].x != 1 || rs[0].y != 1 || rs[0].w != 320 {
				t.Errorf("SetDesktopSize answered %+v, want reason 1 status 1 (prohibited) at 320x240", rs)
			}
		})
	}
}

// keysym is a client's key event.
type keysym struct {
	ks   uint32
	down bool
}

// typeKeys sends each key of s as an X client on a US keyboard does:
// Shift pressed around the characters that need it.
func typeKeys(c *client, s string) {
	for _, r := range s {
		shift := strings.ContainsRune(`ABCDEFGHIJKLMNOPQRSTUVWXYZ!@#$%^&*()_+{}|:"<>?~`, r)
		ks := uint32(r)
		if r == '\n' {
			ks = 0xff0d
		}
		if shift {
			c.key(0xffe1, true)
		}
		c.key(ks, true)
		c.key(ks, false)
		if shift {
			c.key(0xffe1, false)
		}
	}
}

// TestKeys: an operator's key events reach the keyboard as en-us types
// them; a character the client sends with Shift held that the host types
// without Shift is typed without it (a German client's Shift+, is ';');
// a dead key's character and a Unicode keysym; a viewer's keys do not
// reach the host, and its desktop name says it only watches.
func TestKeys(t *testing.T) {
	e := newEnv(t, envOpts{})
	c := dial(t, e.addr)
	c.mustLogin(e, "oper", "operpass")
	if strings.Contains(c.name, "view only") {
		t.Errorf("operator's desktop name %q says view only", c.name)
	}
	typeKeys(c, "Hello, World! 1+1=2\n")
	if got := e.typed("Hello, World! 1+1=2\n"); got != "Hello, World! 1+1=2\n" {
		t.Errorf("typed %q", got)
	}
	// Shift held, ';' sent: the host gets ';', not ':'.
	for _, k := range []keysym{{0xffe1, true}, {';', true}, {';', false}, {0xffe1, false},
		{0x01000000 + '~', true}, {0x01000000 + '~', false}, // a Unicode keysym
		{0xfe52, true}, {0xfe52, false}, // dead_circumflex: en-us has none; its ^
	} {
		c.key(k.ks, k.down)
	}
	if got := e.typed(";~^"); got != ";~^" {
		t.Errorf("typed %q, want \";~^\"", got)
	}
	// Keys held when the client goes are released.
	c.key('a', true)
	e.typed("a")
	c.raw.Close()
	r, err := e.host.Read(gadget.Keyboard, 5*time.Second)
	if err != nil || !bytes.Equal(r, make([]byte, 8)) {
		t.Errorf("after the client left: report %x %v, want everything released", r, err)
	}

	v := dial(t, e.addr)
	v.mustLogin(e, "watch", "watchpass")
	if !strings.Contains(v.name, "(view only)") {
		t.Errorf("viewer's desktop name %q, want it to say view only", v.name)
	}
	typeKeys(v, "no")
	v.pointer(1, 10, 10)
	if got := e.typed(""); got != "" {
		t.Errorf("a viewer typed %q", got)
	}
	if r := e.host.ReadAll(gadget.Mouse, 100*time.Millisecond); len(r) > 0 {
		t.Errorf("a viewer moved the mouse: %x", r)
	}
	if !e.logged("VNC input dropped: this user may only watch") {
		t.Errorf("the log does not say the viewer's input was dropped:\n%s", e.logs)
	}
}

// TestPointer: the pointer's position across the screen is the absolute
// mouse's 0..32767; buttons press and release; a wheel button is a step.
func TestPointer(t *testing.T) {
	e := newEnv(t, envOpts{})
	c := dial(t, e.addr)
	c.mustLogin(e, "admin", "adminpass")
	c.pointer(0, 639, 479)
	c.pointer(1, 0, 0)
	c.pointer(0, 0, 0)
	c.pointer(0x08, 0, 0)
	c.pointer(0, 0, 0)
	var got [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		if r, err := e.host.Read(gadget.Mouse, 200*time.Millisecond); err == nil {
			got = append(got, r)
		}
	}
	// Reports: buttons, x, y (little-endian 0..32767), wheel, h-wheel.
	want := [][]byte{
		{0, 0xff, 0x7f, 0xff, 0x7f, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
		{1, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 4, 0},
	}
	if len(got) < len(want) {
		t.Fatalf("mouse reports %x, want %x", got, want)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("report %d: %x, want %x", i, got[i], want[i])
		}
	}
}

// TestRefusals: every refusal before the picture tells the client why,
// in RFB's failure reason, and leaves no goroutine or connection behind.
func TestRefusals(t *testing.T) {
	var held atomic.Int32
	e := newEnv(t, envOpts{maxClients: 2, handshake: 3 * time.Second, hold: func(id Identity) (func(), error) {
		if id.User == "admin" {
			return nil, errors.New("This user has 1 VNC connection open, the most one user may hold")
		}
		held.Add(1)
		return func() { held.Add(-1) }, nil
	}})
	base := settled()
	for _, tt := range []struct {
		name, user, passwd, want string
	}{
		{"wrong password", "oper", "nope", "Invalid user name or password"},
		{"unknown user", "ghost", "x", "Invalid user name or password"},
		{"bad user name", "Bad Name", "x", "Invalid user name or password"},
		{"no role", "nobody", "nobodypass", "Forbidden: VNC needs the viewer role or higher; yours is none"},
		{"share", "admin", "adminpass", "This user has 1 VNC connection open"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, e.addr)
			err := c.login(e, tt.user, tt.passwd)
			var r *errRefused
			if !errors.As(err, &r) || !strings.Contains(r.reason, tt.want) {
				t.Fatalf("login: %v, want refused: %q", err, tt.want)
			}
			c.closed(5 * time.Second)
		})
	}
	if n := len(e.a.Sessions.List("", time.Now())); n != 0 {
		t.Errorf("%d sessions left by refused connections", n)
	}

	// Clients that cannot choose VeNCrypt: security type 0 and a reason.
	for _, tt := range []struct{ name, version, want string }{
		{"rfb 3.3", "RFB 003.003\n", "needs VeNCrypt"},
		{"not rfb", "GET / HTTP/1", "Not an RFB 3.x client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, e.addr)
			c.version(tt.version)
			if n, _ := c.u32(); n != 0 {
				t.Fatalf("security type %d, want 0 and a reason", n)
			}
			if r := c.reason(); !strings.Contains(r, tt.want) {
				t.Errorf("reason %q, want %q", r, tt.want)
			}
			c.closed(5 * time.Second)
		})
	}
	t.Run("rfb 3.7", func(t *testing.T) {
		// A 3.7 client's SecurityResult has no reason: 1, then the end.
		c := dial(t, e.addr)
		c.version("RFB 003.007\n")
		c.securityTypes()
		c.conn.Write([]byte{secVeNCrypt})
		if err := c.vencrypt(e, secX509Plain); err != nil {
			t.Fatal(err)
		}
		c.conn.Write([]byte{0, 0, 0, 4, 0, 0, 0, 4, 'o', 'p', 'e', 'r', 'n', 'o', 'p', 'e'})
		if r, err := c.u32(); r != 1 || err != nil {
			t.Fatalf("SecurityResult %d %v, want 1", r, err)
		}
		if b, err := c.br.ReadByte(); err == nil {
			t.Errorf("a byte %#x after a 3.7 client's failed SecurityResult", b)
		}
	})
	t.Run("security type", func(t *testing.T) {
		c := dial(t, e.addr)
		c.version("RFB 003.008\n")
		c.securityTypes()
		c.conn.Write([]byte{2}) // VNC Authentication
		if err := c.securityResult(); err == nil || !strings.Contains(err.Error(), "only VeNCrypt") {
			t.Errorf("VNC Authentication chosen: %v", err)
		}
		c.closed(5 * time.Second)
	})
	// subtype runs VeNCrypt to choosing sub, and returns the answer.
	subtype := func(c *client, sub uint32) (byte, error) {
		c.version("RFB 003.008\n")
		c.securityTypes()
		c.conn.Write([]byte{secVeNCrypt})
		c.read(2)
		c.conn.Write([]byte{0, 2})
		c.read(6)
		c.conn.Write(binary.BigEndian.AppendUint32(nil, sub))
		return c.br.ReadByte()
	}
	t.Run("vencrypt subtype", func(t *testing.T) {
		c := dial(t, e.addr)
		if b, err := subtype(c, 256); err != nil || b != 0 { // Plain, in the clear
			t.Errorf("Plain without TLS: %v %v, want 0 (refused)", b, err)
		}
		c.closed(5 * time.Second)
	})
	t.Run("tls failure", func(t *testing.T) {
		c := dial(t, e.addr)
		if b, err := subtype(c, secX509Plain); err != nil || b != 1 {
			t.Fatalf("X509Plain: %v %v, want 1 (accepted)", b, err)
		}
		c.conn.Write([]byte("this is no TLS client hello, but it goes on long enough\r\n"))
		c.closed(5 * time.Second)
		if !e.logged("TLS handshake failed") {
			t.Errorf("the log does not say the TLS handshake failed")
		}
	})
	t.Run("silent client", func(t *testing.T) {
		c := dial(t, e.addr)
		c.read(12)
		c.closed(5 * time.Second) // the handshake timeout, 3 s here
	})
	t.Run("too many", func(t *testing.T) {
		a, b := dial(t, e.addr), dial(t, e.addr)
		a.mustLogin(e, "oper", "operpass")
		b.mustLogin(e, "watch", "watchpass")
		c := dial(t, e.addr)
		if err := c.version("RFB 003.008\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.securityTypes(); err == nil || !strings.Contains(err.Error(), "Too many VNC connections (at most 2)") {
			t.Errorf("a third client: %v", err)
		}
		a.raw.Close()
		b.raw.Close()
	})
	t.Run("flood", func(t *testing.T) {
		// Silent connections beyond the clients and maxPending are
		// closed at once, without a word. (Once the connections before
		// are gone.)
		for deadline := time.Now().Add(5 * time.Second); e.srv.Clients() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		var cs []*client
		for range 2 + maxPending {
			c := dial(t, e.addr)
			if _, err := c.read(12); err != nil {
				t.Fatalf("connection %d: %v", len(cs)+1, err)
			}
			cs = append(cs, c)
		}
		c := dial(t, e.addr)
		c.raw.SetReadDeadline(time.Now().Add(time.Second))
		if b, err := c.read(12); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("one more: %q %v, want it closed at once", b, err)
		}
		for _, c := range cs {
			c.raw.Close()
		}
	})
	goroutines(t, base)
	if n := e.srv.Clients(); n != 0 || held.Load() != 0 {
		t.Errorf("%d connections and %d shares left", n, held.Load())
	}
	if n := len(e.a.Sessions.List("", time.Now())); n != 0 {
		t.Errorf("%d sessions left by closed connections", n)
	}
}

// TestRateLimit: wrong passwords count against the address as on the
// HTTP API; past the free ones, a right one is refused with the wait.
func TestRateLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	for range 6 {
		c := dial(t, e.addr)
		c.login(e, "oper", "wrong")
	}
	c := dial(t, e.addr)
	err := c.login(e, "oper", "operpass")
	var r *errRefused
	if !errors.As(err, &r) || !strings.Contains(r.reason, "Too many failed logins from this address; try again in") {
		t.Errorf("the right password after 6 wrong ones: %v", err)
	}
	if e.a.Limiter.Failures(localAddr(), time.Now()) < 6 {
		t.Errorf("the limiter counted %d failures", e.a.Limiter.Failures(localAddr(), time.Now()))
	}
}

// TestMalformed: a message that cannot be read ends the connection, with
// nothing half done on the host, and no goroutine left.
func TestMalformed(t *testing.T) {
	e := newEnv(t, envOpts{})
	base := settled()
	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"unknown type", []byte{77}},
		{"too many encodings", []byte{msgSetEncodings, 0, 0x04, 0x01}},
		{"colour map", append([]byte{msgSetPixelFormat, 0, 0, 0}, PixelFormat{BPP: 8, Depth: 8}.bytes()...)},
		{"24 bits", append([]byte{msgSetPixelFormat, 0, 0, 0}, PixelFormat{BPP: 24, Depth: 24, TrueColour: true, RedMax: 255, GreenMax: 255, BlueMax: 255}.bytes()...)},
		{"channel outside", append([]byte{msgSetPixelFormat, 0, 0, 0}, PixelFormat{BPP: 8, Depth: 8, TrueColour: true, RedMax: 255, GreenMax: 7, BlueMax: 3, RedShift: 5}.bytes()...)},
		{"screens", []byte{msgSetDesktopSize, 0, 1, 0, 1, 0, 200, 0}},
		{"half a key event", []byte{msgKeyEvent, 1, 0, 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, e.addr)
			c.mustLogin(e, "oper", "operpass")
			c.key(0xffe3, true) // Control held
			c.conn.Write(tt.msg)
			if tt.name == "half a key event" {
				c.conn.(interface{ CloseWrite() error }).CloseWrite()
			}
			c.closed(5 * time.Second)
			// Control pressed, then everything released.
			var last []byte
			for deadline := time.Now().Add(5 * time.Second); !bytes.Equal(last, make([]byte, 8)) && time.Now().Before(deadline); {
				if r, err := e.host.Read(gadget.Keyboard, 100*time.Millisecond); err == nil {
					last = r
				}
			}
			if !bytes.Equal(last, make([]byte, 8)) {
				t.Errorf("last keyboard report %x, want all released", last)
			}
		})
	}
	goroutines(t, base)
	if !e.logged("unknown message type 77") {
		t.Errorf("the log does not name the unknown message")
	}
}

// TestRevoked: the connection ends when its session does: an admin ends
// it, or the user's password changes; a picture stream is let go.
func TestRevoked(t *testing.T) {
	e := newEnv(t, envOpts{})
	base := settled()
	c := dial(t, e.addr)
	c.mustLogin(e, "oper", "operpass")
	c.setEncodings(encRaw)
	c.picture()
	list := e.a.Sessions.List("oper", time.Now())
	if len(list) != 1 || list[0].Method != auth.MethodVNC {
		t.Fatalf("sessions %+v, want the connection's, method vnc", list)
	}
	// Counted once, as vnc: the session's start is no cookie's use.
	for _, c := range e.a.Counts() {
		want := uint64(0)
		if c.Method == auth.MethodVNC && c.Result == auth.ResultOK {
			want = 1
		}
		if c.N != want {
			t.Errorf("auth count %s %s: %d, want %d", c.Method, c.Result, c.N, want)
		}
	}
	start := time.Now()
	if !e.a.EndSession(list[0].ID, "", "admin", auth.MethodCookie, localAddr()) {
		t.Fatal("the session could not be ended")
	}
	c.closed(2 * time.Second) // 0.5 s is the bound for sessions; more only on a loaded machine
	t.Logf("closed %v after the session ended", time.Since(start))
	goroutines(t, base)
	if n := e.src.streams(); n != 0 {
		t.Errorf("%d picture streams left open", n)
	}

	c = dial(t, e.addr)
	c.mustLogin(e, "oper", "operpass")
	if _, err := e.store.Set("oper", auth.UserChange{Passwd: "newpass"}); err != nil {
		t.Fatal(err)
	}
	c.closed(5 * time.Second)

	c = dial(t, e.addr)
	c.mustLogin(e, "watch", "watchpass")
	if err := e.store.Delete("watch"); err != nil {
		t.Fatal(err)
	}
	c.closed(5 * time.Second)
	goroutines(t, base)
}

// TestRevokedExternal: the connection of an external backend's user ends
// when the backend no longer takes the password, which only asking it
// again tells (auth.Principal.Recheck, every cache lifetime); while it
// still does, the connection stays.
func TestRevokedExternal(t *testing.T) {
	fake := backendtest.New(map[string]string{"alice": "alice-pass"})
	ext, err := auth.NewExternal(auth.ExternalConfig{Backend: fake, CacheTTL: time.Second, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{external: ext})
	base := settled()
	c := dial(t, e.addr)
	c.mustLogin(e, "alice", "alice-pass")
	c.setEncodings(encRaw)
	c.picture()
	time.Sleep(2500 * time.Millisecond) // two rechecks that the password passes
	c.picture()
	fake.Set("alice", "other-pass")
	start := time.Now()
	c.closed(5 * time.Second)
	t.Logf("closed %v after the backend's change", time.Since(start))
	goroutines(t, base)
}

// TestShutdown: Serve returns when its context ends, with clients
// connected and one in the handshake, leaving no goroutine.
func TestShutdown(t *testing.T) {
	e := newEnv(t, envOpts{})
	base := settled() - 1 // Serve's goroutine goes too
	a, b := dial(t, e.addr), dial(t, e.addr)
	a.mustLogin(e, "oper", "operpass")
	b.read(12)
	e.stop()
	a.closed(5 * time.Second)
	b.closed(5 * time.Second)
	goroutines(t, base)
}

// TestListenerFails: when the listener fails under Serve, it returns the
// error, and closes its connections first: none is left running.
func TestListenerFails(t *testing.T) {
	e := newEnv(t, envOpts{})
	base := settled() - 1
	c := dial(t, e.addr)
	c.mustLogin(e, "oper", "operpass")
	e.ln.Close()
	select {
	case err := <-e.done:
		if err == nil {
			t.Error("Serve returned nil after its listener failed")
		}
		e.done <- nil // for the cleanup's stop
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener failed")
	}
	c.closed(5 * time.Second)
	goroutines(t, base)
}
