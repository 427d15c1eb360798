package imagetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
)

// testFirstboot: kvmd-firstboot.service ran at the first boot, before
// the login prompt, and the banner's password is the one it stored.
func (s *system) testFirstboot(t *testing.T) {
	sh := s.m.shell
	stored := strings.TrimSpace(sh.must(t, "cat /var/lib/kvmd/admin-password"))
	if stored != s.passwd {
		t.Errorf("the banner shows %q, /var/lib/kvmd/admin-password holds %q", s.passwd, stored)
	}
	p := s.props(t, "kvmd-firstboot.service", "ActiveState", "Result", "ExecMainStatus")
	if p["ActiveState"] != "active" || p["Result"] != "success" || p["ExecMainStatus"] != "0" {
		t.Errorf("kvmd-firstboot.service: %v", p)
	}
	// Owners and modes as the manual's table has them, on the booted
	// system (after kvmd.service started).
	want := docModes(t)
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	out := sh.must(t, "stat -c '%n %U:%G %a' "+strings.Join(paths, " "))
	for _, l := range strings.Split(out, "\n") {
		name, got, _ := strings.Cut(l, " ")
		if want[name] != got {
			t.Errorf("%s: %s, want %s", name, got, want[name])
		}
	}
	// Running it again changes nothing.
	if out := sh.must(t, "kvmd firstboot"); !strings.Contains(out, "nothing changed") {
		t.Errorf("kvmd firstboot on the provisioned system:\n%s", out)
	}
}

// testUnits: the socket passed its sockets to a Type=notify service that
// came up, with the watchdog, and nothing in the system failed.
func (s *system) testUnits(t *testing.T) {
	sh := s.m.shell
	p := s.props(t, "kvmd.service", "Type", "NotifyAccess", "ActiveState", "SubState", "WatchdogUSec",
		"NRestarts", "TriggeredBy", "User", "StatusErrno")
	want := map[string]string{
		"Type": "notify", "NotifyAccess": "main", "ActiveState": "active", "SubState": "running",
		"WatchdogUSec": "30s", "NRestarts": "0", "TriggeredBy": "kvmd.socket", "User": "kvmd",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("kvmd.service %s=%q, want %q", k, p[k], v)
		}
	}
	p = s.props(t, "kvmd.socket", "ActiveState", "SubState", "Listen")
	if p["ActiveState"] != "active" || p["SubState"] != "running" ||
		!strings.Contains(p["Listen"], "[::]:443 (Stream)") || !strings.Contains(p["Listen"], "/run/kvmd/kvmd.sock (Stream)") {
		t.Errorf("kvmd.socket: %v", p)
	}
	// As kvmd.socket made them, after the daemon started.
	if out := sh.must(t, "stat -c '%n %U:%G %a' /run/kvmd /run/kvmd/kvmd.sock"); out != "/run/kvmd root:root 755\n/run/kvmd/kvmd.sock root:kvmd 660" {
		t.Errorf("want /run/kvmd root:root 755, /run/kvmd/kvmd.sock root:kvmd 660; got\n%s", out)
	}
	// The daemon took the sockets from systemd and said so.
	log := sh.must(t, "journalctl -b -o cat _SYSTEMD_UNIT=kvmd.service")
	if !strings.Contains(log, "using sockets passed by systemd; --listen ignored count=2") {
		t.Errorf("the daemon's log does not say it took the 2 sockets from systemd:\n%s", log)
	}
	// The whole boot: no unit failed.
	state, _ := sh.run(t, "systemctl is-system-running --wait")
	if state != "running" {
		failed, _ := sh.run(t, "systemctl --failed --no-legend --plain; journalctl -b -p warning -o short-monotonic | tail -40")
		t.Errorf("systemctl is-system-running: %q\n%s", state, failed)
	}
}

