package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// row collects one scenario's rounds.
type row struct {
	scenario
	rps      []float64 // per successful round
	p50, p99 []time.Duration
	perRound map[int]float64 // round -> req/s, for the rounds table
	failures []string        // "round N: error", in order
}

func (r *row) add(round int, res *loadResult) {
	if r.perRound == nil {
		r.perRound = make(map[int]float64)
	}
	rps := res.RPS()
	r.rps = append(r.rps, rps)
	r.p50 = append(r.p50, res.Hist.quantile(0.50))
	r.p99 = append(r.p99, res.Hist.quantile(0.99))
	r.perRound[round] = rps
}

func (r *row) addFailure(round int, err error) {
	r.failures = append(r.failures, fmt.Sprintf("round %d: %v", round+1, err))
}

func (r *row) medianRPS() float64 { return median(r.rps) }

// report is the outcome of one run.
type report struct {
	cfg              runConfig
	machine          machine
	started          time.Time
	finished         time.Time
	binarySize       int64
	crossSizes       []crossSize // the release builds in --release-dir
	listen           []time.Duration
	idleRSS, loadRSS int64
	idleRSSErr       error
	loadRSSErr       error
	rows             []*row
	orders           [][]string    // scenario order of each round
	log              *logResult    // nil when the log rows were skipped
	ui               *uiResult     // nil when the web UI rows were skipped
	ws               *wsResult     // nil when the /api/ws rows were skipped
	stress           *stressResult // nil when the "Under load" section was skipped
	attack           *attackResult // nil when the "Under attack" section was skipped
	qemu             []*qemuResult // nil when the qemu section was skipped
	diag             *diagResult   // nil when the diagnostics row was skipped
	msd              *msdResult    // nil when the virtual media rows were skipped
	video            *videoResult  // nil when the picture's rows were skipped
	cpu              *cpuResult    // nil when the CPU-per-request pairs were skipped
	goBench          *goBench      // --go-bench, nil without
	goBenchBefore    *goBench      // --go-bench-before, nil without
}

// reference returns the row r's ratio is against.
func (rep *report) reference(r *row) *row {
	name := r.Reference
	if name == "" {
		name = referenceScenario
	}
	for _, ref := range rep.rows {
		if ref.Name == name {
			return ref
		}
	}
	return nil
}

func (rep *report) failedRounds() int {
	n := 0
	for _, r := range rep.rows {
		n += len(r.failures)
	}
	if rep.cpu != nil {
		for _, r := range rep.cpu.rows {
			if r.failure != "" {
				n++
			}
		}
	}
	return n
}

// verdict is the result column: "pass", "MISS", "FAIL" (a round broke) or "—"
// (no target).
func verdict(hasTarget, ok bool) string {
	switch {
	case !hasTarget:
		return "—"
	case ok:
		return "pass"
	default:
		return "MISS"
	}
}

