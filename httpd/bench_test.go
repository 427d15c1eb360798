package httpd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/info"
	"kvmd/internal/fixture"
	"kvmd/internal/logbuf"
	"kvmd/internal/slogtext"
)

// BenchmarkRequest is one request of each of make bench's load rows,
// through the whole server over a loopback keep-alive connection: the
// listener's conn, net/http, ServeHTTP, the credential check, the handler
// and the access line (slogtext into logbuf, as the daemon writes it
// outside systemd, here to io.Discard). The client writes the
// request's bytes and reads the reply with no allocation of its own, so
// allocs/op is the server's per request; "bare" is net/http alone
// answering the same bytes (kvmbench's baseline), the floor under every
// other row. kvmbench reports these lines in BENCHMARKS.md (make bench).
func BenchmarkRequest(b *testing.B) {
	bs := newBenchServer(b)
	for _, sc := range bs.scenarios {
		b.Run(sc.name, func(b *testing.B) {
			c, err := net.Dial("tcp", sc.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rr := &benchReader{r: bufio.NewReaderSize(c, 64<<10)}
			for range 100 { // warm: the verification cache, info's caches, the connection's buffers
				if err := rr.roundTrip(c, sc.req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := rr.roundTrip(c, sc.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type benchScenario struct {
	name string
	addr string
	req  []byte
}

type benchServer struct {
	srv       *Server
	scenarios []benchScenario
}

// newBenchServer starts kvmd's server configured as `kvmd serve` does (a
// users file with a bcrypt user, a session, an API token, /api/info from a
// Raspberry Pi 4's tree, the access log on) and a bare net/http server,
// both on loopback until b ends.
func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	dir := b.TempDir()
	users := filepath.Join(dir, "htpasswd")
	const user, passwd = "bench", "bench-password"
	writeUsers(b, users, map[string]string{user: passwd})
	discard := slog.New(slog.DiscardHandler)
	store, err := auth.OpenStore(users, auth.StoreConfig{Log: discard, Watch: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	au, err := auth.NewUsers(store)
	if err != nil {
		b.Fatal(err)
	}
	a := auth.New(au, nil, &auth.Sessions{Max: 4096, MaxPerUser: 64}, auth.NewLimiter(), discard)
	a.Tokens = auth.NewTokens(store, discard)
	a.Tokens.Local = a.Local
	apiToken, err := a.Tokens.Add(user, "bench", auth.RoleAdmin, time.Time{}, time.Now(), auth.Actor{User: user})
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := a.Login(context.Background(), user, passwd, 0, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		b.Fatal(err)
	}

	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", "rpi4.ttar"), root); err != nil {
		b.Fatal(err)
	}
	src := info.New(info.Config{FS: hw.New(root), V4L2: &v4l2test.Fake{}, Version: "4.108.1", TwoFactor: a.TwoFactor})

	// The daemon's access log outside systemd (cmd/kvmd/log.go).
	lb := logbuf.New(io.Discard, 32<<10, 100*time.Millisecond)
	b.Cleanup(func() { lb.Flush() })
	log := slog.New(logbuf.Handler(slogtext.New(lb), lb)).With("component", "http")
	srv, err := New(Config{Auth: a, Tokens: a.Tokens, Users: store, Info: src, Log: log, AccessLog: log})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, []net.Listener{ln}, nil) }()
	b.Cleanup(func() { cancel(); <-done })

	bare, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := okEmpty
	// As kvmbench's baseline server (tools/cmd/kvmbench/baseline.go).
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})}
	go hs.Serve(bare)
	b.Cleanup(func() { hs.Close() })

	kvmd, base := ln.Addr().String(), bare.Addr().String()
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + passwd))
	get := func(addr, path string, headers ...string) []byte {
		var r bytes.Buffer
		r.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: kvmbench\r\n")
		for _, h := range headers {
			r.WriteString(h + "\r\n")
		}
		r.WriteString("\r\n")
		return r.Bytes()
	}
	const check = "/api/auth/check"
	return &benchServer{srv: srv, scenarios: []benchScenario{
		{"bare", base, get(base, check)},
		{"cookie", kvmd, get(kvmd, check, "Cookie: auth_token="+token)},
		{"header", kvmd, get(kvmd, check, "X-KVMD-User: "+user, "X-KVMD-Passwd: "+passwd)},
		{"basic", kvmd, get(kvmd, check, "Authorization: Basic "+basic)},
		{"token", kvmd, get(kvmd, check, "Authorization: Bearer "+apiToken)},
		{"info", kvmd, get(kvmd, "/api/info", "Cookie: auth_token="+token)},
		{"info-hw", kvmd, get(kvmd, "/api/info?fields=hw", "Cookie: auth_token="+token)},
	}}
}

// benchReader reads HTTP/1.1 replies with a Content-Length without
// allocating: the status line, the headers, then the body discarded.
type benchReader struct {
	r *bufio.Reader
}

func (br *benchReader) roundTrip(c net.Conn, req []byte) error {
	if _, err := c.Write(req); err != nil {
		return err
	}
	line, err := br.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return &benchStatusError{line: string(line)}
	}
	n := -1
	for {
		line, err = br.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n = 0
			for _, c := range bytes.TrimSpace(v) {
				n = n*10 + int(c-'0')
			}
		}
	}
	if n < 0 {
		return &benchStatusError{line: "no Content-Length"}
	}
	_, err = br.r.Discard(n)
	return err
}

type benchStatusError struct{ line string }

func (e *benchStatusError) Error() string { return "unexpected reply: " + e.line }
