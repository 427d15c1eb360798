package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"kvmd/internal/sleep"
)

// qemuTarget is an ARM build and the qemu-user command that runs it, on the
// CPU of the oldest board it targets, as firmware's smoke test runs them
// (its targets, in firmware/build_test.go).
type qemuTarget struct {
	arch string   // the name in kvmd-linux-ARCH
	qemu []string // emulator and its flags
}

var qemuTargets = []qemuTarget{
	{"armv6", []string{"qemu-arm", "-cpu", "arm1176"}},
	{"armv7", []string{"qemu-arm", "-cpu", "cortex-a7"}},
	{"arm64", []string{"qemu-aarch64", "-cpu", "cortex-a53"}},
}

// qemuStartTimeout bounds exec to first answer under emulation: well under a
// second on a 2-core x86 machine, ARMv6 the slowest; the margin is for a
// loaded one.
const qemuStartTimeout = 60 * time.Second

// qemuRuns holds one server's samples, one per start.
type qemuRuns struct {
	listen []time.Duration // exec to the first answer
	ready  []time.Duration // exec to 200 on an authenticated GET /api/info
	rss    []int64         // the emulator's VmRSS after the idle pause
}

// qemuResult is one build's measurements.
type qemuResult struct {
	qemuTarget
	kvmd, baseline string // the binaries run
	skip           string // why the build was not measured, "" when it was
	err            error  // why measuring it failed partway
	kvmdRuns       qemuRuns
	baseRuns       qemuRuns
}

// findEmulator returns the command line that runs tg's binaries, with the
// emulator's path; Debian's qemu-user-static names it with a suffix.
func findEmulator(tg qemuTarget) ([]string, error) {
	for _, n := range []string{tg.qemu[0], tg.qemu[0] + "-static"} {
		if p, err := exec.LookPath(n); err == nil {
			return append([]string{p}, tg.qemu[1:]...), nil
		}
	}
	return nil, fmt.Errorf("%s is not installed (apt-get install qemu-user, or make deps)", tg.qemu[0])
}

// runQemuBench starts each ARM build in cfg.ARMDir under qemu-user, and
// the baseline server built for the same target from cfg.ARMBaselineDir,
// cfg.Starts times each, alternately. A build whose emulator or binaries
// are missing is skipped, saying why; one that fails keeps its error and
// the samples taken before. Only a cancelled ctx ends it early.
func runQemuBench(ctx context.Context, cfg runConfig, procs *children, users, passwd, dir string, logf func(string, ...any)) ([]*qemuResult, error) {
	auth := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(benchUser+":"+passwd))
	var results []*qemuResult
	for _, tg := range qemuTargets {
		r := &qemuResult{qemuTarget: tg,
			kvmd:     filepath.Join(cfg.ARMDir, "kvmd-linux-"+tg.arch),
			baseline: filepath.Join(cfg.ARMBaselineDir, "kvmbench-linux-"+tg.arch)}
		results = append(results, r)
		emu, err := findEmulator(tg)
		for _, bin := range []string{r.kvmd, r.baseline} {
			if err == nil {
				_, err = os.Stat(bin)
			}
		}
		if err != nil {
			r.skip = err.Error()
			logf("qemu %s: not measured: %s", tg.arch, r.skip)
			continue
		}
		servers := []struct {
			name string
			bin  string
			args func(addr string) []string
			runs *qemuRuns
		}{
			{"kvmd", r.kvmd, func(addr string) []string { return demoServeArgs(addr, users, filepath.Join(dir, "no-journal")) }, &r.kvmdRuns},
			{"baseline", r.baseline, func(addr string) []string { return []string{"baseline", "--listen", addr} }, &r.baseRuns},
		}
	starts:
		for i := range cfg.Starts {
			for _, s := range servers {
				logPath := filepath.Join(dir, fmt.Sprintf("qemu-%s-%s%d.log", tg.arch, s.name, i+1))
				err := qemuRun(ctx, procs, emu, s.bin, s.args, auth, cfg.QemuIdle, logPath, s.runs)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if err != nil {
					r.err = fmt.Errorf("%s, start %d: %w", s.name, i+1, err)
					logf("qemu %s: FAILED: %v", tg.arch, r.err)
					break starts
				}
			}
		}
		if r.err == nil {
			logf("qemu %s: idle RSS kvmd %s, baseline %s; kvmd first answer after %s (medians of %d)", tg.arch,
				fmtMiB(medianInt(r.kvmdRuns.rss)), fmtMiB(medianInt(r.baseRuns.rss)),
				fmtLatency(medianInt(r.kvmdRuns.listen)), len(r.kvmdRuns.rss))
		}
	}
	return results, nil
}