// writeTable writes the results as markdown tables with a summary.
func (rep *report) writeTable(w io.Writer) {
	var misses []string
	fmt.Fprintf(w, "| scenario | median req/s | vs its baseline | p50 | p99 | target | result |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---|---|\n")
	for _, r := range rep.rows {
		med := r.medianRPS()
		rat := math.NaN()
		if ref := rep.reference(r); ref != nil {
			rat = ratio(med, ref.medianRPS())
		}
		target, result := "—", "—"
		if r.Name == referenceScenario || r.Name == infoReference || r.Name == infoHWReference {
			target = "reference"
		}
		var targets []string
		ok := true
		if r.MinRatio > 0 {
			targets = append(targets, fmt.Sprintf("≥ %.2fx", r.MinRatio))
			if math.IsNaN(rat) || rat < r.MinRatio {
				ok = false
				misses = append(misses, r.Name+" ratio")
			}
		}
		if r.MaxP99 > 0 {
			targets = append(targets, "p99 < "+fmtLatency(r.MaxP99))
			if p99 := medianInt(r.p99); p99 <= 0 || p99 >= r.MaxP99 {
				ok = false
				misses = append(misses, r.Name+" p99")
			}
		}
		if len(targets) > 0 {
			target, result = strings.Join(targets, ", "), verdict(true, ok)
		}
		if len(r.failures) > 0 {
			result = fmt.Sprintf("FAIL (%d/%d rounds)", len(r.failures), len(r.failures)+len(r.rps))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Name, fmtRPS(med), fmtRatio(rat),
			fmtLatency(medianInt(r.p50)), fmtLatency(medianInt(r.p99)), target, result)
	}
	fmt.Fprintln(w)
	if rep.cpu != nil {
		fmt.Fprint(w, cpuMethod(rep.cpu))
		misses = append(misses, writeCPU(w, rep.cpu)...)
		fmt.Fprintln(w)
	}
	if rep.goBench != nil {
		fmt.Fprint(w, goBenchMethod(rep.cfg, rep.goBenchBefore))
		writeGoBench(w, rep.goBench, rep.goBenchBefore)
	}

	fmt.Fprintf(w, "| measure | value | target | result |\n")
	fmt.Fprintf(w, "|---|---:|---|---|\n")
	if rep.idleRSSErr != nil {
		fmt.Fprintf(w, "| idle RSS | unknown (%v) | < %s | MISS |\n", rep.idleRSSErr, fmtMiB(targetIdleRSS))
		misses = append(misses, "idle RSS")
	} else {
		ok := rep.idleRSS < targetIdleRSS
		fmt.Fprintf(w, "| idle RSS | %s | < %s | %s |\n", fmtMiB(rep.idleRSS), fmtMiB(targetIdleRSS), verdict(true, ok))
		if !ok {
			misses = append(misses, "idle RSS")
		}
	}
	if len(rep.listen) > 0 {
		med := medianInt(rep.listen)
		ok := med <= targetListen
		fmt.Fprintf(w, "| start to listening (median of %d, range %s–%s) | %s | ≤ %s | %s |\n", len(rep.listen),
			fmtLatency(slices.Min(rep.listen)), fmtLatency(slices.Max(rep.listen)),
			fmtLatency(med), fmtLatency(targetListen), verdict(true, ok))
		if !ok {
			misses = append(misses, "start to listening")
		}
	}
	fmt.Fprintf(w, "| binary size | %s | — | — |\n", fmtMiB(rep.binarySize))
	for _, c := range rep.crossSizes {
		target, result := "—", "—"
		if c.arch == "arm64" {
			ok := c.size <= targetARM64Size
			target, result = "≤ "+fmtMiB(targetARM64Size), verdict(true, ok)
			if !ok {
				misses = append(misses, "arm64 binary size")
			}
		}
		fmt.Fprintf(w, "| binary size, release build `kvmd-linux-%s` (static, stripped) | %s | %s | %s |\n", c.arch, fmtMiB(c.size), target, result)
	}
	if rep.loadRSSErr == nil {
		fmt.Fprintf(w, "| RSS after the load rounds | %s | — | — |\n", fmtMiB(rep.loadRSS))
	}
	if l := rep.log; l != nil {
		k, j := medianInt(l.kvmd), medianInt(l.jctl)
		rat := seekRatio(l)
		ok := !math.IsNaN(rat) && rat <= targetSeekRatio
		if !ok {
			misses = append(misses, "log seek")
		}
		fmt.Fprintf(w, "| log seek, whole boot of %d entries (%d lines sent): kvmd / journalctl alone (medians of %d; median of the rounds' ratios) | %s / %s; %s | ≤ %.2fx | %s |\n",
			l.entries, l.lines, len(l.kvmd), k.Round(time.Millisecond), j.Round(time.Millisecond), fmtRatio(rat), targetSeekRatio, verdict(true, ok))
		med, p99 := medianInt(l.latency), percentile(l.latency, 0.99)
		ok = med > 0 && med < targetFollowLatency
		if !ok {
			misses = append(misses, "follow latency")
		}
		fmt.Fprintf(w, "| log follow latency, journal write to client (median / p99 of %d) | %s / %s | median < %s | %s |\n",
			len(l.latency), fmtLatency(med), fmtLatency(p99), fmtLatency(targetFollowLatency), verdict(true, ok))
	}
	misses = append(misses, writeWSRows(w, rep.ws)...)
	fmt.Fprintln(w)
	// The web UI's rows come in their own section, below; their misses
	// are listed here with the rest.
	misses = append(misses, rep.ui.misses()...)

	switch {
	case len(misses) == 0:
		fmt.Fprintf(w, "All targets met. ")
	default:
		fmt.Fprintf(w, "Targets missed: %s. ", strings.Join(misses, ", "))
	}
	fmt.Fprintf(w, "Targets are reported, not enforced: a miss does not change the exit status; a round that got a wrong status or a broken connection does.\n")
	for _, r := range rep.rows {
		for _, f := range r.failures {
			fmt.Fprintf(w, "\n- FAIL %s %s", r.Name, f)
		}
	}
	if rep.failedRounds() > 0 {
		fmt.Fprintln(w)
	}
}

