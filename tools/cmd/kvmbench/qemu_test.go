package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteQemu(t *testing.T) {
	const mib = 1 << 20
	ms := time.Millisecond
	results := []*qemuResult{
		{qemuTarget: qemuTargets[0],
			kvmdRuns: qemuRuns{
				listen: []time.Duration{480 * ms, 450 * ms, 520 * ms},
				ready:  []time.Duration{760 * ms, 700 * ms, 810 * ms},
				rss:    []int64{46 * mib, 45*mib + 512<<10, 47 * mib},
			},
			baseRuns: qemuRuns{
				listen: []time.Duration{210 * ms, 200 * ms, 230 * ms},
				ready:  []time.Duration{215 * ms, 205 * ms, 235 * ms},
				rss:    []int64{35 * mib, 34 * mib, 36 * mib},
			}},
		{qemuTarget: qemuTargets[1], skip: "qemu-arm is not installed (apt-get install qemu-user, or make deps)"},
		{qemuTarget: qemuTargets[2], err: errors.New("kvmd, start 1: exited early"),
			kvmdRuns: qemuRuns{listen: []time.Duration{300 * ms}, ready: []time.Duration{400 * ms}, rss: []int64{40 * mib}}},
	}
	want := "| build | emulator | kvmd idle RSS | baseline idle RSS | kvmd − baseline | kvmd / baseline |\n" +
		"|---|---|---:|---:|---:|---:|\n" +
		"| armv6 | `qemu-arm -cpu arm1176` | 46 MiB (45.5 MiB–47 MiB) | 35 MiB (34 MiB–36 MiB) | 11 MiB | 1.31x |\n" +
		"| arm64 | `qemu-aarch64 -cpu cortex-a53` | 40 MiB (40 MiB–40 MiB) | — | — | — |\n" +
		"\n" +
		"| build | kvmd: exec to first answer | kvmd: exec to authenticated /api/info | baseline: exec to first answer |\n" +
		"|---|---:|---:|---:|\n" +
		"| armv6 | 480 ms (450 ms–520 ms) | 760 ms (700 ms–810 ms) | 210 ms (200 ms–230 ms) |\n" +
		"| arm64 | 300 ms (300 ms–300 ms) | 400 ms (400 ms–400 ms) | — |\n" +
		"\n" +
		"This RSS is the qemu process's: it includes qemu-user itself and the code it has translated, so it is not what the device would show; kvmd's own is the native idle RSS.\n" +
		"\n" +
		"- armv7 (`qemu-arm -cpu cortex-a7`): not measured: qemu-arm is not installed (apt-get install qemu-user, or make deps)\n" +
		"- FAIL arm64 (`qemu-aarch64 -cpu cortex-a53`): kvmd, start 1: exited early\n"
	var b strings.Builder
	writeQemu(&b, results)
	if got := b.String(); got != want {
		t.Errorf("writeQemu (-want +got):\n-%s\n+%s", want, got)
	}
	if err := qemuFailed(results); err == nil || !strings.Contains(err.Error(), "qemu arm64: kvmd, start 1: exited early") {
		t.Errorf("qemuFailed = %v, want the arm64 failure", err)
	}
	if err := qemuFailed(results[:2]); err != nil {
		t.Errorf("qemuFailed without failures = %v, want nil", err)
	}
}

func TestSpread(t *testing.T) {
	tests := []struct{ got, want string }{
		{spread([]int64{3 << 20, 1 << 20, 2 << 20}, fmtMiB), "2 MiB (1 MiB–3 MiB)"},
		{spread([]int64{1 << 20, 2 << 20}, fmtMiB), "1.5 MiB (1 MiB–2 MiB)"},
		{spread([]time.Duration{90 * time.Microsecond}, fmtLatency), "90 µs (90 µs–90 µs)"},
		{spread(nil, fmtMiB), "—"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseOnlyFlag(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"--kvmd", "k", "--arm-dir", "dist", "--only", "qemu"}, true},
		{[]string{"--kvmd", "k", "--arm-dir", "dist", "--out", "B.md"}, true},
		{[]string{"--kvmd", "k", "--only", "qemu"}, false},                                       // nothing to measure
		{[]string{"--kvmd", "k", "--arm-dir", "dist", "--only", "qemu", "--out", "B.md"}, false}, // a partial BENCHMARKS.md
		{[]string{"--kvmd", "k", "--arm-dir", "dist", "--only", "info"}, false},
		{[]string{"--kvmd", "k", "--only", "ui"}, true},
		{[]string{"--kvmd", "k", "--only", "ui", "--ui-loads", "5"}, true},
		{[]string{"--kvmd", "k", "--only", "ui", "--out", "B.md"}, false},   // a partial BENCHMARKS.md
		{[]string{"--kvmd", "k", "--only", "ui", "--ui-loads", "0"}, false}, // nothing to measure
		{[]string{"--kvmd", "k", "--ui-loads", "-1"}, false},
	}
	for _, tt := range tests {
		_, err := parseRunFlags(tt.args, io.Discard)
		if (err == nil) != tt.ok {
			t.Errorf("parseRunFlags(%q): error %v, want ok %v", tt.args, err, tt.ok)
		}
	}
}

