package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/client/clienttest"
	"kvmd/journal/journaltest"
)

// daemon starts kvmd with user admin, password s3cret, and returns it with
// a home whose environment holds its URL, the user and the password.
func daemon(t *testing.T, args ...string) (*clienttest.Daemon, *home) {
	t.Helper()
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	d := clienttest.Start(t, kvmdBin, []string{"TZ=UTC"}, append([]string{"--users", users}, args...)...)
	h := newHome(t).with("KVMCTL_URL="+d.URL, "KVMCTL_USER=admin", "KVMCTL_PASSWD=s3cret")
	return d, h
}

// statusWith asks the daemon directly for /api/auth/check with a cookie.
func statusWith(t *testing.T, d *clienttest.Daemon, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", d.URL+"/api/auth/check", nil)
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSessionLifecycle(t *testing.T) {
	d, h := daemon(t)
	r := h.must(0, "login")
	if !strings.Contains(r.stdout, "Logged in to "+d.URL+" as admin") {
		t.Errorf("login said:\n%s", r)
	}
	fi, err := os.Stat(h.sessionsFile())
	if err != nil {
		t.Fatal(err)
	}
	di, _ := os.Stat(filepath.Dir(h.sessionsFile()))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Errorf("sessions file mode %v in directory %v, want 0600 in 0700", fi.Mode(), di.Mode())
	}
	sess := h.sessions()[d.URL]
	if sess.User != "admin" || !tokenPattern.MatchString(sess.Token) {
		t.Fatalf("stored session %+v", sess)
	}
	if st := statusWith(t, d, sess.Token); st != 200 {
		t.Fatalf("the stored token is not a session of the daemon: %d", st)
	}

	// Without a password only the session can authenticate the commands.
	np := h.with("KVMCTL_PASSWD")
	r = np.must(0, "check")
	if !strings.Contains(r.stdout, "accepts the stored session") {
		t.Errorf("check said:\n%s", r)
	}
	d.WaitLog(t, `path=/api/auth/check status=200 .*auth=cookie`, 5*time.Second)
	r = np.must(0, "info", "--fields", "auth", "--json")
	if r.stdout != `{"auth":{"enabled":true,"totp":false}}`+"\n" {
		t.Errorf("info --json:\n%s", r)
	}
	// A session is for its user: another user's commands do not use it.
	np.with("KVMCTL_USER=bob").must(3, "check")

	r = np.must(0, "logout")
	if !strings.Contains(r.stdout, "Logged out of "+d.URL) {
		t.Errorf("logout said:\n%s", r)
	}
	if _, ok := h.sessions()[d.URL]; ok {
		t.Error("logout kept the session in the file")
	}
	if st := statusWith(t, d, sess.Token); st != 403 {
		t.Errorf("after logout the session answers %d, want 403: not ended on the device", st)
	}
	r = np.must(3, "check")
	if !strings.Contains(r.stderr, "UnauthorizedError") || !strings.Contains(r.stderr, "kvmctl login") {
		t.Errorf("check without credentials:\n%s", r)
	}
	r = np.must(0, "logout")
	if !strings.Contains(r.stderr, "no stored session") {
		t.Errorf("second logout:\n%s", r)
	}
	// The password alone still works.
	if r := h.must(0, "check"); !strings.Contains(r.stdout, "password of admin") {
		t.Errorf("check with the password:\n%s", r)
	}
}

