package imagetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
)

// Bounds for a TCG-emulated arm64 on a loaded 2-core x86 host: a boot to
// the login prompt takes about a minute; these leave room for a CI machine
// busier than that.
const (
	installTimeout = 8 * time.Minute
	bootTimeout    = 10 * time.Minute
	// watchdogTimeout is kvmd.service's WatchdogSec=; the restart must come
	// within it plus watchdogMargin (RestartSec=3s, the kill, the new
	// start, all emulated).
	watchdogTimeout = 30 * time.Second
	watchdogMargin  = 40 * time.Second
)

// The banner's password line (firstboot.go's banner and alphabet).
var bannerRe = regexp.MustCompile(`Log in as admin, password ([2-9A-HJ-NP-Z]{16})\n`)

// loginRe is the serial console's login prompt, which agetty shows after
// the banner.
var loginRe = regexp.MustCompile(`\nkvmd login: `)

// TestBootedSystem installs the package of this checkout into the Debian
// arm64 image, boots it in qemu-system-aarch64 and checks on the running
// system what a user gets after flashing: see doc.go.
func TestBootedSystem(t *testing.T) {
	enabled(t)
	var fig figures
	deb, version := buildDeb(t)
	img := buildImage(t, &fig)
	vicodec := buildVicodec(img)
	fig.qemu, _, _ = strings.Cut(run(t, "qemu-system-aarch64", "--version"), "\n")

	work := t.TempDir()
	overlay := filepath.Join(work, "root.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", img.base, overlay)
	share := filepath.Join(work, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "cp", deb, "setup/setup", "setup/kvmd-imagetest-shell.service",
		"setup/kvmd-imagetest-modules.conf", "setup/kvmd-imagetest-modprobe.conf", share)
	buildProbe(t, share)
	sockDir, err := os.MkdirTemp("", "kvmd-it")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })

	// The consoles as they come, to watch a run: KVMD_IMAGETEST_LOGDIR.
	logDir := os.Getenv("KVMD_IMAGETEST_LOGDIR")
	if logDir != "" {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatalf("KVMD_IMAGETEST_LOGDIR: %v", err)
		}
	}
	logFile := func(name string) string {
		if logDir == "" {
			return ""
		}
		return filepath.Join(logDir, name)
	}
	installPackage(t, img, machineConfig{overlay: overlay, share: share, sockDir: sockDir, log: logFile("setup.console")}, &fig)

	m := bootMachine(t, img, machineConfig{overlay: overlay, share: share, sockDir: sockDir, log: logFile("boot.console")})
	c := newClient(m.port)
	// Power-on to kvmd answering: the first HTTP answer through the
	// forwarded port, whatever its status (the socket starts the daemon).
	answered := make(chan time.Duration, 1)
	go func() {
		if waitFor(context.Background(), bootTimeout, 250*time.Millisecond, c.answers) {
			answered <- time.Since(m.started)
		}
		close(answered)
	}()
	banner, err := m.console.expect(0, bannerRe, bootTimeout)
	if err != nil {
		t.Fatal(err)
	}
	passwd := banner[1]
	if _, err := m.console.expect(0, regexp.MustCompile(regexp.QuoteMeta(banner[0])+`(?s:.*)`+loginRe.String()), time.Minute); err != nil {
		t.Fatalf("no login prompt after the banner: %v", err)
	}
	if err := m.shell.ready(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	d, ok := <-answered
	if !ok {
		t.Fatalf("kvmd did not answer on the forwarded port within %v of power-on", bootTimeout)
	}
	fig.bootToAnswer = d
	t.Logf("power-on to kvmd answering: %v", d.Round(100*time.Millisecond))

	sys := &system{t: t, m: m, c: c, passwd: passwd, version: version, share: share, vicodec: vicodec}
	// The certificate firstboot made, trusted from here on: it must
	// verify for the device's host name.
	sys.trustDeviceCert(t)
	fig.readGuestBootTimes(t, m.shell)
	fig.rssIdle = sys.daemonRSS(t)

	t.Run("firstboot", sys.testFirstboot)
	t.Run("units", sys.testUnits)
	t.Run("info", sys.testInfo)
	t.Run("gadget", sys.testGadget)
	t.Run("sandbox", sys.testSandbox)
	t.Run("usb states", sys.testUSBStates)
	t.Run("video", func(t *testing.T) { sys.testVideo(t, &fig) })
	t.Run("streamer", func(t *testing.T) { sys.testStreamer(t, &fig) })
	t.Run("m2m", sys.testM2M)
	t.Run("h264", func(t *testing.T) { sys.testH264(t, &fig) })
	t.Run("gpio", sys.testGPIO)
	t.Run("redfish", sys.testRedfish)
	t.Run("hid", func(t *testing.T) { sys.testHID(t, &fig) })
	t.Run("hid layouts", sys.testHIDLayouts)
	t.Run("hid outputs", sys.testHIDOutputs)
	t.Run("vnc", sys.testVNC)
	t.Run("firmware", sys.testFirmware)
	t.Run("msd", func(t *testing.T) { sys.testMSD(t, &fig) })
	t.Run("log", sys.testLog)
	t.Run("web edits", sys.testWebEdits)
	t.Run("credentials", sys.testCredentials)
	fig.rssAfter = sys.daemonRSS(t)
	t.Run("watchdog", func(t *testing.T) { sys.testWatchdog(t, &fig) })
	t.Run("reboot", func(t *testing.T) { sys.testReboot(t, &fig) })
	t.Run("upgrade", sys.testUpgrade)
	t.Run("stop", sys.testStop)
	t.Run("poweroff", sys.testPoweroff)

	fig.report(t)
}

