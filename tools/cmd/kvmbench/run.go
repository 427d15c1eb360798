package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"kvmd/internal/procgroup"
	"kvmd/internal/sleep"
)

// runConfig is everything `kvmbench run` needs.
type runConfig struct {
	KVMD     string // kvmd binary under test
	Self     string // this binary, exec'd for the baseline server
	Rounds   int
	Duration time.Duration
	Warmup   time.Duration
	Conns    int
	Out      string // BENCHMARKS.md to write, or ""

	CPURounds   int // rounds of the CPU-per-request pairs; 0 skips them
	CPURequests int // requests per CPU measurement

	// GoBench and GoBenchBefore are `go test -bench -benchmem` outputs
	// (BenchmarkRequest in package httpd) whose allocations the report
	// gives: this checkout's, and an earlier one's to compare. "": none.
	GoBench, GoBenchBefore string

	Starts int           // start-to-listening samples
	Idle   time.Duration // idle time before reading RSS

	LogEntries int // journal entries for the log seek rows; 0 skips the log rows
	LogSamples int // follow latency samples

	UILoads int // counted loads of each web UI page; 0 skips the web UI rows

	WSClients int // /api/ws clients connected at once; 0 skips the /api/ws rows
	WSSamples int // power clicks timed through /api/ws

	Stress bool // the "Under load" section: idle connections, logins under a flood, one viewer's streams
	Attack bool // the "Under attack" section: unauthenticated bodies, a print's memory, revocation, one viewer's long requests

	Diag bool // the diagnostics bundle row

	MSD    bool // the virtual media upload rows
	MSDMiB int  // the image's size for them, MiB

	Video bool // the picture's rows: latency, bitrate, CPU and memory of MJPEG, Direct H.264 and WebRTC

	ARMDir         string        // where kvmd-linux-ARCH are; "" skips the qemu section
	ARMBaselineDir string        // where kvmbench-linux-ARCH are: beside this binary
	QemuIdle       time.Duration // idle time under qemu before reading RSS
	Only           string        // "qemu", "ui": only that section, to stdout

	// Release and ReleaseDir are the release builds whose sizes the
	// report gives (kvmd and DIR/kvmd-linux-ARCH): the measured ones are
	// demo builds, for --demo. Empty: KVMD and ARMDir.
	Release    string
	ReleaseDir string

	CommandLine string // as typed, for the report
	ViaMake     bool   // run from a Makefile recipe
}

func defaultRunConfig() runConfig {
	return runConfig{
		Rounds:   5,
		Duration: 3 * time.Second,
		Warmup:   500 * time.Millisecond,
		Conns:    4,
		Starts:   5,

		CPURounds:   7,
		CPURequests: 30000,

		Idle: time.Second,

		LogEntries: 1_000_000,
		LogSamples: 100,

		UILoads: 20,

		WSClients: 100,
		WSSamples: 10,

		Stress: true,
		Attack: true,
		Diag:   true,
		MSD:    true,
		MSDMiB: 1024,
		Video:  true,

		QemuIdle: 2 * time.Second,
	}
}

// scenario is one row of the table: a raw request sent in a closed loop to
// a server. Adding a row (another path, another server) is adding one of these.
type scenario struct {
	Name       string
	Addr       string
	Request    []byte
	WantStatus int
	// MinRatio is the target: median req/s at least this times the
	// reference's. 0 means no target.
	MinRatio float64
	// Reference names the row the ratio is against; "" is the baseline.
	Reference string
	// MaxP99 is the target for the median p99 latency; 0 means none.
	MaxP99 time.Duration
}

// referenceScenario is the row the ratios are computed against.
const referenceScenario = "baseline"

// Targets outside the table.
const (
	targetIdleRSS = 16 << 20
	targetListen  = 250 * time.Millisecond
)

// benchUser is the user created for the run; its password is random.
const benchUser = "bench"

var errRoundsFailed = errors.New("benchmark rounds failed")

// rawRequest builds a keep-alive HTTP/1.1 request. headers are "Name: value"
// lines without CRLF.
func rawRequest(method, path, host string, headers []string, body []byte) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kvmbench\r\n", method, path, host)
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return []byte(b.String())
}

