package httpd

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/internal/testutil"
	"kvmd/streamer/streamertest"

	"github.com/jonboulle/clockwork"
	"golang.org/x/crypto/bcrypt"

	"kvmd/auth"
	"kvmd/metrics"
)

// testUsers are the users every test server knows.
var testUsers = map[string]string{
	"admin":    "admin-pass",
	"colon":    "pa:ss:word",
	"viewer":   "viewer pass",
	"operator": "operator-pass",
}

// testRoles is the roles file next to the test users: admin and colon
// have no line, so they are admins, as every user of an old file is.
const testRoles = "# test roles\nviewer:viewer\noperator:operator\n"

type envOpts struct {
	totpSecret      string // written to the secret file when set
	totpConfigured  bool   // configure a secret file even if empty
	lifetime, idle  time.Duration
	headerTimeout   time.Duration
	bodyTimeout     time.Duration
	peer            func(uid, gid uint32) (string, bool)
	extraRoutes     func(s *Server)
	limiterFreeFail int
	log             LogSource
	info            InfoSource
	trustedProxies  []netip.Prefix
	// maxConns and maxConnsPerAddr: 0 for the env's 4096 and 1024
	// (every test client is 127.0.0.1; TestConcurrentMixed opens 150 at once).
	maxConns, maxConnsPerAddr int
	ui                        fs.FS
	// metrics serves /api/export/prometheus/metrics from the real exporter
	// with the env's counters (no hardware, no runtime families);
	// metricsOpen without authentication.
	metrics, metricsOpen bool
	// external, when set, checks every user but its local ones.
	external *auth.External
	// devices serves the device endpoints (ws_test.go).
	devices *Devices
	// diag, when set, serves /api/diagnostics.
	diag DiagSource
	// fakeClock runs the authenticator, its sessions and the credential
	// store on a clock the test moves (env.setNow, env.fake).
	fakeClock bool
	// wsPerUser and logFollowers: Config.MaxWSPerUser and LogFollowers.
	wsPerUser, logFollowers int
	// maxBodies: Config.MaxBodies.
	maxBodies int64
	// launcher, for a streamer env (newStreamerEnvWith), sets up its
	// stand-in ustreamer before the streamer runs.
	launcher func(*streamertest.Launcher)
}

// env is a real server on a loopback TCP port and a unix socket.
type env struct {
	t        *testing.T
	dir      string
	users    string
	totpPath string
	a        *auth.Authenticator
	store    *auth.Store
	tokens   *auth.Tokens
	srv      *Server
	base     string // http://127.0.0.1:port
	sock     string
	logs     *testutil.SyncBuffer
	shutdown func()              // ends Serve now; the cleanup still checks it returned
	fake     clockwork.FakeClock // with envOpts.fakeClock
}

var hashes sync.Map // password -> its bcrypt hash, so a rewrite keeps unchanged lines

