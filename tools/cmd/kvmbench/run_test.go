package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end test runs `kvmbench run` with this test binary standing in
// for both itself (the baseline server) and kvmd: when fakeExecEnv is set the
// binary is a child process, not a test run.
const (
	fakeExecEnv  = "KVMBENCH_TEST_EXEC"
	fakeBreakEnv = "KVMBENCH_TEST_BREAK" // scenario the fake kvmd answers 403
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeExecEnv) != "" {
		os.Exit(fakeMain(os.Args))
	}
	os.Exit(m.Run())
}

func fakeMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 1 && args[1] == "baseline" {
		return cli(ctx, args, os.Stdout, os.Stderr)
	}
	if err := fakeKVMD(ctx, args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fake kvmd:", err)
		return 1
	}
	return 0
}

// fakeKVMD implements just enough of kvmd's command line and auth API for
// the driver: `user add NAME --users FILE`, `token add`, and `serve --listen A --users FILE`
// (other flags ignored).
// It stores the password in plain text; it is a stand-in, not kvmd.
func fakeKVMD(ctx context.Context, args []string) error {
	flagValue := func(name string) string {
		for i, a := range args {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	switch {
	case len(args) >= 3 && args[0] == "user" && args[1] == "add":
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			return err
		}
		return os.WriteFile(flagValue("--users"), []byte(args[2]+":"+strings.TrimSpace(line)+"\n"), 0o600)
	case len(args) >= 3 && args[0] == "token" && args[1] == "add":
		tok := make([]byte, 32)
		_, _ = rand.Read(tok)
		secret := "kvmd_" + hex.EncodeToString(tok)
		if err := os.WriteFile(flagValue("--users")+".tokens", []byte(secret+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Println(secret)
		return nil
	case len(args) >= 1 && args[0] == "serve":
		data, err := os.ReadFile(flagValue("--users"))
		if err != nil {
			return err
		}
		user, passwd, _ := strings.Cut(strings.TrimSpace(string(data)), ":")
		apiTok, _ := os.ReadFile(flagValue("--users") + ".tokens")
		apiToken := strings.TrimSpace(string(apiTok))
		tokenBytes := make([]byte, 32)
		_, _ = rand.Read(tokenBytes)
		token := hex.EncodeToString(tokenBytes)
		broken := os.Getenv(fakeBreakEnv)
		mux := http.NewServeMux()
		mux.HandleFunc("POST /api/auth/login", func(w http.ResponseWriter, r *http.Request) {
			if r.FormValue("user") != user || r.FormValue("passwd") != passwd {
				http.Error(w, `{"ok":false}`, http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "auth_token", Value: token, Path: "/", HttpOnly: true})
			fmt.Fprint(w, baselineBody)
		})
		mux.HandleFunc("GET /api/auth/check", func(w http.ResponseWriter, r *http.Request) {
			kind, ok := "", false
			if u := r.Header.Get("X-KVMD-User"); u != "" {
				kind, ok = "header", u == user && r.Header.Get("X-KVMD-Passwd") == passwd
			} else if c, err := r.Cookie("auth_token"); err == nil {
				kind, ok = "cookie", c.Value == token
			} else if b, has := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); has {
				kind, ok = "token", b == apiToken && apiToken != ""
			} else if u, p, has := r.BasicAuth(); has {
				kind, ok = "basic", u == user && p == passwd
			} else {
				http.Error(w, `{"ok":false}`, http.StatusUnauthorized)
				return
			}
			if !ok || kind == broken {
				http.Error(w, `{"ok":false,"result":{"error":"ForbiddenError"}}`, http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, baselineBody)
		})
		mux.HandleFunc("GET /api/info", func(w http.ResponseWriter, r *http.Request) {
			u, p, basic := r.BasicAuth()
			c, err := r.Cookie("auth_token")
			if err != nil && !basic {
				http.Error(w, `{"ok":false}`, http.StatusUnauthorized)
				return
			}
			if ok := basic && u == user && p == passwd || err == nil && c.Value == token; !ok || broken == "info" {
				http.Error(w, `{"ok":false,"result":{"error":"ForbiddenError"}}`, http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"ok":true,"result":{"node":{"host":"fake"}}}`)
		})
		srv := &http.Server{Addr: flagValue("--listen"), Handler: mux}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
	return fmt.Errorf("unsupported arguments %q", args)
}

func testRunConfig(t *testing.T) runConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeExecEnv, "1")
	cfg := defaultRunConfig()
	cfg.KVMD, cfg.Self = self, self
	cfg.Rounds, cfg.Starts, cfg.Conns = 2, 2, 2
	cfg.Duration, cfg.Warmup, cfg.Idle = 80*time.Millisecond, 20*time.Millisecond, 50*time.Millisecond
	// One short round of the CPU pairs: enough to run that section's code
	// and table (the default, 7 rounds of 30000 requests for each of a dozen
	// servers' measurements, took three of this test's three and a half
	// minutes against the stand-in).
	cfg.CPURounds, cfg.CPURequests = 1, 2000
	cfg.CommandLine = "kvmbench run --kvmd fake"
	cfg.LogEntries = 0 // the log rows need the real kvmd and real journal files
	cfg.UILoads = 0    // and so do the web UI rows, its pages
	cfg.Stress = false // and the "Under load" section, its caps and logins
	cfg.Attack = false // and the "Under attack" section, its bodies and rounds of revocation
	cfg.WSClients = 0  // and the /api/ws rows, its ATX
	cfg.Diag = false   // and the diagnostics row, the bundle
	cfg.MSD = false    // and the virtual media rows, its storage (TestMSDBench runs them)
	cfg.Video = false  // and the picture's rows, its encoder and WebRTC
	return cfg
}

func TestRunEndToEnd(t *testing.T) {
	cfg := testRunConfig(t)
	cfg.Out = filepath.Join(t.TempDir(), "BENCHMARKS.md")
	cfg.ARMDir = t.TempDir() // no builds there: the section says so (TestRunOnlyQemu runs them)
	cfg.UILoads = 1
	t.Setenv("PATH", t.TempDir()) // no chromium: the web UI section says so (TestLoadPage runs it)
	var stdout, stderr strings.Builder
	if err := run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	for _, want := range []string{"| baseline |", "| cookie |", "| header |", "| basic |", "| baseline-info |", "| info |", "| info-hw |", "1.00x", "idle RSS", "start to listening", "binary size"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "FAIL") {
		t.Errorf("table reports a failure:\n%s", table)
	}
	md, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(md), "NaN") || strings.Contains(string(md), "Inf") {
		t.Errorf("BENCHMARKS.md has a figure that is not a number:\n%s", md)
	}
	for _, want := range []string{"# kvmd benchmarks", cfg.CommandLine, "## Rounds", "| 2 | cookie, header, basic, token, baseline-info, info, baseline-info-hw, info-hw, baseline |", "shares its",
		"## Web UI page loads\n\nNot measured: chromium is not installed",
		"## ARM builds under qemu-user", "includes qemu-user itself", "- armv6 (`qemu-arm -cpu arm1176`): not measured: ",
		"**CPU per request.**", "| cookie (vs baseline) |", "| info (vs baseline-info) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q:\n%s", want, md)
		}
	}
}

func TestRunFailsOnWrongStatus(t *testing.T) {
	cfg := testRunConfig(t)
	cfg.Rounds, cfg.Starts = 1, 1
	t.Setenv(fakeBreakEnv, "header")
	var stdout, stderr strings.Builder
	err := run(context.Background(), cfg, &stdout, &stderr)
	if !errors.Is(err, errRoundsFailed) {
		t.Fatalf("run error = %v, want errRoundsFailed\nstderr:\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "| header |") || !strings.Contains(out, "FAIL (1/1 rounds)") ||
		!strings.Contains(out, "status 403, want 200") {
		t.Errorf("table does not show the failed scenario and its status:\n%s", out)
	}
}

// TestRunOnlyUIWithoutChromium runs `kvmbench run --only ui` where there is
// no Chromium: it says so and succeeds, as the full run does.
func TestRunOnlyUIWithoutChromium(t *testing.T) {
	cfg := testRunConfig(t)
	cfg.Only, cfg.UILoads = "ui", 2
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr strings.Builder
	if err := run(context.Background(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), "Not measured: chromium is not installed (apt-get install chromium, or make deps).\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