// testInfo: /api/info read through the unit's sandbox equals what root
// reads from the same files outside it.
func (s *system) testInfo(t *testing.T) {
	sh := s.m.shell
	var info struct {
		System struct {
			KVMD struct {
				Version string `json:"version"`
			} `json:"kvmd"`
			Kernel map[string]string `json:"kernel"`
		} `json:"system"`
		HW struct {
			Platform map[string]*string `json:"platform"`
			Health   struct {
				Temp struct {
					CPU *float64 `json:"cpu"`
				} `json:"temp"`
				CPU struct {
					Percent *int `json:"percent"`
				} `json:"cpu"`
				Mem struct {
					Percent   *float64 `json:"percent"`
					Total     *int64   `json:"total"`
					Available *int64   `json:"available"`
				} `json:"mem"`
				Throttling any `json:"throttling"`
			} `json:"health"`
			GPIO map[string]any `json:"gpio"`
			USB  struct {
				UDC       *string `json:"udc"`
				Connected bool    `json:"connected"`
				Gadget    any     `json:"gadget"`
				Status    string  `json:"status"`
			} `json:"usb"`
			Video any `json:"video"`
		} `json:"hw"`
		Node struct {
			Host string `json:"host"`
		} `json:"node"`
		Uptime struct {
			Total *float64 `json:"total"`
		} `json:"uptime"`
		Auth struct {
			Enabled bool `json:"enabled"`
			TOTP    bool `json:"totp"`
		} `json:"auth"`
	}
	s.getJSON(t, "/api/info", &info)
	guestUptime := sh.must(t, "cut -d' ' -f1 /proc/uptime")

	if s.version != "" && info.System.KVMD.Version != s.version {
		t.Errorf("system.kvmd.version %q, want %q", info.System.KVMD.Version, s.version)
	}
	uname := strings.Split(sh.must(t, "uname -s; uname -r; uname -v; uname -m"), "\n")
	for i, k := range []string{"system", "release", "version", "machine"} {
		if i >= len(uname) || info.System.Kernel[k] != uname[i] {
			t.Errorf("system.kernel.%s %q, uname says %q", k, info.System.Kernel[k], uname)
		}
	}
	if info.Node.Host != "kvmd" {
		t.Errorf("node.host %q, want kvmd", info.Node.Host)
	}
	// qemu's virt board: not a Raspberry Pi, no thermal zone, no firmware
	// throttling flags. Its USB device controller and capture device are
	// the test's (dummy_hcd, vivid), checked by testGadget and testVideo.
	if got := info.HW.Platform["type"]; got == nil || *got != "generic" {
		t.Errorf("hw.platform.type %v, want generic", got)
	}
	model, st := sh.run(t, "tr -d '\\0' </proc/device-tree/model")
	if st == 0 {
		if got := info.HW.Platform["base"]; got == nil || *got != model {
			t.Errorf("hw.platform.base %v, the device tree's model is %q", got, model)
		}
	} else if got := info.HW.Platform["base"]; got != nil {
		t.Errorf("hw.platform.base %q without a device-tree model", *got)
	}
	if _, st := sh.run(t, "ls -d /sys/class/thermal/thermal_zone*"); st != 0 && info.HW.Health.Temp.CPU != nil {
		t.Errorf("hw.health.temp.cpu %v without a thermal zone", *info.HW.Health.Temp.CPU)
	}
	if info.HW.Health.Throttling != nil {
		t.Errorf("throttling %v: want null on qemu's virt board", info.HW.Health.Throttling)
	}
	// Memory and CPU: what the VM has.
	memTotal := sh.must(t, "awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo")
	if m := info.HW.Health.Mem; m.Total == nil || strconv.FormatInt(*m.Total, 10) != memTotal ||
		m.Available == nil || *m.Available <= 0 || *m.Available > *m.Total || m.Percent == nil {
		t.Errorf("hw.health.mem %+v, MemTotal is %s bytes", m, memTotal)
	}
	if p := info.HW.Health.CPU.Percent; p == nil || *p < 0 || *p > 100 {
		t.Errorf("hw.health.cpu.percent %v", p)
	}
	up, _ := strconv.ParseFloat(guestUptime, 64)
	if info.Uptime.Total == nil || math.Abs(*info.Uptime.Total-up) > 30 {
		t.Errorf("uptime.total %v, /proc/uptime %s", info.Uptime.Total, guestUptime)
	}
	if !info.Auth.Enabled || info.Auth.TOTP {
		t.Errorf("auth %+v, want enabled, no 2FA", info.Auth)
	}
	// The sandbox hides nothing /api/info reads: the daemon logged no
	// read errors.
	if log := sh.must(t, "journalctl -b -o cat -p warning _SYSTEMD_UNIT=kvmd.service"); log != "" {
		t.Errorf("the daemon logged warnings:\n%s", log)
	}
}

