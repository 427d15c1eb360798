package firmware

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"kvmd/internal/testutil"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/fixture"
	"kvmd/journal/journaltest"
)

const (
	// startTimeout bounds exec to first answer. Natively kvmd takes a few
	// milliseconds; emulated, well under a second on a 2-core x86 host,
	// ARMv6 the slowest. The margin is for loaded CI machines.
	startTimeout = 60 * time.Second
	// stopTimeout bounds SIGTERM to exit; kvmd itself gives requests in
	// flight 10 s, and none are in flight then.
	stopTimeout = 30 * time.Second
	// idle is how long the daemon sits after its first answer before its
	// RSS is read, as kvmbench does for BENCHMARKS.md.
	idle = time.Second

	smokeUser   = "admin"
	smokePasswd = "smoke: test pass" // a colon and a space, through Basic
)

// emulator returns the command line that runs tg's binaries: qemu-user,
// named with its CPU, not left to binfmt (Debian's qemu-user-static names
// it with a suffix). Without qemu it skips t, or fails it when
// testutil.Required, as make test has it for CI.
func emulator(t *testing.T, tg target) []string {
	t.Helper()
	name := tg.qemu[0]
	p := testutil.NeedTool(t, "qemu-user", name, name+"-static")
	return append([]string{p}, tg.qemu[1:]...)
}

// command returns a command running bin with args under emu.
func command(emu []string, bin string, args ...string) *exec.Cmd {
	a := append(slices.Clone(emu[1:]), bin)
	return exec.Command(emu[0], append(a, args...)...)
}

// TestSmoke runs each ARM build under qemu-user as a device would run
// it: its own `user add`, then `serve` on the Raspberry Pi 4 fixture tree
// and a real journal, answering /api/info and /api/log, until SIGTERM.
func TestSmoke(t *testing.T) {
	t.Parallel()
	// The architectures run in parallel, but one at a time from exec to
	// the RSS reading, so the logged start times are not those of three
	// emulators sharing two cores.
	var measure sync.Mutex
	for _, tg := range targets {
		if tg.qemu == nil {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			emu := emulator(t, tg)
			smoke(t, tg, emu, bins.get(t, tg), &measure)
		})
	}
}

