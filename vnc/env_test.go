package vnc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/gadget"
	"kvmd/hid"
	"kvmd/hid/hidtest"
	"kvmd/hw"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
	"kvmd/internal/viewertest"
)

// The users of the tests, their roles in the roles file.
var testUsers = map[string]struct {
	passwd string
	role   string
}{
	"admin":  {"adminpass", "admin"},
	"oper":   {"operpass", "operator"},
	"watch":  {"watchpass", "viewer"},
	"nobody": {"nobodypass", "viewer"}, // given no role by noRole
}

// testSource is a FrameSource: its picture, sent to every stream when it
// changes and again every 50 ms, as ustreamer's stream repeats.
type testSource struct {
	mu      sync.Mutex
	jpeg    []byte
	w, h    int
	changed chan struct{}
	open    int // streams open
}

func newSource(t *testing.T, img image.Image) *testSource {
	s := &testSource{changed: make(chan struct{})}
	s.set(t, img)
	return s
}

// set makes img the picture.
func (s *testSource) set(t *testing.T, img image.Image) {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.jpeg, s.w, s.h = b.Bytes(), img.Bounds().Dx(), img.Bounds().Dy()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *testSource) current() ([]byte, int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jpeg, s.w, s.h
}

func (s *testSource) streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

func (s *testSource) Open(ctx context.Context) (Frames, error) {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
	return &testFrames{s: s, ctx: ctx, cancel: cancel}, nil
}

type testFrames struct {
	s      *testSource
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	sent   bool
}

func (f *testFrames) Next() (Frame, error) {
	if f.sent {
		f.s.mu.Lock()
		ch := f.s.changed
		f.s.mu.Unlock()
		select {
		case <-f.ctx.Done():
			return Frame{}, f.ctx.Err()
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if f.ctx.Err() != nil {
		return Frame{}, f.ctx.Err()
	}
	f.sent = true
	data, w, h := f.s.current()
	return Frame{JPEG: slices.Clone(data), Width: w, Height: h}, nil
}

func (f *testFrames) Close() error {
	f.once.Do(func() {
		f.cancel()
		f.s.mu.Lock()
		f.s.open--
		f.s.mu.Unlock()
	})
	return nil
}

// bars draws vivid's 75 % colour bars, w x h.
func bars(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	n := len(colorbars.Bars75)
	for i, c := range colorbars.Bars75 {
		col := color.RGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), 255}
		draw.Draw(img, image.Rect(i*w/n, 0, (i+1)*w/n, h), image.NewUniform(col), image.Point{}, draw.Src)
	}
	return img
}

// barsDiff is the mean difference per channel between img and bars of
// its size, inside each bar (JPEG blurs their edges).
func barsDiff(img image.Image) float64 {
	r := img.Bounds()
	want := bars(r.Dx(), r.Dy())
	var sum float64
	for i := range 8 {
		sum += viewertest.MeanDiff(img, want, image.Rect(r.Dx()*i/8+r.Dx()/32, r.Dy()/8, r.Dx()*(i+1)/8-r.Dx()/32, r.Dy()*7/8))
	}
	return sum / 8
}

// noRole is the daemon's authentication with user nobody given no role,
// as a backend could give it: no user of the roles file has none.
type noRole struct{ Sessions }

func (n noRole) Authenticate(ctx context.Context, user, passwd string, addr netip.Addr) (Identity, error) {
	id, err := n.Sessions.Authenticate(ctx, user, passwd, addr)
	if user == "nobody" {
		id.Role = auth.RoleNone
	}
	return id, err
}

// env is a server on a loopback port with the daemon's authentication on
// a users file, a keyboard and mouse on the stand-in host, and a picture.
type env struct {
	t      *testing.T
	srv    *Server
	addr   string
	ln     net.Listener
	host   *hidtest.Host
	src    *testSource
	a      *auth.Authenticator
	store  *auth.Store
	ca     *x509.CertPool
	caPEM  string // the certificate's file
	logs   *testutil.SyncBuffer
	cancel context.CancelFunc
	done   chan error
}