func hashFor(t testing.TB, passwd string) string {
	if h, ok := hashes.Load(passwd); ok {
		return h.(string)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(passwd), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashes.Store(passwd, string(h))
	return string(h)
}

func writeUsers(t testing.TB, path string, users map[string]string) {
	var b strings.Builder
	b.WriteString("# test users\n")
	for u, p := range users {
		b.WriteString(u + ":" + hashFor(t, p) + "\n")
	}
	// Write and rename, as kvmd user does, so the watcher sees a new file.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), logs: &testutil.SyncBuffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	e.users = filepath.Join(e.dir, "htpasswd")
	writeUsers(t, e.users, testUsers)
	if err := os.WriteFile(auth.RolesPath(e.users), []byte(testRoles), 0o600); err != nil {
		t.Fatal(err)
	}
	var clock clockwork.Clock
	if o.fakeClock {
		e.fake = clockwork.NewFakeClock()
		clock = e.fake
	}
	store, err := auth.OpenStore(e.users, auth.StoreConfig{Log: log, Clock: clock, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e.store = store
	users, err := auth.NewUsers(store)
	if err != nil {
		t.Fatal(err)
	}
	var tfa *auth.TOTP
	if o.totpSecret != "" || o.totpConfigured {
		e.totpPath = filepath.Join(e.dir, "totp.secret")
		if o.totpSecret != "" {
			if err := os.WriteFile(e.totpPath, []byte(o.totpSecret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		tfa = auth.NewTOTP(e.totpPath, log)
	}
	lim := auth.NewLimiter()
	if o.limiterFreeFail > 0 {
		lim.Free = o.limiterFreeFail
	}
	e.a = auth.New(users, tfa, &auth.Sessions{Idle: o.idle, Lifetime: o.lifetime, Max: 100}, lim, log)
	e.a.External = o.external
	e.tokens = auth.NewTokens(store, log)
	e.tokens.Local = e.a.Local
	e.a.Tokens = e.tokens
	cfg := Config{
		Auth: e.a, Tokens: e.tokens, Log: log,
		Users: store, AccessLog: log, PeerAuth: o.peer, LogSource: o.log, UI: o.ui, Info: o.info, TrustedProxies: o.trustedProxies,
		ReadHeaderTimeout: o.headerTimeout, BodyTimeout: o.bodyTimeout,
		ShutdownTimeout: 2 * time.Second,
		MaxConns:        cmp.Or(o.maxConns, 4096), MaxConnsPerAddr: cmp.Or(o.maxConnsPerAddr, 1024),
		Devices: o.devices, Diagnostics: o.diag,
		MaxWSPerUser: o.wsPerUser, LogFollowers: o.logFollowers, MaxBodies: o.maxBodies,
	}
	if tfa != nil {
		cfg.TwoFactor = &auth.Enroll{Path: e.totpPath, Account: "test", Log: log, TOTP: tfa}
		cfg.TwoFactorOn = e.a.TwoFactor
	}
	if o.metrics {
		cfg.Metrics = metrics.New(metrics.Config{Version: "test", AuthCounts: e.a.Counts, Sessions: e.a.ActiveSessions})
		cfg.MetricsOpen = o.metricsOpen
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	if o.extraRoutes != nil {
		o.extraRoutes(e.srv)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.sock = filepath.Join(e.dir, "kvmd.sock")
	unixLn, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + tcp.Addr().String()
	e.shutdown = serveUntilCleanup(t, e.srv, []net.Listener{tcp, unixLn}, nil)
	return e
}

// serveUntilCleanup serves lns in the background and, when the test ends,
// shuts the server down and checks that Serve returns cleanly. The
// returned function starts the shutdown early.
func serveUntilCleanup(t *testing.T, srv *Server, lns []net.Listener, tlsConf *tls.Config) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lns, tlsConf) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after shutdown")
		}
	})
	return cancel
}

// setNow moves the env's fake clock (envOpts.fakeClock) to t, firing the
// deadlines it passes.
func (e *env) setNow(t time.Time) { e.fake.Advance(t.Sub(e.fake.Now())) }

type reply struct {
	status          int
	header          http.Header
	body            []byte
	ok              bool
	errName, errMsg string
}

func parseReply(t testing.TB, resp *http.Response) reply {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %q", ct, b)
	}
	var env struct {
		OK     *bool `json:"ok"`
		Result struct {
			Error    string `json:"error"`
			ErrorMsg string `json:"error_msg"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.OK == nil {
		t.Fatalf("reply is not the JSON envelope: %q (%v)", b, err)
	}
	if *env.OK != (resp.StatusCode == 200) {
		t.Fatalf("ok = %v with status %d", *env.OK, resp.StatusCode)
	}
	r.ok, r.errName, r.errMsg = *env.OK, env.Result.Error, env.Result.ErrorMsg
	return r
}

// req sends a request over TCP (from addr 127.0.0.1) and parses the reply.
func (e *env) req(method, path string, hdr map[string]string, body string) reply {
	e.t.Helper()
	return e.reqWith(http.DefaultTransport.(*http.Transport).Clone(), e.base, method, path, hdr, body)
}

// reqUnix sends a request over the unix socket.
func (e *env) reqUnix(method, path string, hdr map[string]string, body string) reply {
	e.t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}
	return e.reqWith(tr, "http://kvmd", method, path, hdr, body)
}

// reqFrom sends a request over TCP from a chosen loopback source address.
func (e *env) reqFrom(src, method, path string, hdr map[string]string, body string) reply {
	e.t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	tr := &http.Transport{DialContext: d.DialContext}
	return e.reqWith(tr, e.base, method, path, hdr, body)
}

func (e *env) reqWith(tr *http.Transport, base, method, path string, hdr map[string]string, body string) reply {
	e.t.Helper()
	defer tr.CloseIdleConnections()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		r.Header[k] = []string{v}
	}
	resp, err := (&http.Client{Transport: tr}).Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return parseReply(e.t, resp)
}

// login logs in with a form and returns the session token.
func (e *env) login(user, passwd string) string {
	e.t.Helper()
	r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		"user="+user+"&passwd="+urlEscape(passwd))
	if r.status != 200 {
		e.t.Fatalf("login %s: status %d %s", user, r.status, r.body)
	}
	return cookieValue(e.t, r.header, "auth_token")
}

func urlEscape(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "+", ":", "%3A", "=", "%3D").Replace(s)
}

func cookieValue(t testing.TB, h http.Header, name string) string {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("no %s cookie in %q", name, h.Values("Set-Cookie"))
	return ""
}

// eventually retries f until it returns true or two seconds pass.
func eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 2 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