func TestRejectedSession(t *testing.T) {
	d, h := daemon(t)
	other := strings.Repeat("ab", 32) // well-formed, unknown to the daemon

	h.must(0, "login")
	h.setToken(d.URL, other)
	r := h.must(0, "check")
	if !strings.Contains(r.stderr, "stored session was rejected") || !strings.Contains(r.stdout, "password of admin") {
		t.Errorf("check with a rejected session and a password:\n%s", r)
	}
	if _, ok := h.sessions()[d.URL]; ok {
		t.Error("the rejected session is still stored")
	}
	d.WaitLog(t, `path=/api/auth/check status=403 .*auth=cookie`, 5*time.Second)
	d.WaitLog(t, `path=/api/auth/check status=200 .*auth=xhdr`, 5*time.Second)

	// The same for info: the fallback serves every command.
	h.must(0, "login")
	h.setToken(d.URL, other)
	if r := h.must(0, "info", "--fields", "auth", "--json"); !strings.Contains(r.stdout, `"auth"`) {
		t.Errorf("info after fallback:\n%s", r)
	}

	// Without a password there is nothing to fall back to.
	h.must(0, "login")
	h.setToken(d.URL, other)
	r = h.with("KVMCTL_PASSWD").must(3, "check")
	if !strings.Contains(r.stderr, "rejected") || !strings.Contains(r.stderr, "kvmctl login") {
		t.Errorf("check with a rejected session, no password:\n%s", r)
	}
	if _, ok := h.sessions()[d.URL]; ok {
		t.Error("the rejected session is still stored")
	}

	// Logout of a session the daemon no longer has forgets it.
	h.must(0, "login")
	h.setToken(d.URL, other)
	if r := h.must(0, "logout"); !strings.Contains(r.stdout, "already ended") {
		t.Errorf("logout of a dead session:\n%s", r)
	}
	if _, ok := h.sessions()[d.URL]; ok {
		t.Error("the dead session is still stored")
	}
}

func TestInfo(t *testing.T) {
	_, h := daemon(t, "--demo")
	r := h.must(0, "info", "--fields", "hw, auth")
	for _, want := range []string{
		"auth:\n  enabled: true\n  totp: false\n",
		"\nhw:\n",
		"\n  platform:\n    type: rpi\n    base: Raspberry Pi 4 Model B Rev 1.1\n    serial: 10000000BAFB5028\n",
		"\n      functions:\n        - name: hid.usb0\n          type: hid\n          kind: keyboard\n          image: null\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("info --fields hw,auth lacks %q:\n%s", want, r.stdout)
		}
	}
	var top []string
	for l := range strings.Lines(r.stdout) {
		if !strings.HasPrefix(l, " ") {
			top = append(top, strings.TrimSpace(l))
		}
	}
	slices.Sort(top)
	if !slices.Equal(top, []string{"auth:", "hw:"}) {
		t.Errorf("top-level lines %q, want auth: and hw:", top)
	}

	r = h.must(0, "info", "--json")
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil {
		t.Fatalf("info --json is not JSON: %v\n%s", err, r.stdout)
	}
	for _, k := range []string{"system", "hw", "meta", "extras", "auth", "node", "uptime", "fan"} {
		if all[k] == nil {
			t.Errorf("info --json lacks %s", k)
		}
	}

	r = h.must(1, "info", "--fields", "hw,bogus")
	if !strings.Contains(r.stderr, "bogus") || !strings.Contains(r.stderr, "ValidatorError") || r.stdout != "" {
		t.Errorf("unknown category:\n%s", r)
	}
}