// TestRunOnlyQemu runs `kvmbench run --only qemu` with a stand-in for
// qemu-user that runs the binary natively and logs its command line, and
// this test binary as the ARM kvmd and baseline. The real emulators run the
// real builds in `make bench`, and in firmware's smoke test.
func TestRunOnlyQemu(t *testing.T) {
	tests := []struct {
		name      string
		emulator  bool   // the stand-in on PATH, else no qemu at all
		missing   string // a binary removed from the ARM dirs
		breakInfo bool   // kvmd answers 403 to the authenticated /api/info
		wantErr   string
		want      []string
	}{
		{name: "measured", emulator: true, missing: "kvmbench-linux-arm64",
			want: []string{"| armv6 | `qemu-arm -cpu arm1176` |", "| armv7 | `qemu-arm -cpu cortex-a7` |",
				"- arm64 (`qemu-aarch64 -cpu cortex-a53`): not measured: stat ", "kvmbench-linux-arm64: no such file",
				"includes qemu-user itself"}},
		{name: "no qemu",
			want: []string{"- armv6 (`qemu-arm -cpu arm1176`): not measured: qemu-arm is not installed",
				"- arm64 (`qemu-aarch64 -cpu cortex-a53`): not measured: qemu-aarch64 is not installed"}},
		{name: "wrong status", emulator: true, breakInfo: true, wantErr: "qemu armv6: kvmd, start 1: authenticated GET /api/info: status 403",
			want: []string{"- FAIL armv6 (`qemu-arm -cpu arm1176`): kvmd, start 1: authenticated GET /api/info: status 403, want 200"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testRunConfig(t)
			cfg.Only, cfg.Starts, cfg.QemuIdle = "qemu", 2, 20*time.Millisecond
			cfg.ARMDir, cfg.ARMBaselineDir = t.TempDir(), t.TempDir()
			for _, tg := range qemuTargets {
				for _, p := range []string{filepath.Join(cfg.ARMDir, "kvmd-linux-"+tg.arch), filepath.Join(cfg.ARMBaselineDir, "kvmbench-linux-"+tg.arch)} {
					if filepath.Base(p) == tt.missing {
						continue
					}
					if err := os.Symlink(cfg.Self, p); err != nil {
						t.Fatal(err)
					}
				}
			}
			bin := t.TempDir()
			calls := filepath.Join(bin, "calls")
			if tt.emulator {
				// No basename: PATH holds nothing else.
				script := "#!/bin/sh\necho \"${0##*/} $*\" >>" + calls + "\nshift 2\nexec \"$@\"\n"
				for _, name := range []string{"qemu-arm", "qemu-aarch64"} {
					if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Setenv("PATH", bin)
			if tt.breakInfo {
				t.Setenv(fakeBreakEnv, "info")
			}

			var stdout, stderr strings.Builder
			err := run(context.Background(), cfg, &stdout, &stderr)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("run: %v, want error %q\nstderr:\n%s", err, tt.wantErr, stderr.String())
			}
			out := stdout.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if !tt.emulator || tt.breakInfo {
				return
			}
			// Every measured start ran under its emulator and CPU, kvmd as
			// the native rows run it.
			log, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{
				"qemu-arm -cpu arm1176 " + cfg.ARMDir + "/kvmd-linux-armv6 serve --demo --listen 127.0.0.1:",
				"qemu-arm -cpu arm1176 " + cfg.ARMBaselineDir + "/kvmbench-linux-armv6 baseline --listen 127.0.0.1:",
				"qemu-arm -cpu cortex-a7 " + cfg.ARMDir + "/kvmd-linux-armv7 serve --demo --listen 127.0.0.1:",
				"qemu-arm -cpu cortex-a7 " + cfg.ARMBaselineDir + "/kvmbench-linux-armv7 baseline --listen 127.0.0.1:",
			} {
				if n := strings.Count(string(log), w); n != cfg.Starts {
					t.Errorf("%q started %d times, want %d; emulator calls:\n%s", w, n, cfg.Starts, log)
				}
			}
			if strings.Contains(string(log), "aarch64") {
				t.Errorf("arm64 ran without its baseline; emulator calls:\n%s", log)
			}
		})
	}
}