// writeRounds writes each round's req/s per scenario, in the order run.
func (rep *report) writeRounds(w io.Writer) {
	fmt.Fprintf(w, "| round | order |")
	for _, r := range rep.rows {
		fmt.Fprintf(w, " %s |", r.Name)
	}
	fmt.Fprintf(w, "\n|---:|---|%s\n", strings.Repeat("---:|", len(rep.rows)))
	for i, order := range rep.orders {
		fmt.Fprintf(w, "| %d | %s |", i+1, strings.Join(order, ", "))
		for _, r := range rep.rows {
			if v, ok := r.perRound[i]; ok {
				fmt.Fprintf(w, " %s |", fmtRPS(v))
			} else {
				fmt.Fprintf(w, " failed |")
			}
		}
		fmt.Fprintln(w)
	}
}

// markdown renders the whole BENCHMARKS.md.
func (rep *report) markdown() []byte {
	var b bytes.Buffer
	cfg := rep.cfg
	m := rep.machine
	fmt.Fprintf(&b, "# kvmd benchmarks\n\n")
	if cfg.ViaMake {
		fmt.Fprintf(&b, "Produced by `make bench`, which ran:\n\n")
	} else {
		fmt.Fprintf(&b, "Produced by:\n\n")
	}
	fmt.Fprintf(&b, "```\n%s\n```\n\n", cfg.CommandLine)
	fmt.Fprintf(&b, "- Date: %s (run took %s)\n", rep.started.UTC().Format("2006-01-02 15:04 UTC"),
		rep.finished.Sub(rep.started).Round(time.Second))
	fmt.Fprintf(&b, "- Machine: %d CPUs, %s; Linux %s\n", m.nproc, m.cpuModel, m.kernel)
	fmt.Fprintf(&b, "- Go: kvmbench built with %s", m.goDriver)
	if m.goKVMD != "" {
		fmt.Fprintf(&b, ", kvmd built with %s", m.goKVMD)
	}
	fmt.Fprintf(&b, "\n- Method: closed loop over %d keep-alive connections per scenario (each sends its next request only after reading the whole previous response); "+
		"%s uncounted warm-up, then %s counted; %d rounds, the scenario order rotated each round so machine noise falls on every scenario alike; "+
		"the table shows medians over rounds (latencies are the medians of each round's p50 and p99).\n",
		cfg.Conns, cfg.Warmup, cfg.Duration, cfg.Rounds)
	fmt.Fprintf(&b, "- Scenarios: `GET /api/auth/check` answered 200 `%s`. `baseline` is a bare Go net/http server (`kvmbench baseline`, its own process) "+
		"that returns those bytes without any checks; `cookie` sends the session cookie from one login; "+
		"`header` sends `X-KVMD-User`/`X-KVMD-Passwd` and `basic` sends `Authorization: Basic` for a bcrypt user made with `kvmd user add` "+
		"(their cost relies on kvmd's verification cache); `token` sends `Authorization: Bearer` with an API token from `kvmd token add`. `info` is `GET /api/info` with every category of the default layout, "+
		"from kvmd serving the bundled Raspberry Pi 4 tree (`--demo`), with the session cookie; its reference `baseline-info` is the same bare "+
		"server returning the bytes kvmd answered (captured once before the rounds); `info-hw` and `baseline-info-hw` are the same for "+
		"`GET /api/info?fields=hw`. kvmd runs with its access log on, written to a file.\n\n", baselineBody)
	fmt.Fprintf(&b, "## Results\n\n")
	rep.writeTable(&b)
	fmt.Fprintf(&b, "\n## Rounds (req/s)\n\n")
	rep.writeRounds(&b)
	if rep.stress != nil {
		fmt.Fprintf(&b, "\n## Under load: idle connections, logins under a flood, one viewer's streams\n\n")
		fmt.Fprint(&b, stressMethod(rep.stress))
		writeStress(&b, rep.stress)
	}
	if rep.attack != nil {
		fmt.Fprintf(&b, "\n## Under attack: unauthenticated bodies, a print's memory, revocation, one viewer's long requests\n\n")
		fmt.Fprint(&b, attackMethod())
		writeAttack(&b, rep.attack)
	}
	if rep.ui != nil {
		fmt.Fprintf(&b, "\n## Web UI page loads\n\n")
		if rep.ui.skip == "" {
			fmt.Fprintf(&b, "Each page of kvmd's web UI and the baseline's bare page is loaded %d times (after %d uncounted loads of each) in one tab of headless Chromium, "+
				"the pages in turn, their order rotated each time; every load is a fresh navigation from `about:blank` with the browser's HTTP cache disabled "+
				"(DevTools `Network.setCacheDisabled`), so the page and every file it uses are fetched again, over the connections the browser keeps open. "+
				"**load** is Navigation Timing's `loadEventEnd`: from navigation start until the page and its stylesheet, scripts and images are fetched and run. "+
				"**ready** is from navigation start until the page sets `data-ready=\"1\"` on its body, once its first data is rendered "+
				"(the dashboard after its first `/api/info`, the logs page after the first lines of its `/api/log` follow or 1 s after the headers if none come, "+
				"the login page once its form is wired), noted in the page by a MutationObserver with `performance.now()` (Chromium's clock, 0.1 ms resolution), not by polling. "+
				"kvmd runs as for the `info` row (`serve --demo` with the users file); the session cookie from one `POST /api/auth/login` is set in the browser beforehand "+
				"for the dashboard and the logs page, and taken away (between loads) for the login page, which sends a signed-in user on to the dashboard, "+
				"so each load is the page itself (a load that ends at another path fails the run). "+
				"`baseline` is `kvmbench baseline` serving a fixed page at `%s`: %d bytes of HTML, a %d-byte stylesheet and a %d-byte module script (padded with comments) "+
				"that fetches `/api/info`, answered with kvmd's bytes as for `baseline-info`, renders it and sets `data-ready`; no session check, no security headers. "+
				"Requests and body bytes are those the page had finished when measured (Resource Timing; the logs page's open stream is not among them). "+
				"Browser, kvmd and baseline share the machine's %d cores over loopback: the server's and the browser's own cost, no network. The target applies to the median load.\n\n",
				rep.ui.loads, uiWarmup, basePagePath, len(basePageFiles[basePagePath].body), len(basePageFiles["/page.css"].body), len(basePageFiles["/page.js"].body), m.nproc)
		}
		writeUI(&b, rep.ui)
	}
	if rep.diag != nil {
		fmt.Fprintf(&b, "\n## Diagnostics bundle\n\n%s", diagMethod())
		writeDiag(&b, rep.diag)
	}
	if rep.msd != nil {
		fmt.Fprintf(&b, "\n## Virtual media upload\n\n%s", msdMethod(rep.msd.size))
		writeMSD(&b, rep.msd)
	}
	if rep.video != nil {
		fmt.Fprintf(&b, "\n## The picture: MJPEG, Direct H.264 and WebRTC\n\n%s", videoMethod(rep.video))
		writeVideo(&b, rep.video)
	}
	if rep.qemu != nil {
		fmt.Fprintf(&b, "\n## ARM builds under qemu-user\n\n")
		fmt.Fprintf(&b, "The ARM builds (`%s/kvmd-linux-ARCH`, built as `make cross` builds the release but with `-tags demo`, for `--demo`), each run by qemu-user on this machine "+
			"with the CPU of the oldest board it targets. **This RSS includes qemu-user itself and the code it has translated, "+
			"so it is not what the device would show**; the native idle RSS row above stays the figure for kvmd. "+
			"The baseline is `kvmbench baseline`, the bare net/http server of the load rows, cross-built for the same GOARCH and GOARM "+
			"with the same flags (`kvmbench-linux-ARCH` beside kvmbench) and run under the same emulator and CPU, so kvmd − baseline "+
			"is about what kvmd adds to the emulator, the Go runtime and net/http, translated code included.\n\n", rep.cfg.ARMDir)
		fmt.Fprintf(&b, "Each build is started %d times, kvmd and the baseline alternately, each as a fresh process: kvmd as for the rows above "+
			"(`serve --demo` with the users file from `kvmd user add`, no demo journal), the baseline as `kvmbench baseline`. "+
			"Each is polled every %s with `GET /api/info` until it answers (exec to first answer), then a `GET /api/info` with Basic "+
			"credentials has to answer 200 (for kvmd that includes one bcrypt verification, emulated); after %s idle, VmRSS of the "+
			"qemu process is read from `/proc/PID/status`. Medians, the range over the starts in brackets.\n\n",
			rep.cfg.Starts, pollEvery, rep.cfg.QemuIdle)
		writeQemu(&b, rep.qemu)
	}
	fmt.Fprintf(&b, "\n## Notes\n\n")
	fmt.Fprintf(&b, "- The load generator runs on the same machine and shares its %d cores with the server under test, "+
		"and with the baseline equally, so absolute numbers are lower than a remote client would measure; "+
		"the ratios against the baseline are the figures to compare across machines.\n", m.nproc)
	if rep.log != nil {
		fmt.Fprintf(&b, "- Log rows: %d entries written over the last %d s into real journal files by `systemd-journal-remote` "+
			"(three in four of the service's units, one in four sshd's, which the unit filter drops). Seek: a whole-boot "+
			"`GET /api/log?seek=0` through kvmd (its own process, read to the end by the driver) against journalctl alone running the "+
			"command kvmd runs (`%s`, with DIR the journal's directory), its output read the same way; the rounds alternate which goes first; the ratio is the median of each round's kvmd time over its journalctl time. "+
			"Follow: a client attached to `/api/log?follow=1` on another kvmd; each of %d entries is written with systemd-journal-remote "+
			"and timed until its line arrives at the client.\n",
			rep.log.entries, rep.log.entries/1000, argvText(rep.log.argv), len(rep.log.latency))
	}
	if rep.ws != nil {
		fmt.Fprint(&b, wsMethod(rep.ws))
	}
	fmt.Fprintf(&b, "- Idle RSS is VmRSS from `/proc/PID/status` after kvmd answered one request and then sat idle for %s. "+
		"Start to listening is the time from exec to the first HTTP response on `GET /api/auth/check` (polled every %s).\n",
		cfg.Idle, pollEvery)
	fmt.Fprintf(&b, "- Targets are reported, not enforced: a miss does not fail the run. A wrong status or a broken connection in any round does (non-zero exit).\n")
	return b.Bytes()
}