// enabled skips t unless KVMD_IMAGETEST=1 (make image-test sets it), and
// then needs the tools.
func enabled(t *testing.T) {
	t.Helper()
	if os.Getenv("KVMD_IMAGETEST") != "1" {
		t.Skip("the booted-system test runs with KVMD_IMAGETEST=1 (make image-test)")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tool := range []string{"qemu-system-aarch64", "qemu-img", "mmdebstrap", "genext2fs", "resize2fs", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (make deps installs it): %v", tool, err)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// buildDeb builds this checkout's arm64 package as make deb does (the
// Makefile's cross flags, scripts/mkdeb.sh), or takes KVMD_IMAGETEST_DEB.
// It returns the package and the version the binary reports.
func buildDeb(t *testing.T) (string, string) {
	t.Helper()
	if p := os.Getenv("KVMD_IMAGETEST_DEB"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs, ""
	}
	dir := t.TempDir()
	version := strings.TrimSpace(run(t, "git", "describe", "--tags", "--always", "--dirty"))
	bin := filepath.Join(dir, "kvmd-linux-arm64")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", bin, "../cmd/kvmd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	debVersion := strings.TrimSpace(run(t, "sh", "../scripts/debversion.sh"))
	out := run(t, "sh", "../scripts/mkdeb.sh", "arm64", debVersion, bin, filepath.Join(dir, "deb"))
	return strings.TrimSpace(out), version
}

// buildImage runs rootfs.sh: the cached image, built when missing.
func buildImage(t *testing.T, fig *figures) image {
	t.Helper()
	cache := os.Getenv("KVMD_IMAGETEST_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "kvmd-imagetest")
	}
	start := time.Now()
	cmd := exec.Command("sh", "rootfs.sh", cache)
	logw := &testWriter{t: t, prefix: "rootfs.sh: "}
	cmd.Stderr = logw
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rootfs.sh: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	fig.image = time.Since(start)
	fig.imageBuilt = logw.lines > 0
	t.Logf("image %s (%v)", dir, fig.image.Round(time.Second))
	return image{
		dir:    dir,
		base:   filepath.Join(dir, "base.img"),
		kernel: filepath.Join(dir, "vmlinuz"),
		initrd: filepath.Join(dir, "initrd.img"),
	}
}

// testWriter logs what a command prints, line by line, as it comes.
type testWriter struct {
	t      *testing.T
	prefix string
	buf    []byte
	lines  int
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(w.prefix + string(w.buf[:i]))
		w.lines++
		w.buf = w.buf[i+1:]
	}
}

// installPackage boots the image once with kvmd-imagetest-init as init,
// which runs setup/setup from the shared directory in the system that
// has never booted, without a running systemd: apt installs the package
// as into an image before it is flashed, and the test's shell is added;
// then the machine powers off.
func installPackage(t *testing.T, img image, cfg machineConfig, fig *figures) {
	t.Helper()
	cfg.cmdline = "init=/usr/local/sbin/kvmd-imagetest-init"
	cfg.noReboot = true
	m := bootMachine(t, img, cfg)
	st, err := m.console.expect(0, regexp.MustCompile(`kvmd-imagetest-init: setup exit status (\d+)`), installTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.wait(time.Minute); err != nil {
		t.Fatalf("install boot: %v", err)
	}
	fig.install = time.Since(m.started)
	con := m.console.String()
	if st[1] != "0" || !strings.Contains(con, "Setting up kvmd ") {
		t.Fatalf("setup (apt install ./kvmd_*.deb) failed (exit status %s):\n%s", st[1], tail(con, 4000))
	}
	// The chroot branch of the postinst: units enabled, nothing started,
	// no firstboot (each device makes its own password at its first boot).
	for _, bad := range []string{"kvmd: firstboot failed", "created /etc/kvmd"} {
		if strings.Contains(con, bad) {
			t.Errorf("install boot printed %q: the postinst ran the first boot in the image", bad)
		}
	}
	t.Logf("install boot (apt install ./kvmd_*.deb, power off): %v", fig.install.Round(time.Second))
}

// system is the booted machine and what the test learnt of it.
type system struct {
	t       *testing.T
	m       *machine
	c       *client
	passwd  string
	version string
	share   string
	totp    string // the 2FA secret, once enabled
	// webcheckPath is tools/cmd/webcheck, once built.
	webcheckPath string
	// vicodec is the kernel's vicodec being built for the image's kernel.
	vicodec *vicodecBuild
}

// creds are the headers of a request as admin (with the 2FA code when on).
func (s *system) creds(t *testing.T) map[string]string {
	t.Helper()
	p := s.passwd
	if s.totp != "" {
		code, err := totp.GenerateCode(s.totp, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		p += code
	}
	return map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": p}
}

func (s *system) trustDeviceCert(t *testing.T) {
	t.Helper()
	pem := s.m.shell.must(t, "cat /etc/kvmd/tls.crt")
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pem)) {
		t.Fatalf("/etc/kvmd/tls.crt holds no certificate:\n%s", pem)
	}
	s.c.trust(pool, "kvmd")
	if st, _, err := s.c.do("GET", "/api/auth/check", s.creds(t), nil); err != nil || st != 200 {
		t.Fatalf("GET /api/auth/check as admin with the banner's password, verifying the device's certificate for its host name: %d %v", st, err)
	}
}

// props reads properties of a unit with systemctl show; a property shown
// on several lines has them joined with newlines.
func (s *system) props(t *testing.T, unit string, keys ...string) map[string]string {
	t.Helper()
	out := s.m.shell.must(t, "systemctl show "+unit+" -p "+strings.Join(keys, " -p "))
	p := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			if p[k] != "" {
				v = p[k] + "\n" + v // a list, such as a socket's Listen
			}
			p[k] = v
		}
	}
	return p
}