// authScenarios are the rows for GET /api/auth/check: the bare baseline and
// kvmd with each credential kind.
func authScenarios(baselineAddr, kvmdAddr, user, passwd, token, apiToken string) []scenario {
	const path = "/api/auth/check"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + passwd))
	return []scenario{
		{Name: referenceScenario, Addr: baselineAddr, WantStatus: 200,
			Request: rawRequest("GET", path, baselineAddr, nil, nil)},
		{Name: "cookie", Addr: kvmdAddr, WantStatus: 200, MinRatio: 0.5,
			Request: rawRequest("GET", path, kvmdAddr, []string{"Cookie: auth_token=" + token}, nil)},
		{Name: "header", Addr: kvmdAddr, WantStatus: 200, MinRatio: 0.4,
			Request: rawRequest("GET", path, kvmdAddr, []string{"X-KVMD-User: " + user, "X-KVMD-Passwd: " + passwd}, nil)},
		{Name: "basic", Addr: kvmdAddr, WantStatus: 200,
			Request: rawRequest("GET", path, kvmdAddr, []string{"Authorization: Basic " + basic}, nil)},
		// An API token from kvmd token add: a hash lookup and the
		// role check, no password hash.
		{Name: "token", Addr: kvmdAddr, WantStatus: 200, MinRatio: 0.5,
			Request: rawRequest("GET", path, kvmdAddr, []string{"Authorization: Bearer " + apiToken}, nil)},
	}
}

// infoScenarios are the rows for GET /api/info with every category, from
// the demo board: kvmd with a session cookie, against a bare net/http
// server returning the same bytes.
func infoScenarios(baselineAddr, kvmdAddr, token string) []scenario {
	const path = "/api/info"
	return []scenario{
		{Name: infoReference, Addr: baselineAddr, WantStatus: 200, Reference: infoReference,
			Request: rawRequest("GET", path, baselineAddr, nil, nil)},
		{Name: "info", Addr: kvmdAddr, WantStatus: 200, MinRatio: 0.25, Reference: infoReference, MaxP99: 5 * time.Millisecond,
			Request: rawRequest("GET", path, kvmdAddr, []string{"Cookie: auth_token=" + token}, nil)},
		{Name: infoHWReference, Addr: baselineAddr, WantStatus: 200, Reference: infoHWReference,
			Request: rawRequest("GET", infoHWBaselinePath, baselineAddr, nil, nil)},
		{Name: "info-hw", Addr: kvmdAddr, WantStatus: 200, MinRatio: 0.25, Reference: infoHWReference, MaxP99: 5 * time.Millisecond,
			Request: rawRequest("GET", path+"?fields=hw", kvmdAddr, []string{"Cookie: auth_token=" + token}, nil)},
	}
}

// infoHWReference is the bare server answering kvmd's /api/info?fields=hw bytes.
const infoHWReference = "baseline-info-hw"

// infoReference is the bare server answering kvmd's /api/info bytes.
const infoReference = "baseline-info"