// machine describes where the run happened.
type machine struct {
	nproc    int
	cpuModel string
	kernel   string
	goDriver string
	goKVMD   string
}

func readMachine(kvmdPath string) machine {
	m := machine{nproc: runtime.NumCPU(), cpuModel: "unknown CPU", kernel: "unknown", goDriver: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		if model := parseCPUModel(io.LimitReader(f, 1<<20)); model != "" {
			m.cpuModel = model
		}
		f.Close()
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		m.kernel = strings.TrimSpace(string(out))
	}
	if bi, err := buildinfo.ReadFile(kvmdPath); err == nil {
		m.goKVMD = bi.GoVersion
	}
	return m
}

// parseCPUModel returns the CPU name from /proc/cpuinfo: "model name" on x86,
// the board's "Model" line on a Raspberry Pi, else "Hardware" or "CPU part".
func parseCPUModel(r io.Reader) string {
	found := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, seen := found[k]; !seen && v != "" {
			found[k] = v
		}
	}
	for _, k := range []string{"model name", "Model", "Hardware", "CPU part"} {
		if v, ok := found[k]; ok {
			return v
		}
	}
	return ""
}

func fmtRPS(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2fx", v)
}

func fmtLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return "—"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtMiB(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// crossSize is the size of one release build.
type crossSize struct {
	arch string
	size int64
}

// targetARM64Size is the developers' guide's limit for the stripped arm64 binary.
const targetARM64Size = 12 << 20

// readCrossSizes returns the sizes of the release builds kvmd-linux-ARCH
// in dir that exist.
func readCrossSizes(dir string) []crossSize {
	var out []crossSize
	for _, arch := range []string{"amd64", "arm64", "armv7", "armv6"} {
		if st, err := os.Stat(filepath.Join(dir, "kvmd-linux-"+arch)); err == nil {
			out = append(out, crossSize{arch, st.Size()})
		}
	}
	return out
}

// argvText shows a command line with its paths reduced to base names and
// the journal's directory as DIR, as the report's notes quote it.
func argvText(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case strings.HasPrefix(a, "--directory="):
			a = "--directory=DIR"
		case i == 0 || strings.HasPrefix(a, "/"):
			a = filepath.Base(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// seekRatio is the median over rounds of kvmd's seek time over
// journalctl's in the same round: the two run back to back, so a spell of
// noise on the machine falls on both of a pair more often than on the
// separate medians.
func seekRatio(l *logResult) float64 {
	var rs []float64
	for i := range min(len(l.kvmd), len(l.jctl)) {
		rs = append(rs, ratio(float64(l.kvmd[i]), float64(l.jctl[i])))
	}
	return median(rs)
}