func TestLog(t *testing.T) {
	journaltest.Require(t)
	dir := t.TempDir()
	now := time.Now()
	w := journaltest.Start(t, dir, "system")
	w.Append(
		journaltest.Entry{Time: now.Add(-2 * time.Hour), Unit: "kvmd.service", Message: "two hours ago"},
		journaltest.Entry{Time: now.Add(-30 * time.Second), Unit: "kvmd.service", Message: "half a minute ago"},
	)
	w.Sync()
	_, h := daemon(t, "--journal-dir", dir)
	stamp := func(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05") }
	old := "[" + stamp(now.Add(-2*time.Hour)) + " kvmd.service] --- two hours ago\n"
	recent := "[" + stamp(now.Add(-30*time.Second)) + " kvmd.service] --- half a minute ago\n"
	if r := h.must(0, "log"); r.stdout != old+recent {
		t.Errorf("log:\n%q\nwant\n%q", r.stdout, old+recent)
	}
	if r := h.must(0, "log", "--seek", "60"); r.stdout != recent {
		t.Errorf("log --seek 60:\n%q\nwant\n%q", r.stdout, recent)
	}
	h.must(2, "log", "--seek", "-1")
	h.must(2, "log", "--seek", "soon")

	// Follow: a line appended while following arrives; Ctrl-C ends it
	// cleanly.
	cmd := h.command("log", "--seek", "60", "-f")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReader(out)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(5 * time.Second):
			t.Fatalf("no line from kvmctl log -f within 5 s; stderr: %s", stderr.String())
			return ""
		}
	}
	if l := next(); l != recent {
		t.Fatalf("follow began with %q", l)
	}
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "written while following"})
	if l := next(); !strings.HasSuffix(l, " kvmd.service] --- written while following\n") {
		t.Errorf("followed line %q", l)
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || stderr.Len() != 0 {
			t.Errorf("after Ctrl-C: %v, stderr %q; want exit 0, nothing said", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("kvmctl log -f did not end within 5 s of SIGINT")
	}
}

func TestConfigFile(t *testing.T) {
	d, h := daemon(t)
	bare := h.with("KVMCTL_URL", "KVMCTL_USER", "KVMCTL_PASSWD")
	cfg := fmt.Sprintf("url: %s\nuser: admin\npasswd: s3cret\n", d.URL)

	// The default place, under XDG_CONFIG_HOME.
	def := writeFile(t, filepath.Join(h.dir, "config", "kvmctl", "config.yaml"), cfg, 0o644)
	r := bare.must(2, "check")
	if !strings.Contains(r.stderr, "chmod 600 "+def) || !strings.Contains(r.stderr, "0644") {
		t.Errorf("a readable config file with a password:\n%s", r)
	}
	os.Chmod(def, 0o600)
	if r := bare.must(0, "check"); !strings.Contains(r.stdout, "password of admin") {
		t.Errorf("config file at 0600:\n%s", r)
	}
	// ~/.config without XDG_CONFIG_HOME.
	os.Remove(def)
	bare.must(2, "check") // no URL anywhere
	writeFile(t, filepath.Join(h.dir, ".config", "kvmctl", "config.yaml"), cfg, 0o600)
	bare.with("XDG_CONFIG_HOME").must(0, "check")

	// --config, group-readable, with only a 2FA secret.
	p := writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "url: "+d.URL+"\ntotp-secret: JBSWY3DPEHPK3PXP\n", 0o640)
	if r := bare.must(2, "--config", p, "check"); !strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("a readable config file with a 2FA secret:\n%s", r)
	}
	// Without secrets any mode will do; the credentials come from the
	// environment.
	p = writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "url: "+d.URL+"\n", 0o644)
	bare.with("KVMCTL_USER=admin", "KVMCTL_PASSWD=s3cret").must(0, "--config", p, "check")

	if r := bare.must(2, "--config", filepath.Join(t.TempDir(), "none.yaml"), "check"); !strings.Contains(r.stderr, "none.yaml") {
		t.Errorf("a missing --config file:\n%s", r)
	}
	p = writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "url: "+d.URL+"\npassword: s3cret\n", 0o600)
	if r := bare.must(2, "--config", p, "check"); !strings.Contains(r.stderr, "password") {
		t.Errorf("an unknown key:\n%s", r)
	}
}