func smoke(t *testing.T, tg target, emu []string, bin string, measure *sync.Mutex) {
	dir := t.TempDir()
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := command(emu, bin, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, &stderr)
		}
		return string(out)
	}

	// The version stamped at build time.
	if got, want := run("", "version"), "kvmd "+version+"\n"; got != want {
		t.Errorf("kvmd version printed %q, want %q", got, want)
	}

	// The users file, written by the emulated binary (bcrypt and the
	// atomic rewrite, on ARM); the password comes on stdin.
	users := filepath.Join(dir, "htpasswd")
	run(smokePasswd+"\n", "user", "add", smokeUser, "--users", users)

	// The board: a Raspberry Pi 4's /proc and /sys.
	root := filepath.Join(dir, "root")
	if err := fixture.UnpackFile(filepath.Join(moduleRoot, "board", "testdata", "rpi4.ttar"), root); err != nil {
		t.Fatal(err)
	}
	arch, err := os.ReadFile(filepath.Join(root, "proc", "sys", "kernel", "arch"))
	if err != nil {
		t.Fatal(err)
	}
	wantMachine := strings.TrimSpace(string(arch))

	// The journal: the last boot in the directory is the current one.
	journalDir := filepath.Join(dir, "journal")
	if err := os.Mkdir(journalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const previousBoot = "6b766d64746573740000000000000000"
	journaltest.Write(t, journalDir, "system", []journaltest.Entry{
		{Time: now.Add(-3 * time.Hour), Boot: previousBoot, Unit: "kvmd.service", Message: "the boot before"},
		{Time: now.Add(-2 * time.Minute), Unit: "kvmd.service", Message: "kvmd started on " + tg.name},
		{Time: now.Add(-90 * time.Second), Unit: "sshd.service", Message: "not ours"},
		{Time: now.Add(-60 * time.Second), Unit: "kvmd-otg.service", Message: "gadget configured  "},
		{Time: now.Add(-30 * time.Second), Unit: "kvmd.service", Message: "Zürich → 東京 ✓"},
	})
	stamp := func(d time.Duration) string { return now.Add(d).UTC().Format("2006-01-02 15:04:05") }
	wantLog := "[" + stamp(-2*time.Minute) + " kvmd.service] --- kvmd started on " + tg.name + "\r\n" +
		"[" + stamp(-60*time.Second) + " kvmd-otg.service] --- gadget configured\r\n" +
		"[" + stamp(-30*time.Second) + " kvmd.service] --- Zürich → 東京 ✓\r\n"

	// Start, timed from exec to the first HTTP answer, then the idle RSS.
	addr := testutil.FreeAddr(t)
	base := "http://" + addr
	measure.Lock()
	d := start(t, dir, command(emu, bin, "serve", "--listen", addr, "--users", users,
		"--root", root, "--journal-dir", journalDir,
		"--meta", filepath.Join(dir, "no-meta.yaml"), "--extras", filepath.Join(dir, "no-extras")))
	took, err := d.waitAnswer(base + "/api/auth/check")
	if err == nil {
		time.Sleep(idle)
	}
	measure.Unlock()
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, d.out)
	}
	rss, err := vmRSS(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("firmware smoke: arch=%s emulator=%q start_ms=%d idle_rss_kib=%d",
		tg.name, strings.Join(tg.qemu, " "), took.Milliseconds(), rss)

	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string, auth bool) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth(smokeUser, smokePasswd)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v; output:\n%s", path, err, d.out)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", path, err)
		}
		return resp.StatusCode, body
	}

	// No credentials: 401, in the envelope.
	if st, body := get("/api/info", false); st != http.StatusUnauthorized || !bytes.Contains(body, []byte(`"ok":false`)) {
		t.Errorf("GET /api/info without credentials: %d %s, want 401 and ok false", st, body)
	}

	// The board, as the fixture describes it.
	st, body := get("/api/info?fields=hw,system", true)
	if st != http.StatusOK {
		t.Fatalf("GET /api/info?fields=hw,system: %d %s", st, body)
	}
	var info struct {
		OK     bool                       `json:"ok"`
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatalf("/api/info: %v: %s", err, body)
	}
	if keys := slices.Sorted(maps.Keys(info.Result)); !info.OK || !slices.Equal(keys, []string{"hw", "system"}) {
		t.Errorf("/api/info?fields=hw,system: ok %v, categories %v, want true and [hw system]", info.OK, keys)
	}
	var hw struct {
		Platform struct {
			Board string `json:"board"`
		} `json:"platform"`
		Health struct {
			Mem *struct {
				Total int64 `json:"total"`
			} `json:"mem"`
		} `json:"health"`
	}
	var system struct {
		Kernel struct {
			Machine string `json:"machine"`
		} `json:"kernel"`
		Kvmd struct {
			Version string `json:"version"`
		} `json:"kvmd"`
	}
	if err := errors.Join(json.Unmarshal(info.Result["hw"], &hw), json.Unmarshal(info.Result["system"], &system)); err != nil {
		t.Fatalf("/api/info: %v: %s", err, body)
	}
	if hw.Platform.Board != "rpi4" {
		t.Errorf("hw.platform.board = %q, want rpi4", hw.Platform.Board)
	}
	if hw.Health.Mem == nil || hw.Health.Mem.Total <= 0 {
		t.Errorf("hw.health has no memory total: %s", info.Result["hw"])
	}
	if system.Kernel.Machine != wantMachine {
		t.Errorf("system.kernel.machine = %q, the fixture says %q", system.Kernel.Machine, wantMachine)
	}
	if system.Kvmd.Version != version {
		t.Errorf("system.kvmd.version = %q, want %q", system.Kvmd.Version, version)
	}

	// The journal: this boot's lines of kvmd's units, in kvmd's format.
	if st, body := get("/api/log", true); st != http.StatusOK || string(body) != wantLog {
		t.Errorf("GET /api/log: %d\n%q\nwant 200 and\n%q", st, body, wantLog)
	}

	// SIGTERM, forwarded by qemu to the guest: a clean exit.
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
		if d.err != nil {
			t.Errorf("exit after SIGTERM: %v; output:\n%s", d.err, d.out)
		}
	case <-time.After(stopTimeout):
		t.Fatalf("still running %s after SIGTERM; output:\n%s", stopTimeout, d.out)
	}
	out := d.out.String()
	if !strings.Contains(out, `msg="shutting down"`) || strings.Contains(out, "level=ERROR") {
		t.Errorf("want a shutdown and no errors in the log:\n%s", out)
	}
}

// TestEmulatedARMv6 shows that the emulated ARM1176 is strict: the
// GOARM=7 build dies on it, so the GOARM=6 build passing TestSmoke there
// means it suits a Pi Zero.
func TestEmulatedARMv6(t *testing.T) {
	t.Parallel()
	var v6, v7 target
	for _, tg := range targets {
		switch tg.name {
		case "armv6":
			v6 = tg
		case "armv7":
			v7 = tg
		}
	}
	emu := emulator(t, v6)
	cmd := command(emu, bins.get(t, v7), "version")
	cmd.Dir = t.TempDir() // where qemu leaves a core dump, if the limit allows
	out, err := cmd.CombinedOutput()
	var xe *exec.ExitError
	if !errors.As(err, &xe) {
		t.Fatalf("the armv7 build under %q: %v, want it to fail; output:\n%s", strings.Join(v6.qemu, " "), err, out)
	}
	t.Logf("the armv7 build under %q: %v", strings.Join(v6.qemu, " "), err)
}

// daemon is a kvmd serve process under qemu.
type daemon struct {
	cmd    *exec.Cmd
	out    *testutil.SyncBuffer // stdout and stderr
	start  time.Time
	exited chan struct{} // closed when the process has exited
	err    error         // from Wait, once exited is closed
}

func start(t *testing.T, dir string, cmd *exec.Cmd) *daemon {
	t.Helper()
	d := &daemon{cmd: cmd, out: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.Stdout, cmd.Stderr = d.out, d.out
	d.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // an error when it has exited already
		<-d.exited
	})
	return d
}

// waitAnswer polls url until the daemon answers it (any status) and
// returns the time since exec.
func (d *daemon) waitAnswer(url string) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			took := time.Since(d.start)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return took, nil
		}
		select {
		case <-d.exited:
			return 0, fmt.Errorf("exited before answering: %v", d.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no answer on %s within %s", url, startTimeout)
}

// vmRSS returns a process's resident set size in KiB.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