type envOpts struct {
	maxClients int
	hold       func(Identity) (func(), error)
	quality    int
	handshake  time.Duration
	// external, when set, checks every user (auth.Authenticator.External).
	external *auth.External
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, logs: &testutil.SyncBuffer{}, host: hidtest.NewHost(), src: newSource(t, bars(640, 480))}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The daemon's authentication, on a users file and a roles file.
	var users, roles strings.Builder
	for u, v := range testUsers {
		// {SHA}, which PiKVM's htpasswd files may hold: a bcrypt hash
		// would make each login of the tests cost tens of milliseconds,
		// and seconds under the race detector.
		sum := sha1.Sum([]byte(v.passwd))
		fmt.Fprintf(&users, "%s:{SHA}%s\n", u, base64.StdEncoding.EncodeToString(sum[:]))
		fmt.Fprintf(&roles, "%s:%s\n", u, v.role)
	}
	path := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(path, []byte(users.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth.RolesPath(path), []byte(roles.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.OpenStore(path, auth.StoreConfig{Log: log, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e.store = store
	us, err := auth.NewUsers(store)
	if err != nil {
		t.Fatal(err)
	}
	e.a = auth.New(us, nil, &auth.Sessions{Max: 100, MaxPerUser: 16}, auth.NewLimiter(), log)
	e.a.External = o.external

	// The keyboard and mouse, on the stand-in host.
	root := filepath.Join(dir, "root")
	if err := hidtest.Gadget(root, 7); err != nil {
		t.Fatal(err)
	}
	keys := hid.New(hid.Config{FS: hw.New(root), Open: e.host.Open, Log: log})
	hctx, stopHID := context.WithCancel(context.Background())
	hidDone := make(chan struct{})
	go func() { defer close(hidDone); keys.Run(hctx) }()
	t.Cleanup(func() { stopHID(); <-hidDone; e.host.Close() })

	cert, caPEM := testCert(t)
	e.ca = x509.NewCertPool()
	e.ca.AppendCertsFromPEM(caPEM)
	e.caPEM = filepath.Join(dir, "ca.pem")
	os.WriteFile(e.caPEM, caPEM, 0o644)
	km, err := hid.BuiltinKeymaps().Get("en-us")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, Auth: noRole{Sessions{Auth: e.a}}, Hold: o.hold,
		Frames: e.src, HID: keys, Keymap: km, MaxClients: o.maxClients, Log: log,
		HandshakeTimeout: o.handshake, FirstFrame: 2 * time.Second,
	}
	if o.quality > 0 {
		cfg.StreamQuality = func() int { return o.quality }
	}
	e.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr, e.ln = ln.Addr().String(), ln
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(e.stop)
	return e
}

// stop ends the server and waits for Serve.
func (e *env) stop() {
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("Serve: %v", err)
		}
		e.done <- err
	case <-time.After(5 * time.Second):
		e.t.Errorf("Serve did not return after its context ended")
	}
}

// testCert makes a self-signed certificate for 127.0.0.1 and localhost,
// a server's and no CA's, as kvmd firstboot makes the device's.
func testCert(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM
}

// typed reads the keyboard's reports until what an en-us host types from
// them is want, or 5 s have passed, or (want "") none comes for 300 ms,
// and returns it: each key newly pressed, with Shift as the report holds
// it.
func (e *env) typed(want string) string {
	km, _ := hid.BuiltinKeymaps().Get("en-us")
	chars := map[hid.Stroke]rune{}
	for r := rune(0x20); r < 0x7f; r++ {
		if s := km.Strokes(r); len(s) == 1 {
			chars[s[0]] = r
		}
	}
	var reports [][]byte
	decode := func() string {
		var out strings.Builder
		var prev []byte
		for _, r := range reports {
			for _, u := range r[2:] {
				if u == 0 || len(prev) == 8 && slices.Contains(prev[2:], u) {
					continue
				}
				for _, k := range hid.Keys() {
					if k.Usage != u {
						continue
					}
					if k.Name == "Enter" {
						out.WriteByte('\n')
					} else if c, ok := chars[hid.Stroke{Key: k, Shift: r[0]&0x22 != 0, AltGr: r[0]&0x40 != 0}]; ok {
						out.WriteRune(c)
					} else {
						out.WriteString("<" + k.Name + ">")
					}
				}
			}
			prev = r
		}
		return out.String()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := e.host.ReadAll(gadget.Keyboard, 300*time.Millisecond)
		reports = append(reports, got...)
		if s := decode(); s == want && (want != "" || len(got) == 0) || time.Now().After(deadline) {
			// Then what comes within 300 ms more: nothing, if want was all.
			reports = append(reports, e.host.ReadAll(gadget.Keyboard, 300*time.Millisecond)...)
			return decode()
		}
	}
}

// settled returns the count of goroutines once it has not changed for
// 300 ms: the env's own (the HID's device readers start when their nodes
// open) are all there.
func settled() int {
	n := runtime.NumGoroutine()
	for stable := time.Now(); time.Since(stable) < 300*time.Millisecond; {
		time.Sleep(20 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, stable = m, time.Now()
		}
	}
	return n
}

// goroutines waits for the count of goroutines to come back to at most
// want, and fails the test if it does not within 5 s.
func goroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func localAddr() netip.Addr { return netip.MustParseAddr("127.0.0.1") }

// logged reports whether the server's log has s, waiting up to 5 s for
// it: the server writes a line after what the client already saw (a
// refusal's reason, a closed connection), so a test that looks at once
// can be ahead of it.
func (e *env) logged(s string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(e.logs.String(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