// TestPrecedence: flags over the environment over the config file, for
// each setting. Each case gives one setting a working value at one level
// and a failing one at another.
func TestPrecedence(t *testing.T) {
	d, h := daemon(t)
	bad := closedURL(t)
	base := h.with("KVMCTL_URL", "KVMCTL_USER", "KVMCTL_PASSWD")
	for _, tc := range []struct {
		name       string
		file       string   // config file lines
		env, flags []string // KVMCTL_* variables, flags
		code       int
	}{
		{"url from file", "url: " + d.URL, nil, nil, 0},
		{"url env over file", "url: " + bad, []string{"KVMCTL_URL=" + d.URL}, nil, 0},
		{"url env over file, bad", "url: " + d.URL, []string{"KVMCTL_URL=" + bad}, nil, exitUnreachable},
		{"url flag over env", "", []string{"KVMCTL_URL=" + bad}, []string{"--url", d.URL}, 0},
		{"url flag over env, bad", "", []string{"KVMCTL_URL=" + d.URL}, []string{"--url", bad}, exitUnreachable},
		{"passwd from file", "passwd: s3cret", nil, nil, 0},
		{"passwd env over file", "passwd: wrong", []string{"KVMCTL_PASSWD=s3cret"}, nil, 0},
		{"passwd env over file, bad", "passwd: s3cret", []string{"KVMCTL_PASSWD=wrong"}, nil, exitAuth},
		{"passwd flag over env", "", []string{"KVMCTL_PASSWD=wrong"}, []string{"--passwd", "s3cret"}, 0},
		{"passwd flag over env, bad", "", []string{"KVMCTL_PASSWD=s3cret"}, []string{"--passwd", "wrong"}, exitAuth},
		{"user env over file", "user: bob", []string{"KVMCTL_USER=admin"}, nil, 0},
		{"user flag over env", "", []string{"KVMCTL_USER=bob"}, []string{"--user", "admin"}, 0},
		{"user flag over env, bad", "", []string{"KVMCTL_USER=admin"}, []string{"--user", "bob"}, exitAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Whatever a case leaves out comes from the other levels:
			// the URL from the environment, user and password from the
			// file, so that every case needs the value it tests.
			file := tc.file
			if !strings.Contains(file, "url:") && !slices.ContainsFunc(tc.env, func(s string) bool { return strings.HasPrefix(s, "KVMCTL_URL=") }) {
				tc.env = append(tc.env, "KVMCTL_URL="+d.URL)
			}
			if !strings.Contains(file, "user:") {
				file += "\nuser: admin"
			}
			if !strings.Contains(file, "passwd:") {
				file += "\npasswd: s3cret"
			}
			p := writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), file+"\n", 0o600)
			u := base.with(tc.env...)
			u.t = t
			args := append([]string{"--config", p, "check"}, tc.flags...)
			u.must(tc.code, args...)
			// A success clears the failures, so that the rate limit
			// never answers for a later case.
			h.must(0, "check")
		})
	}
}

func TestExitCodes(t *testing.T) {
	_, h := daemon(t)
	bad := h.with("KVMCTL_PASSWD=wrong")
	r := bad.must(exitAuth, "check")
	if !strings.Contains(r.stderr, "Wrong user, password, 2FA code or session") || !strings.Contains(r.stderr, "ForbiddenError") {
		t.Errorf("wrong password:\n%s", r)
	}
	bad.must(exitAuth, "login")
	// Five failures are free, the sixth blocks the address.
	for i := 0; ; i++ {
		r = bad.run("check")
		if r.code == exitRateLimited {
			break
		}
		if r.code != exitAuth || i == 10 {
			t.Fatalf("repeated wrong passwords: %s", r)
		}
	}
	if !regexp.MustCompile(`rate limited: retry in [1-9][0-9]* s`).MatchString(r.stderr) || !strings.Contains(r.stderr, "TooManyRequestsError") {
		t.Errorf("rate limited:\n%s", r)
	}

	h.with("KVMCTL_URL="+closedURL(t)).must(exitUnreachable, "check")
	h.with("KVMCTL_URL=unix:"+filepath.Join(t.TempDir(), "none.sock")).must(exitUnreachable, "info")
	h.with("KVMCTL_URL=http://nonexistent.invalid").must(exitUnreachable, "check")

	for _, args := range [][]string{
		{}, {"reboot"}, {"check", "now"}, {"--bogus", "check"}, {"info", "--follow"},
		{"--url", "ftp://x", "check"}, {"log", "--seek"},
	} {
		if r := h.run(args...); r.code != exitUsage || !strings.Contains(r.stderr, "kvmctl --help") {
			t.Errorf("kvmctl %q: want exit 2 and a pointer to --help, got %s", args, r)
		}
	}
	h.with("KVMCTL_URL").must(exitUsage, "check")

	// Ctrl-C while waiting for a device that does not answer: 130.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	cmd := h.with("KVMCTL_URL=http://" + ln.Addr().String()).command("check")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("kvmctl did not connect")
	}
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	if cmd.ProcessState.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("Ctrl-C during check: %v, stderr %q; want exit 130", err, stderr.String())
	}
	h.with("KVMCTL_USER").must(exitUsage, "login")

	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"info", "--help"}} {
		r := h.must(0, args...)
		for _, want := range []string{"Exit status:", "\n  3    authentication failed", "\n  4    rate limited", "\n  5    the device is unreachable", "Discouraged"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("kvmctl %q lacks %q", args, want)
			}
		}
	}
}