func (s *system) mainPID(t *testing.T) int {
	t.Helper()
	pid, err := strconv.Atoi(s.props(t, "kvmd.service", "MainPID")["MainPID"])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// daemonRSS is VmRSS of kvmd's main process in the guest, KiB.
func (s *system) daemonRSS(t *testing.T) int {
	t.Helper()
	pid := s.mainPID(t)
	if pid == 0 {
		t.Fatal("kvmd.service has no main process")
	}
	out := s.m.shell.must(t, fmt.Sprintf("grep VmRSS /proc/%d/status", pid))
	f := strings.Fields(out)
	if len(f) != 3 || f[2] != "kB" {
		t.Fatalf("VmRSS line %q", out)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// client talks to the daemon through the forwarded port.
type client struct {
	base string
	hc   *http.Client
}

func newClient(port int) *client {
	c := &client{base: fmt.Sprintf("https://127.0.0.1:%d", port)}
	c.trust(nil, "")
	return c
}

// trust makes the client verify the server's certificate against pool for
// name; a nil pool accepts any (only to see whether anything answers).
func (c *client) trust(pool *x509.CertPool, name string) {
	conf := &tls.Config{RootCAs: pool, ServerName: name, InsecureSkipVerify: pool == nil}
	c.hc = &http.Client{
		Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true},
		Timeout:   30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func (c *client) answers() bool {
	req, _ := http.NewRequest("GET", c.base+"/api/auth/check", nil)
	hc := *c.hc
	hc.Timeout = 10 * time.Second
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// do sends a request and returns the status and body.
func (c *client) do(method, path string, hdr map[string]string, body io.Reader) (int, []byte, error) {
	resp, err := c.request(context.Background(), method, path, hdr, body)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// stream GETs path with no time limit but ctx's (a follow stream).
func (c *client) stream(ctx context.Context, path string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := *c.hc
	hc.Timeout = 0
	return hc.Do(req)
}

func (c *client) request(ctx context.Context, method, path string, hdr map[string]string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return c.hc.Do(req)
}

// getJSON GETs path as admin and decodes the envelope's result.
func (s *system) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	st, body, err := s.c.do("GET", path, s.creds(t), nil)
	if err != nil || st != 200 {
		t.Fatalf("GET %s: %d %v\n%s", path, st, err, body)
	}
	var env struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &env); err != nil || !env.OK {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	if err := json.Unmarshal(env.Result, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

// login posts the form login and returns the session cookie.
func (s *system) login(t *testing.T, user, passwd string) *http.Cookie {
	t.Helper()
	form := url.Values{"user": {user}, "passwd": {passwd}}.Encode()
	resp, err := s.c.request(context.Background(), "POST", "/api/auth/login",
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("login as %s: %d %s", user, resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "auth_token" && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("login as %s: no auth_token cookie", user)
	return nil
}

// lines reads a text body into lines without their CRLF.
func lines(r io.Reader) []string {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, strings.TrimSuffix(sc.Text(), "\r"))
	}
	return out
}
