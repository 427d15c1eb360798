// Package radiustest runs Debian's FreeRADIUS on loopback for tests: a
// throwaway configuration in a temporary directory (one client,
// 127.0.0.1, with require_message_authenticator = yes; the pap and files
// modules; users with Cleartext-Password), the server in the foreground
// in its own process group, killed when the test ends.
package radiustest

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2869"

	"kvmd/internal/procgroup"
	"kvmd/internal/testutil"
)

// Binary is where Debian's freeradius package puts the server.
const Binary = "/usr/sbin/freeradius"

// ModuleDir is where Debian's freeradius package puts the modules
// (rlm_pap.so, rlm_files.so).
const ModuleDir = "/usr/lib/freeradius"

// DefaultSecret is the shared secret of a Config without one.
const DefaultSecret = "radiustest-secret"

// Available tells whether FreeRADIUS is installed.
func Available() bool {
	fi, err := os.Stat(Binary)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Require skips the test when FreeRADIUS is not installed (apt-get
// install freeradius), or fails it when testutil.Required, as make test
// has it.
func Require(t testing.TB) {
	t.Helper()
	if !Available() {
		testutil.Missing(t, fmt.Sprintf("radiustest: %s is missing (apt-get install freeradius)", Binary))
	}
}

// Config is what the server knows.
type Config struct {
	// Secret is the shared secret of the 127.0.0.1 client; empty means
	// DefaultSecret.
	Secret string
	// Users maps user names to cleartext passwords. Names and
	// passwords must not hold control characters.
	Users map[string]string
	// FilterID, when set, gives users a Filter-Id reply attribute.
	FilterID map[string]string
}

// Server is a running FreeRADIUS.
type Server struct {
	// Addr is the authentication listener, 127.0.0.1:port.
	Addr string
	// Secret is the shared secret of the 127.0.0.1 client.
	Secret string
	// Dir is the configuration directory.
	Dir string

	out *testutil.SyncBuffer
}

// Log returns what the server has written so far (its -X debug
// output, one block per request).
func (s *Server) Log() string { return s.out.String() }

// Start writes the configuration, checks it with freeradius -C, starts
// the server and returns once it answers a Status-Server. The server is
// killed, and its output logged if the test failed, at cleanup. Start
// calls Require first.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	Require(t)
	if cfg.Secret == "" {
		cfg.Secret = DefaultSecret
	}
	dir := t.TempDir()
	users, err := usersFile(cfg.Users, cfg.FilterID)
	if err != nil {
		t.Fatal(err)
	}
	// The port is free when picked; another process may take it before
	// the server binds it, so a failed start is tried again.
	var lastErr error
	for range 3 {
		addr := freeUDPAddr(t)
		testutil.WriteFiles(t, dir, map[string]string{
			"radiusd.conf": radiusdConf(dir, addr, cfg.Secret),
			"authorize":    users,
		})
		if out, err := exec.Command(Binary, "-C", "-d", dir, "-n", "radiusd").CombinedOutput(); err != nil {
			t.Fatalf("radiustest: freeradius -C: %v\n%s", err, out)
		}
		s, err := start(t, dir, addr, cfg.Secret)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("radiustest: %v", lastErr)
	return nil
}

// start runs the server in dir and waits for it to answer on addr.
func start(t testing.TB, dir, addr, secret string) (*Server, error) {
	s := &Server{Addr: addr, Secret: secret, Dir: dir, out: &testutil.SyncBuffer{}}
	// -X: foreground, one thread, debug output on stdout.
	cmd := exec.Command(Binary, "-X", "-d", dir, "-n", "radiusd")
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting freeradius: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		procgroup.Kill(cmd.Process)
		<-exited
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return nil, fmt.Errorf("freeradius exited before answering: %v\n%s", err, s.out)
		default:
		}
		if statusServer(addr, secret, 100*time.Millisecond) == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("freeradius did not answer Status-Server on %s within 10s\n%s", addr, s.out)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("freeradius output:\n%s", s.out)
		}
	})
	return s, nil
}

// statusServer sends one Status-Server (RFC 5997, which requires
// Message-Authenticator) and waits up to wait for an authentic answer.
func statusServer(addr, secret string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p := radius.New(radius.CodeStatusServer, []byte(secret))
	if err := rfc2869.MessageAuthenticator_Add(p, make([]byte, md5.Size)); err != nil {
		return err
	}
	wire, err := p.Encode()
	if err != nil {
		return err
	}
	mac := hmac.New(md5.New, []byte(secret))
	mac.Write(wire)
	mac.Sum(wire[22:22:38])
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if _, err := conn.Write(wire); err != nil {
		return err
	}
	buf := make([]byte, radius.MaxPacketLength)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return err
		}
		if radius.IsAuthenticResponse(buf[:n], wire, []byte(secret)) {
			return nil
		}
	}
}

// freeUDPAddr returns a loopback address whose UDP port was free a
// moment ago.
func freeUDPAddr(t testing.TB) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// radiusdConf is a whole FreeRADIUS 3 configuration in one file: the
// paths, one client, the pap and files modules, and one virtual server
// listening on addr. It runs as the invoking user (no security.user),
// answers rejects at once (reject_delay = 0) and loads nothing from
// /etc/freeradius; the dictionaries come from /usr/share/freeradius.
func radiusdConf(dir, addr, secret string) string {
	host, port, _ := net.SplitHostPort(addr)
	return `prefix = /usr
confdir = ` + dir + `
logdir = ` + dir + `
run_dir = ` + dir + `
libdir = ` + ModuleDir + `
pidfile = ${run_dir}/radiusd.pid
name = radiusd
max_request_time = 5
cleanup_delay = 2
max_requests = 1024
hostname_lookups = no
log {
	destination = stdout
	colourise = no
}
security {
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = yes
}
proxy_requests = no
client loopback {
	ipaddr = 127.0.0.1
	secret = ` + quote(secret) + `
	require_message_authenticator = yes
}
modules {
	pap {
	}
	files {
		filename = ${confdir}/authorize
	}
}
server default {
	listen {
		type = auth
		ipaddr = ` + host + `
		port = ` + port + `
	}
	authorize {
		files
		pap
	}
	authenticate {
		Auth-Type PAP {
			pap
		}
	}
}
`
}

// usersFile is the files module's authorize file for users.
func usersFile(users, filterID map[string]string) (string, error) {
	var b strings.Builder
	for name, pw := range users {
		if strings.ContainsFunc(name+pw+filterID[name], func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", fmt.Errorf("radiustest: user %q: control characters", name)
		}
		fmt.Fprintf(&b, "%s\tCleartext-Password := %s\n", quote(name), quote(pw))
		if id := filterID[name]; id != "" {
			fmt.Fprintf(&b, "\tFilter-Id := %s\n", quote(id))
		}
	}
	return b.String(), nil
}

// quote makes s a double-quoted FreeRADIUS string.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}