func TestTOTP(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	path, secret := clienttest.TOTPSecret(t)
	d := clienttest.Start(t, kvmdBin, nil, "--users", users, "--totp-secret", path)
	h := newHome(t).with("KVMCTL_URL="+d.URL, "KVMCTL_USER=admin", "KVMCTL_PASSWD=s3cret")

	r := h.must(exitAuth, "check")
	if !strings.Contains(r.stderr, "ForbiddenError") {
		t.Errorf("2FA on, no secret:\n%s", r)
	}
	// As an authenticator app shows it: lower case, in groups.
	spaced := strings.ToLower(secret[:4] + " " + secret[4:8] + " " + secret[8:])
	tfa := h.with("KVMCTL_TOTP_SECRET=" + spaced)
	if r := tfa.must(0, "check"); !strings.Contains(r.stdout, "password of admin") {
		t.Errorf("check with 2FA:\n%s", r)
	}
	tfa.must(0, "login")
	if r := h.with("KVMCTL_PASSWD").must(0, "check"); !strings.Contains(r.stdout, "stored session") {
		t.Errorf("session after a 2FA login:\n%s", r)
	}
	// The code comes from the secret: another secret's codes fail (in a
	// home without the stored session).
	fresh := newHome(t).with("KVMCTL_URL="+d.URL, "KVMCTL_USER=admin", "KVMCTL_PASSWD=s3cret")
	fresh.with("KVMCTL_TOTP_SECRET=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP").must(exitAuth, "info")
	if r := fresh.with("KVMCTL_TOTP_SECRET=not base32!").must(exitError, "login"); !strings.Contains(r.stderr, "not base32") {
		t.Errorf("a broken secret:\n%s", r)
	}
}

func TestTLS(t *testing.T) {
	cert, key := selfSigned(t)
	d, h := daemon(t, "--tls-cert", cert, "--tls-key", key)
	h = h.with("KVMCTL_URL=https://" + d.Addr)
	r := h.must(exitError, "check")
	if !strings.Contains(r.stderr, "--insecure") || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("self-signed without --insecure:\n%s", r)
	}
	h.must(0, "--insecure", "check")
	h.must(0, "check", "--insecure")
	p := writeFile(t, filepath.Join(t.TempDir(), "c.yaml"), "insecure: true\n", 0o600)
	h.must(0, "--config", p, "check")
	h.must(exitError, "--config", p, "--insecure=false", "check")
	// A login over TLS gets a Secure cookie; the stored session works.
	h.must(0, "--insecure", "login")
	h.with("KVMCTL_PASSWD").must(0, "--insecure", "check")
}

func TestUnixSocket(t *testing.T) {
	g, err := user.LookupGroupId(fmt.Sprint(os.Getgid()))
	if err != nil {
		t.Skip(err)
	}
	sock := filepath.Join(t.TempDir(), "kvmd.sock")
	_, h := daemon(t, "--listen", "unix:"+sock, "--unix-group", g.Name)
	u := h.with("KVMCTL_URL=unix:"+sock, "KVMCTL_USER", "KVMCTL_PASSWD")
	if r := u.must(0, "check"); !strings.Contains(r.stdout, "no credentials needed") {
		t.Errorf("check over the socket:\n%s", r)
	}
	if r := u.must(0, "info", "--fields", "auth", "--json"); !strings.Contains(r.stdout, `"auth"`) {
		t.Errorf("info over the socket:\n%s", r)
	}
	// With a password, the password decides: a wrong one fails.
	u.with("KVMCTL_USER=admin", "KVMCTL_PASSWD=wrong").must(exitAuth, "check")
	// Sessions work there too.
	u.with("KVMCTL_USER=admin", "KVMCTL_PASSWD=s3cret").must(0, "login")
	if _, ok := u.sessions()["unix:"+sock]; !ok {
		t.Error("no session stored for the socket's URL")
	}
}