// logLineRe is one /api/log line (docs/api.md, "Service log").
var logLineRe = regexp.MustCompile(`^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (kvmd[a-z-]*\.service)\] --- (.*)$`)

// mark makes the daemon log a line with a unique path: an authenticated
// request for a path that does not exist (404), in the access log.
func (s *system) mark(t *testing.T, name string) string {
	t.Helper()
	path := fmt.Sprintf("/api/imagetest-%s-%d", name, time.Now().UnixNano())
	if st, _, err := s.c.do("GET", path, s.creds(t), nil); err != nil || st != 404 {
		t.Fatalf("GET %s: %d %v", path, st, err)
	}
	return path
}

// getLog reads /api/log with query q.
func (s *system) getLog(t *testing.T, q string) []string {
	t.Helper()
	resp, err := s.c.request(context.Background(), "GET", "/api/log"+q, s.creds(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("GET /api/log%s: %d %s", q, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ls := lines(resp.Body)
	for _, l := range ls {
		if !logLineRe.MatchString(l) && !strings.HasPrefix(l, " ") && l != "" {
			// Continuation lines of multi-line messages are the only others.
			t.Logf("log line not in kvmd's format (a continuation?): %q", l)
		}
	}
	return ls
}

func containsSuffix(ls []string, sub string) bool {
	for _, l := range ls {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// testLog: /api/log reads the live system journal as the sandboxed
// daemon: its own entries and firstboot's, seek, follow.
func (s *system) testLog(t *testing.T) {
	sh := s.m.shell
	first := s.mark(t, "first")
	// Every entry the journal holds for the two units, by root's
	// journalctl, is in the daemon's answer.
	journal := sh.must(t, "journalctl -b -o cat _SYSTEMD_UNIT=kvmd.service + _SYSTEMD_UNIT=kvmd-firstboot.service")
	all := s.getLog(t, "?seek=0")
	byUnit := map[string]int{}
	for _, l := range all {
		if m := logLineRe.FindStringSubmatch(l); m != nil {
			byUnit[m[1]]++
		}
	}
	if byUnit["kvmd.service"] == 0 || byUnit["kvmd-firstboot.service"] == 0 {
		t.Errorf("/api/log?seek=0 has %v entries by unit; want both units'", byUnit)
	}
	for _, msg := range strings.Split(journal, "\n") {
		if msg = strings.TrimRight(msg, " \t"); msg != "" && !containsSuffix(all, "--- "+msg) && !containsSuffix(all, msg) {
			t.Errorf("journalctl shows %q, /api/log?seek=0 does not", msg)
		}
	}
	for _, want := range []string{"created /etc/kvmd/htpasswd", "kvmd listening", first} {
		if !containsSuffix(all, want) {
			t.Errorf("/api/log?seek=0 lacks %q", want)
		}
	}

	// seek=N: N seconds back. The first mark is older than 8 s, the
	// second newer than 4.
	time.Sleep(8 * time.Second)
	second := s.mark(t, "second")
	recent := s.getLog(t, "?seek=4")
	if !containsSuffix(recent, second) || containsSuffix(recent, first) || containsSuffix(recent, "kvmd listening") {
		t.Errorf("/api/log?seek=4 should hold %s and not %s:\n%s", second, first, strings.Join(recent, "\n"))
	}

	// follow: a new entry arrives on the open stream.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := s.c.stream(ctx, "/api/log?follow=1&seek=1", s.creds(t))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/log?follow=1: %v %v", resp, err)
	}
	got := make(chan string, 100)
	go func() {
		defer close(got)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			got <- sc.Text()
		}
	}()
	// The stream is open when journalctl runs for the daemon.
	if !waitFor(ctx, 30*time.Second, 200*time.Millisecond, func() bool {
		out, _ := sh.run(t, "pgrep -u kvmd -x journalctl")
		return out != ""
	}) {
		t.Fatal("no journalctl of the daemon's while following")
	}
	third := s.mark(t, "follow")
	sent := time.Now()
	deadline := time.After(20 * time.Second)
	for seen := false; !seen; {
		select {
		case l, ok := <-got:
			if !ok {
				t.Fatal("the follow stream ended")
			}
			seen = strings.Contains(l, third)
		case <-deadline:
			t.Fatalf("%s not on the follow stream within 20 s", third)
		}
	}
	t.Logf("follow: the entry arrived %v after the request's answer", time.Since(sent).Round(time.Millisecond))
	cancel()
	resp.Body.Close()
	// Closing the stream ends its journalctl.
	if !waitFor(context.Background(), 20*time.Second, 500*time.Millisecond, func() bool {
		out, _ := sh.run(t, "pgrep -u kvmd -x journalctl")
		return out == ""
	}) {
		t.Error("the daemon's journalctl still runs 20 s after the follow stream closed")
	}
}

// testWebEdits: through the unit's sandbox the daemon edits the files in
// /etc/kvmd, as the web UI's Users, Tokens and 2FA pages have it do: a
// token made and revoked, a user added and removed, each taking effect at
// once, the files left whole and the daemon's group's.
func (s *system) testWebEdits(t *testing.T) {
	sh := s.m.shell
	post := func(method, path, body string, hdr map[string]string) []byte {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range hdr {
			h[k] = v
		}
		st, b, err := s.c.do(method, path, h, strings.NewReader(body))
		if err != nil || st != 200 {
			t.Fatalf("%s %s: %d %v %s", method, path, st, err, b)
		}
		return b
	}
	check := func(hdr map[string]string) int {
		st, _, _ := s.c.do("GET", "/api/auth/check", hdr, nil)
		return st
	}

	b := post("POST", "/api/auth/tokens", `{"name":"imagetest","role":"viewer"}`, s.creds(t))
	var made struct {
		Result struct {
			Token string `json:"token"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &made); err != nil || !strings.HasPrefix(made.Result.Token, "kvmd_") {
		t.Fatalf("POST /api/auth/tokens: %v %s", err, b)
	}
	bearer := map[string]string{"Authorization": "Bearer " + made.Result.Token}
	if st := check(bearer); st != 200 {
		t.Errorf("the new token: %d, want 200", st)
	}
	post("POST", "/api/auth/users", `{"name":"webuser","passwd":"web pass 1","role":"viewer"}`, s.creds(t))
	webuser := map[string]string{"X-KVMD-User": "webuser", "X-KVMD-Passwd": "web pass 1"}
	if st := check(webuser); st != 200 {
		t.Errorf("the user added through the API: %d, want 200", st)
	}
	if st, _, _ := s.c.do("GET", "/api/diagnostics", webuser, nil); st != 403 {
		t.Errorf("the viewer added through the API, GET /api/diagnostics: %d, want 403", st)
	}
	// As root reads them: the daemon's edits are on disk, in the daemon's
	// group, the files it made beside the users file with its mode.
	if out := sh.must(t, "stat -c '%n %G %a' /etc/kvmd/htpasswd /etc/kvmd/htpasswd.roles /etc/kvmd/htpasswd.tokens"); out !=
		"/etc/kvmd/htpasswd kvmd 640\n/etc/kvmd/htpasswd.roles kvmd 640\n/etc/kvmd/htpasswd.tokens kvmd 640" {
		t.Errorf("the files the daemon wrote:\n%s", out)
	}
	if out := sh.must(t, "grep -c '^webuser:' /etc/kvmd/htpasswd; grep -c '^admin:imagetest:viewer:' /etc/kvmd/htpasswd.tokens"); out != "1\n1" {
		t.Errorf("the user and the token in the files: %q", out)
	}

	post("DELETE", "/api/auth/users?name=webuser", "", s.creds(t))
	if st := check(webuser); st == 200 {
		t.Error("the user removed through the API still gets in")
	}
	post("DELETE", "/api/auth/tokens?name=imagetest", "", s.creds(t))
	if st := check(bearer); st != 403 {
		t.Errorf("the revoked token: %d, want 403", st)
	}
	if out := sh.must(t, "ls -A /etc/kvmd"); strings.Contains(out, ".tmp") {
		t.Errorf("temporary files left in /etc/kvmd:\n%s", out)
	}
	if log := sh.must(t, "journalctl -b -o cat -u kvmd.service"); strings.Contains(log, "cannot be written") || strings.Contains(log, "read-only file system") {
		t.Errorf("the daemon could not write its files:\n%s", tail(log, 3000))
	}
}

// testCredentials: the daemon as shipped (User=kvmd, ProtectSystem=strict,
// /etc/kvmd root:kvmd) follows the credential files that root's commands
// write, by inotify, with no request: a token made with kvmd token add lets
// in; kvmd token del ends a log follow it holds open; a user added with a
// role (a change of two files, through FILE.pending, made by root) is that
// role; nothing is left pending.
func (s *system) testCredentials(t *testing.T) {
	sh := s.m.shell
	tok := strings.TrimSpace(sh.must(t, "kvmd token add booted --user admin --role viewer --users /etc/kvmd/htpasswd 2>/dev/null"))
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !waitFor(ctx, 5*time.Second, 20*time.Millisecond, func() bool {
		st, _, _ := s.c.do("GET", "/api/auth/check", bearer, nil)
		return st == 200
	}) {
		t.Fatal("the token made by root is not accepted")
	}
	resp, err := s.c.stream(ctx, "/api/log?follow=1&seek=60", bearer)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("follow with the token: %v %v", resp, err)
	}
	ended := make(chan time.Time, 1)
	go func() {
		io.Copy(io.Discard, resp.Body)
		ended <- time.Now()
	}()
	time.Sleep(time.Second)
	start := time.Now()
	sh.must(t, "kvmd token del booted --user admin --users /etc/kvmd/htpasswd")
	select {
	case at := <-ended:
		// Under TCG: the shell's round trip and the command's own start
		// are in it.
		t.Logf("kvmd token del sent to the follow's end: %v", at.Sub(start).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the log follow of a token revoked by kvmd token del is still open 5 s later")
	}

	sh.must(t, "echo 'eve pass 1' | kvmd user add eve --role viewer --users /etc/kvmd/htpasswd")
	eve := map[string]string{"X-KVMD-User": "eve", "X-KVMD-Passwd": "eve pass 1"}
	if !waitFor(ctx, 5*time.Second, 20*time.Millisecond, func() bool {
		st, _, _ := s.c.do("GET", "/api/auth/check", eve, nil)
		return st == 200
	}) {
		t.Fatal("eve, added by root, is not accepted")
	}
	if st, _, _ := s.c.do("GET", "/api/auth/users", eve, nil); st != 403 {
		t.Errorf("eve, added as a viewer, GET /api/auth/users: %d, want 403", st)
	}
	sh.must(t, "kvmd user del eve --users /etc/kvmd/htpasswd")
	if out := sh.must(t, "ls -A /etc/kvmd"); strings.Contains(out, ".pending") || strings.Contains(out, ".tmp") {
		t.Errorf("left in /etc/kvmd:\n%s", out)
	}
	if log := sh.must(t, "journalctl -b -o cat -u kvmd.service"); strings.Contains(log, "credential files polled") {
		t.Errorf("the daemon polls instead of watching:\n%s", tail(log, 3000))
	}
}

// testWatchdog: a daemon that stops answering (SIGSTOP) is killed by the
// watchdog and started again.
func (s *system) testWatchdog(t *testing.T, fig *figures) {
	sh := s.m.shell
	pid := s.mainPID(t)
	before := s.props(t, "kvmd.service", "NRestarts")["NRestarts"]
	sh.must(t, fmt.Sprintf("kill -STOP %d", pid))
	stopped := time.Now()
	var newPID int
	if !waitFor(context.Background(), watchdogTimeout+watchdogMargin, time.Second, func() bool {
		p := s.props(t, "kvmd.service", "MainPID", "ActiveState", "SubState")
		newPID, _ = strconv.Atoi(p["MainPID"])
		return newPID != 0 && newPID != pid && p["ActiveState"] == "active" && p["SubState"] == "running"
	}) {
		t.Fatalf("kvmd (PID %d) stopped with SIGSTOP was not restarted within %v", pid, watchdogTimeout+watchdogMargin)
	}
	fig.watchdogRestart = time.Since(stopped)
	if st, _, err := s.c.do("GET", "/api/auth/check", s.creds(t), nil); err != nil || st != 200 {
		t.Errorf("after the restart: %d %v", st, err)
	}
	after := s.props(t, "kvmd.service", "NRestarts")["NRestarts"]
	if b, _ := strconv.Atoi(before); after != strconv.Itoa(b+1) {
		t.Errorf("NRestarts %s -> %s, want one more", before, after)
	}
	log := sh.must(t, "journalctl -b -o cat -u kvmd.service")
	if !strings.Contains(log, "Watchdog timeout") {
		t.Errorf("systemd did not log a watchdog timeout:\n%s", tail(log, 3000))
	}
	t.Logf("SIGSTOP to restarted and running: %v (WatchdogSec=%v)", fig.watchdogRestart.Round(time.Second), watchdogTimeout)
}

// testReboot: users, the 2FA secret, the certificate, the password and an
// image whose upload was answered survive a power cut (sysrq b resets the
// guest at once, its page cache lost, nothing synced) right after the
// last of them was written; sessions do not. A power cut rather than a
// clean reboot: it proves all that a reboot would, and more, for the one
// boot (the clean shutdown is poweroff's).
func (s *system) testReboot(t *testing.T, fig *figures) {
	sh := s.m.shell
	sh.must(t, "kvmd totp init --secret /etc/kvmd/totp.secret >/dev/null")
	s.totp = strings.TrimSpace(sh.must(t, "cat /etc/kvmd/totp.secret"))
	sh.must(t, "echo 'operator pass 1' | kvmd user add operator --users /etc/kvmd/htpasswd")
	// The daemon takes both without a restart.
	code, _ := totp.GenerateCode(s.totp, time.Now())
	if !waitFor(context.Background(), 10*time.Second, 500*time.Millisecond, func() bool {
		code, _ = totp.GenerateCode(s.totp, time.Now())
		st, _, _ := s.c.do("GET", "/api/auth/check", map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator pass 1" + code}, nil)
		return st == 200
	}) {
		t.Fatal("the new user with the 2FA code is not accepted")
	}
	if st, _, _ := s.c.do("GET", "/api/auth/check", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": s.passwd}, nil); st != 403 {
		t.Fatalf("with 2FA on, the password without the code: %d, want 403", st)
	}
	cookie := s.login(t, "admin", s.passwd+code)
	withCookie := map[string]string{"Cookie": cookie.String()}
	if st, _, _ := s.c.do("GET", "/api/auth/check", withCookie, nil); st != 200 {
		t.Fatalf("the session cookie: %d", st)
	}
	const files = "/etc/kvmd/htpasswd /etc/kvmd/totp.secret /etc/kvmd/tls.key /etc/kvmd/tls.crt /etc/kvmd/kvmd.yaml /var/lib/kvmd/secret /var/lib/kvmd/admin-password"
	sums := sh.must(t, "sha256sum "+files)

	image := s.uploadBeforePowerCut(t)

	mark := s.m.console.Len()
	rebooted := time.Now()
	// The shell goes with the machine: no end marker comes.
	sh.runTimeout("echo b > /proc/sysrq-trigger", 5*time.Second)
	// The old daemon is gone once the machine restarts; wait for the new
	// boot's prompt and the new daemon.
	if _, err := s.m.console.expect(mark, regexp.MustCompile(`Booting Linux(?s:.*)`+loginRe.String()), bootTimeout); err != nil {
		t.Fatalf("no boot after the power cut: %v", err)
	}
	if !waitFor(context.Background(), bootTimeout, 250*time.Millisecond, s.c.answers) {
		t.Fatal("kvmd does not answer after the power cut")
	}
	fig.rebootToAnswer = time.Since(rebooted)
	if err := sh.ready(2 * time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("power cut to kvmd answering: %v", fig.rebootToAnswer.Round(100*time.Millisecond))
	s.checkAfterPowerCut(t, image)

	if got := sh.must(t, "sha256sum "+files); got != sums {
		t.Errorf("files changed across the reboot:\nbefore\n%s\nafter\n%s", sums, got)
	}
	if st, body, _ := s.c.do("GET", "/api/auth/check", withCookie, nil); st != 403 {
		t.Errorf("the session cookie from before the reboot: %d %s, want 403", st, body)
	}
	if st, _, _ := s.c.do("GET", "/api/auth/check", s.creds(t), nil); st != 200 {
		t.Errorf("admin with password and code after the reboot: %d", st)
	}
	code, _ = totp.GenerateCode(s.totp, time.Now())
	if st, _, _ := s.c.do("GET", "/api/auth/check", map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator pass 1" + code}, nil); st != 200 {
		t.Errorf("operator with password and code after the reboot: %d", st)
	}
	if st, _, _ := s.c.do("GET", "/api/auth/check", map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator pass 1"}, nil); st != 403 {
		t.Errorf("operator without the code after the reboot: %d, want 403", st)
	}
	var a struct {
		Auth struct{ TOTP bool } `json:"auth"`
	}
	s.getJSON(t, "/api/info?fields=auth", &a)
	if !a.Auth.TOTP {
		t.Error("auth.totp false after the reboot")
	}
	// The password is unchanged, so the banner is still shown.
	if _, err := s.m.console.expect(mark, regexp.MustCompile(`Booting Linux(?s:.*)`+regexp.QuoteMeta("password "+s.passwd)), time.Second); err != nil {
		t.Errorf("the second boot's console: %v", err)
	}
}

// testUpgrade: apt installing the package again on the running system,
// as an upgrade does on Raspberry Pi OS: the postinst's running-system
// branch changes nothing provisioned and restarts the daemon.
func (s *system) testUpgrade(t *testing.T) {
	sh := s.m.shell
	pid := s.mainPID(t)
	const files = "/etc/kvmd/htpasswd /etc/kvmd/totp.secret /etc/kvmd/tls.key /var/lib/kvmd/admin-password"
	sums := sh.must(t, "sha256sum "+files)
	out := sh.must(t, "mkdir -p /run/kvmd-imagetest && mount -t 9p -o trans=virtio,version=9p2000.L,ro kvmd /run/kvmd-imagetest && "+
		"cd /run/kvmd-imagetest && DEBIAN_FRONTEND=noninteractive apt install -y --reinstall ./kvmd_*.deb; st=$?; cd /; umount /run/kvmd-imagetest; exit $st")
	if !strings.Contains(out, "nothing changed") {
		t.Errorf("apt install on the running system: the postinst's kvmd firstboot did not say nothing changed:\n%s", out)
	}
	if got := sh.must(t, "sha256sum "+files); got != sums {
		t.Errorf("the upgrade changed provisioned files:\n%s\n%s", sums, got)
	}
	if newPID := s.mainPID(t); newPID == pid || newPID == 0 {
		t.Errorf("the daemon was not restarted by the upgrade (PID %d, then %d)", pid, newPID)
	}
	if st, _, err := s.c.do("GET", "/api/auth/check", s.creds(t), nil); err != nil || st != 200 {
		t.Errorf("after the upgrade: %d %v", st, err)
	}
}

// testStop: systemctl stop ends the daemon cleanly, and the socket starts
// it again on the next connection.
func (s *system) testStop(t *testing.T) {
	sh := s.m.shell
	sh.must(t, "systemctl stop kvmd.service")
	p := s.props(t, "kvmd.service", "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
	// ExecMainCode 1 is CLD_EXITED: it exited rather than being killed.
	if p["ActiveState"] != "inactive" || p["Result"] != "success" || p["ExecMainCode"] != "1" || p["ExecMainStatus"] != "0" {
		t.Errorf("after systemctl stop: %v", p)
	}
	if out, _ := sh.run(t, "systemctl is-failed kvmd.service"); out != "inactive" {
		t.Errorf("systemctl is-failed kvmd.service: %q", out)
	}
	log := sh.must(t, "journalctl -b -o cat _SYSTEMD_UNIT=kvmd.service | tail -3")
	if !strings.Contains(log, "shutting down") {
		t.Errorf("the daemon's last words:\n%s", log)
	}
	// The socket stayed; the next request starts the daemon.
	if st, _, err := s.c.do("GET", "/api/auth/check", s.creds(t), nil); err != nil || st != 200 {
		t.Errorf("a request after the stop: %d %v", st, err)
	}
	if p := s.props(t, "kvmd.service", "ActiveState"); p["ActiveState"] != "active" {
		t.Errorf("kvmd.service after a request on the socket: %v", p)
	}
}

// testPoweroff: the system shuts down cleanly, the daemon with it.
func (s *system) testPoweroff(t *testing.T) {
	mark := s.m.console.Len()
	s.m.shell.runTimeout("systemctl poweroff", 5*time.Second)
	if err := s.m.wait(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	con := s.m.console.String()[mark:]
	if strings.Contains(con, "Failed") || !strings.Contains(con, "reboot: Power down") {
		t.Errorf("shutdown:\n%s", tail(con, 3000))
	}
}

// readGuestBootTimes reads systemd's own account of the boot and the
// daemon's start (exec to READY=1).
func (f *figures) readGuestBootTimes(t *testing.T, sh *shell) {
	t.Helper()
	f.guestKernel = sh.must(t, "uname -r")
	// Before every job has finished (under load) systemd-analyze says so
	// on several lines of stderr, which must not end up in a table row.
	out, _ := sh.run(t, "systemd-analyze time 2>/dev/null | head -1")
	f.guestStartup = strings.TrimPrefix(out, "Startup finished in ")
	if out == "" {
		f.guestStartup = "not finished when asked (systemd still had jobs)"
	}
	p := map[string]string{}
	for _, l := range strings.Split(sh.must(t, "systemctl show kvmd.service -p ExecMainStartTimestampMonotonic -p ActiveEnterTimestampMonotonic"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			p[k] = v
		}
	}
	a, _ := strconv.ParseInt(p["ExecMainStartTimestampMonotonic"], 10, 64)
	b, _ := strconv.ParseInt(p["ActiveEnterTimestampMonotonic"], 10, 64)
	f.daemonStart = time.Duration(b-a) * time.Microsecond
}