// qemuRun starts bin with args under emu, waits for its first answer to
// GET /api/info and then for 200 on one with the auth header, lets it idle
// and reads the emulator's RSS.
func qemuRun(ctx context.Context, procs *children, emu []string, bin string, args func(addr string) []string,
	auth string, idle time.Duration, logPath string, runs *qemuRuns) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	argv := append(append(slices.Clone(emu[1:]), bin), args(addr)...)
	c, err := procs.start(filepath.Base(bin), emu[0], argv, logPath)
	if err != nil {
		return err
	}
	defer procs.stop(c, 5*time.Second)
	listen, err := waitAnswer(ctx, c, addr, rawRequest("GET", "/api/info", addr, nil, nil), qemuStartTimeout)
	if err != nil {
		return err
	}
	st, err := probe(addr, rawRequest("GET", "/api/info", addr, []string{auth}, nil), time.Now().Add(qemuStartTimeout))
	if err == nil && st != 200 {
		err = fmt.Errorf("status %d, want 200", st)
	}
	if err != nil {
		return fmt.Errorf("authenticated GET /api/info: %w", err)
	}
	ready := time.Since(c.started)
	if err := sleep.For(ctx, idle); err != nil {
		return err
	}
	if c.exited() {
		return c.exitError()
	}
	rss, err := readVmRSS(c.cmd.Process.Pid)
	if err != nil {
		return err
	}
	runs.listen = append(runs.listen, listen)
	runs.ready = append(runs.ready, ready)
	runs.rss = append(runs.rss, rss)
	return nil
}

// qemuFailed joins the errors of the builds that failed.
func qemuFailed(results []*qemuResult) error {
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("qemu %s: %w", r.arch, r.err))
		}
	}
	return errors.Join(errs...)
}

// writeQemu writes the qemu results as markdown tables with what their RSS
// includes, then a line for each build not measured or failed.
func writeQemu(w io.Writer, results []*qemuResult) {
	var measured, other []*qemuResult
	for _, r := range results {
		if len(r.kvmdRuns.rss) > 0 {
			measured = append(measured, r)
		}
		if r.skip != "" || r.err != nil {
			other = append(other, r)
		}
	}
	if len(measured) > 0 {
		fmt.Fprintf(w, "| build | emulator | kvmd idle RSS | baseline idle RSS | kvmd − baseline | kvmd / baseline |\n")
		fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|\n")
		for _, r := range measured {
			diff, rat := "—", "—"
			if len(r.baseRuns.rss) > 0 {
				k, b := medianInt(r.kvmdRuns.rss), medianInt(r.baseRuns.rss)
				diff, rat = fmtMiB(k-b), fmtRatio(ratio(float64(k), float64(b)))
			}
			fmt.Fprintf(w, "| %s | `%s` | %s | %s | %s | %s |\n", r.arch, strings.Join(r.qemu, " "),
				spread(r.kvmdRuns.rss, fmtMiB), spread(r.baseRuns.rss, fmtMiB), diff, rat)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "| build | kvmd: exec to first answer | kvmd: exec to authenticated /api/info | baseline: exec to first answer |\n")
		fmt.Fprintf(w, "|---|---:|---:|---:|\n")
		for _, r := range measured {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.arch, spread(r.kvmdRuns.listen, fmtLatency),
				spread(r.kvmdRuns.ready, fmtLatency), spread(r.baseRuns.listen, fmtLatency))
		}
		fmt.Fprintf(w, "\nThis RSS is the qemu process's: it includes qemu-user itself and the code it has translated, "+
			"so it is not what the device would show; kvmd's own is the native idle RSS.\n")
	}
	if len(measured) > 0 && len(other) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range other {
		if r.skip != "" {
			fmt.Fprintf(w, "- %s (`%s`): not measured: %s\n", r.arch, strings.Join(r.qemu, " "), r.skip)
		} else {
			fmt.Fprintf(w, "- FAIL %s (`%s`): %v\n", r.arch, strings.Join(r.qemu, " "), r.err)
		}
	}
}

// spread formats the median of xs and their range: "45.2 MiB (44.9 MiB–45.6 MiB)".
func spread[T ~int64](xs []T, format func(T) string) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s (%s–%s)", format(medianInt(xs)), format(slices.Min(xs)), format(slices.Max(xs)))
}