// run performs the whole benchmark and prints the report to stdout.
func run(ctx context.Context, cfg runConfig, stdout, stderr io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "kvmbench: "+format+"\n", args...) }

	kvmd, err := filepath.Abs(cfg.KVMD)
	if err != nil {
		return err
	}
	if _, err := os.Stat(kvmd); err != nil {
		return fmt.Errorf("kvmd binary: %w", err)
	}
	release := cmp.Or(cfg.Release, kvmd)
	st, err := os.Stat(release)
	if err != nil {
		return fmt.Errorf("release binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "kvmbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var procs children
	defer procs.stopAll(2 * time.Second)

	rep := &report{cfg: cfg, binarySize: st.Size(), started: time.Now()}
	if dir := cmp.Or(cfg.ReleaseDir, cfg.ARMDir); dir != "" {
		rep.crossSizes = readCrossSizes(dir)
	}
	rep.machine = readMachine(kvmd)
	if cfg.GoBench != "" {
		if rep.goBench, err = readGoBench(cfg.GoBench); err != nil {
			return err
		}
	}
	if cfg.GoBenchBefore != "" {
		if rep.goBenchBefore, err = readGoBench(cfg.GoBenchBefore); err != nil {
			return err
		}
	}

	// Users file, through kvmd's own command.
	users := filepath.Join(dir, "htpasswd")
	passwd, err := randomPassword()
	if err != nil {
		return err
	}
	logf("creating user %q with %s user add", benchUser, filepath.Base(kvmd))
	if err := addUser(ctx, kvmd, users, benchUser, passwd); err != nil {
		return err
	}
	apiToken, err := addToken(ctx, kvmd, users, benchUser)
	if err != nil {
		return err
	}

	switch cfg.Only {
	case "qemu":
		results, err := runQemuBench(ctx, cfg, &procs, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		writeQemu(stdout, results)
		return qemuFailed(results)
	case "ui":
		res, err := runUIBench(ctx, cfg, &procs, kvmd, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		writeUI(stdout, res)
		return res.failure()
	case "ws":
		res, err := runWSBench(ctx, cfg, &procs, kvmd, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, wsMethod(res))
		writeWSRows(stdout, res)
		return nil
	case "diag":
		res, err := runDiagBench(ctx, &procs, kvmd, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, diagMethod())
		writeDiag(stdout, res)
		return res.failure()
	case "msd":
		res, err := runMSDBench(ctx, &procs, kvmd, users, passwd, dir, int64(cfg.MSDMiB)<<20, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, msdMethod(res.size))
		writeMSD(stdout, res)
		return res.failure()
	case "video":
		res, err := runVideoBench(ctx, &procs, kvmd, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, videoMethod(res))
		writeVideo(stdout, res)
		return nil
	case "stress":
		res, err := runStress(ctx, cfg, &procs, kvmd, users, passwd, dir, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, stressMethod(res))
		writeStress(stdout, res)
		return nil
	case "attack":
		res, err := runAttack(ctx, &procs, kvmd, dir, logf)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, attackMethod())
		writeAttack(stdout, res)
		return nil
	}

	// Start-to-listening, on fresh processes.
	for i := range cfg.Starts {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		c, err := procs.start("kvmd", kvmd, []string{"serve", "--listen", addr, "--users", users},
			filepath.Join(dir, fmt.Sprintf("kvmd-start%d.log", i+1)))
		if err != nil {
			return err
		}
		d, err := waitListening(ctx, c, addr)
		procs.stop(c, 3*time.Second)
		if err != nil {
			return err
		}
		rep.listen = append(rep.listen, d)
	}
	logf("start to listening: %v (median of %d)", medianInt(rep.listen).Round(10*time.Microsecond), len(rep.listen))

	// The two servers under load, kvmd on the demo board.
	kvmdAddr, err := freeAddr()
	if err != nil {
		return err
	}
	srv, err := procs.start("kvmd", kvmd, demoServeArgs(kvmdAddr, users, filepath.Join(dir, "no-journal")), filepath.Join(dir, "kvmd.log"))
	if err != nil {
		return err
	}
	if _, err := waitListening(ctx, srv, kvmdAddr); err != nil {
		return err
	}
	// Idle RSS: after one answered request (the readiness probe) and an idle pause.
	if err := sleep.For(ctx, cfg.Idle); err != nil {
		return err
	}
	rep.idleRSS, rep.idleRSSErr = readVmRSS(srv.cmd.Process.Pid)
	if rep.idleRSSErr != nil {
		logf("idle RSS: %v", rep.idleRSSErr)
	}

	token, err := login(ctx, kvmdAddr, benchUser, passwd)
	if err != nil {
		return fmt.Errorf("%w; last lines of %s:\n%s", err, srv.logPath, logTail(srv.logPath, 20))
	}

	base, baseAddr, err := startBaseline(ctx, cfg, &procs, kvmdAddr, token, dir, "baseline")
	if err != nil {
		return err
	}

	scenarios := append(authScenarios(baseAddr, kvmdAddr, benchUser, passwd, token, apiToken), infoScenarios(baseAddr, kvmdAddr, token)...)
	rep.rows = make([]*row, len(scenarios))
	byName := make(map[string]*row, len(scenarios))
	for i, sc := range scenarios {
		rep.rows[i] = &row{scenario: sc}
		byName[sc.Name] = rep.rows[i]
	}
	for round := range cfg.Rounds {
		order := rotate(scenarios, round)
		names := make([]string, len(order))
		for i, sc := range order {
			names[i] = sc.Name
		}
		rep.orders = append(rep.orders, names)
		for _, sc := range order {
			r := byName[sc.Name]
			res, err := runLoad(ctx, loadConfig{
				Addr: sc.Addr, Request: sc.Request, WantStatus: sc.WantStatus,
				Conns: cfg.Conns, Warmup: cfg.Warmup, Duration: cfg.Duration,
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				logf("round %d/%d %-8s FAILED: %v", round+1, cfg.Rounds, sc.Name, err)
				r.addFailure(round, err)
				continue
			}
			r.add(round, res)
			logf("round %d/%d %-8s %9.0f req/s  p50 %-9s p99 %s", round+1, cfg.Rounds, sc.Name,
				res.RPS(), fmtLatency(res.Hist.quantile(0.5)), fmtLatency(res.Hist.quantile(0.99)))
		}
	}
	if cfg.CPURounds > 0 {
		pidOf := func(addr string) int {
			if addr == kvmdAddr {
				return srv.cmd.Process.Pid
			}
			return base.cmd.Process.Pid
		}
		if rep.cpu, err = runCPUBench(ctx, cfg, scenarios, pidOf, logf); err != nil {
			return fmt.Errorf("CPU per request: %w", err)
		}
	}
	rep.loadRSS, rep.loadRSSErr = readVmRSS(srv.cmd.Process.Pid)
	if srv.exited() {
		return srv.exitError()
	}
	if cfg.Only == "load" {
		rep.finished = time.Now()
		rep.writeTable(stdout)
		if n := rep.failedRounds(); n > 0 {
			return fmt.Errorf("%w: %d scenario runs got a wrong status or broke", errRoundsFailed, n)
		}
		return nil
	}
	// What follows has the machine to itself.
	procs.stop(srv, 3*time.Second)
	procs.stop(base, 3*time.Second)
	if cfg.Stress {
		if rep.stress, err = runStress(ctx, cfg, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return fmt.Errorf("under load: %w", err)
		}
	}
	if cfg.Attack {
		if rep.attack, err = runAttack(ctx, &procs, kvmd, dir, logf); err != nil {
			return fmt.Errorf("under attack: %w", err)
		}
	}
	if cfg.LogEntries > 0 {
		if rep.log, err = runLogBench(ctx, cfg, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return fmt.Errorf("log benchmark: %w", err)
		}
	}
	if cfg.WSClients > 0 {
		if rep.ws, err = runWSBench(ctx, cfg, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return fmt.Errorf("/api/ws benchmark: %w", err)
		}
	}
	if cfg.UILoads > 0 {
		if rep.ui, err = runUIBench(ctx, cfg, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return fmt.Errorf("web UI: %w", err)
		}
	}
	if cfg.ARMDir != "" {
		if rep.qemu, err = runQemuBench(ctx, cfg, &procs, users, passwd, dir, logf); err != nil {
			return err
		}
	}
	if cfg.Diag {
		if rep.diag, err = runDiagBench(ctx, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return err
		}
	}
	if cfg.MSD {
		if rep.msd, err = runMSDBench(ctx, &procs, kvmd, users, passwd, dir, int64(cfg.MSDMiB)<<20, logf); err != nil {
			return fmt.Errorf("virtual media: %w", err)
		}
	}
	if cfg.Video {
		if rep.video, err = runVideoBench(ctx, &procs, kvmd, users, passwd, dir, logf); err != nil {
			return fmt.Errorf("the picture: %w", err)
		}
	}
	rep.finished = time.Now()

	rep.writeTable(stdout)
	if cfg.Out != "" {
		md, err := withKeptSection(cfg.Out, rep.markdown())
		if err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		if err := writeFileAtomic(cfg.Out, md); err != nil {
			return fmt.Errorf("writing report: %w", err)
		}
		logf("wrote %s", cfg.Out)
	}
	if n := rep.failedRounds(); n > 0 {
		return fmt.Errorf("%w: %d scenario runs got a wrong status or broke", errRoundsFailed, n)
	}
	return errors.Join(rep.ui.failure(), qemuFailed(rep.qemu), rep.diag.failure(), rep.msd.failure())
}

// demoServeArgs is how kvmd runs for the info rows, the idle RSS and the
// web UI rows, native and under qemu: serving the bundled demo board
// (--demo with our users file: the Raspberry Pi 4 tree, its GPIO and
// capture device faked), so /api/info has real content. --journal-dir
// keeps the demo journal out: it would copy every log line into
// systemd-journal-remote, a cost of the demo, not of the daemon. The
// journal read there is the caller's (a missing directory: none).
func demoServeArgs(addr, users, journalDir string) []string {
	return []string{"serve", "--demo", "--listen", addr, "--users", users, "--journal-dir", journalDir}
}

// startDemo starts kvmd serve --demo (demoServeArgs, and extra) as name,
// with env added to its environment, and waits until it listens: its
// address is returned. The caller stops it.
func startDemo(ctx context.Context, procs *children, kvmd, users, dir, name string, env []string, extra ...string) (*child, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	args := append(demoServeArgs(addr, users, filepath.Join(dir, "no-journal")), extra...)
	srv, err := procs.startEnv(name, kvmd, args, env, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	if _, err := waitListening(ctx, srv, addr); err != nil {
		procs.stop(srv, 3*time.Second)
		return nil, "", err
	}
	return srv, addr, nil
}

// baselineRoutes are the baseline's paths answering kvmd's bytes for the
// /api/info requests of the info rows: path at the baseline → at kvmd.
var baselineRoutes = [][2]string{
	{"/api/info", "/api/info"},
	{infoHWBaselinePath, "/api/info?fields=hw"},
}

// infoHWBaselinePath is where the baseline answers kvmd's /api/info?fields=hw bytes.
const infoHWBaselinePath = "/api/info-hw"

// startBaseline starts `kvmbench baseline` answering each of
// baselineRoutes with the bytes kvmd at kvmdAddr answers, and waits until
// it answers.
func startBaseline(ctx context.Context, cfg runConfig, procs *children, kvmdAddr, token, dir, name string) (*child, string, error) {
	args := []string{"baseline"}
	for i, r := range baselineRoutes {
		body, err := fetch(ctx, kvmdAddr, r[1], token)
		if err != nil {
			return nil, "", err
		}
		file := filepath.Join(dir, fmt.Sprintf("%s-body%d.json", name, i))
		if err := os.WriteFile(file, body, 0o600); err != nil {
			return nil, "", err
		}
		args = append(args, "--route", r[0]+"="+file)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	c, err := procs.start(name, cfg.Self, append(args, "--listen", addr), filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	if _, err := waitListening(ctx, c, addr); err != nil {
		return nil, "", err
	}
	return c, addr, nil
}

func randomPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// addUser runs `kvmd user add NAME --users FILE` with the password as the
// first line of a non-terminal stdin.
func addUser(ctx context.Context, kvmd, users, name, passwd string, extra ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kvmd, append([]string{"user", "add", name, "--users", users}, extra...)...)
	cmd.Stdin = strings.NewReader(passwd + "\n")
	cmd.SysProcAttr = procgroup.Attr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s user add: %w; output:\n%s", kvmd, err, strings.TrimSpace(string(out)))
	}
	if st, err := os.Stat(users); err != nil || st.Size() == 0 {
		return fmt.Errorf("%s user add did not write %s", kvmd, users)
	}
	return nil
}

// addToken runs `kvmd token add bench --user NAME --users FILE` and
// returns the token it prints.
func addToken(ctx context.Context, kvmd, users, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kvmd, "token", "add", "bench", "--user", name, "--users", users)
	cmd.SysProcAttr = procgroup.Attr()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s token add: %w; output:\n%s", kvmd, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// login posts the credentials to /api/auth/login and returns the session
// token from Set-Cookie. It is one request outside any measurement, so the
// standard client is fine here.
func login(ctx context.Context, addr, user, passwd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body := "user=" + url.QueryEscape(user) + "&passwd=" + url.QueryEscape(passwd)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/auth/login", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("login: %w", err)
	}
	defer resp.Body.Close()
	respBody, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("login: status %d, want 200; body %q", resp.StatusCode, respBody)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "auth_token" {
			if !isToken(c.Value) {
				return "", fmt.Errorf("login: auth_token is not 64 lowercase hex digits (%d chars)", len(c.Value))
			}
			return c.Value, nil
		}
	}
	return "", errors.New("login: 200 without an auth_token cookie")
}

// fetch GETs path with the session cookie and returns the body.
func fetch(ctx context.Context, addr, path, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: status %d; body %q", path, resp.StatusCode, body)
	}
	return body, err
}

func isToken(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// writeFileAtomic replaces path with data so a reader never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
