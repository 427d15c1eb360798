package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	demojournal "kvmd/journal/demo"
)

// Web UI rows: kvmd's pages loaded in headless Chromium, against the bare
// page of `kvmbench baseline` loaded the same way.
const (
	targetPageLoad = 100 * time.Millisecond
	// targetPageRatio is issue 30's: a page's median load at most this
	// times the baseline page's in the same run.
	targetPageRatio = 1.3
	uiWarmup        = 3                // uncounted loads of each page
	uiLoadTimeout   = 15 * time.Second // one load, until loaded and ready
)

// uiPage is one row of the web UI table.
type uiPage struct {
	name string
	path string // URL path; the page must still be there when measured
	base bool   // served by the baseline, else by kvmd
	// signedOut loads the page without the session cookie: the login
	// page sends a signed-in user on to the dashboard.
	signedOut bool
}

var uiPages = []uiPage{
	{name: "baseline", path: basePagePath, base: true},
	{name: "/login", path: "/login", signedOut: true},
	{name: "/", path: "/"},
	{name: "/logs", path: "/logs"},
}

// uiRow collects one page's loads.
type uiRow struct {
	uiPage
	load, ready     []time.Duration
	requests, bytes int64 // finished requests and their body bytes, last load
}

func (r *uiRow) add(s uiSample) {
	r.load = append(r.load, msDuration(s.Load))
	r.ready = append(r.ready, msDuration(s.Ready))
	r.requests, r.bytes = s.Requests, s.Bytes
}

// uiResult is the outcome of the web UI rows.
type uiResult struct {
	loads   int
	browser string // Chromium's product string
	journal string // what the logs page read
	rows    []*uiRow
	skip    string // why nothing was measured, "" when it was
	err     error  // why measuring failed partway
}

// failure is the error the run ends with, nil when the rows were measured,
// skipped or not asked for.
func (res *uiResult) failure() error {
	if res == nil || res.err == nil {
		return nil
	}
	return fmt.Errorf("web UI: %w", res.err)
}

// uiSample is what a page reports about one load; times are milliseconds
// from navigation start.
type uiSample struct {
	Path     string  `json:"path"`
	Load     float64 `json:"load"`
	Ready    float64 `json:"ready"`
	Requests int64   `json:"requests"`
	Bytes    int64   `json:"bytes"`
}

// check tells whether s is a finished load of the page at path: a page
// that redirected elsewhere (to the login page: no session) is not.
func (s uiSample) check(path string) error {
	if s.Path != path {
		return fmt.Errorf("the page ended at %q, want %q", s.Path, path)
	}
	if !(s.Load > 0) || !(s.Ready > 0) {
		return fmt.Errorf("no times (load %v ms, ready %v ms)", s.Load, s.Ready)
	}
	return nil
}

// msDuration converts the browser's milliseconds to a duration, to the
// microsecond (Chromium's clock has 0.1 ms resolution).
func msDuration(ms float64) time.Duration {
	return time.Duration(math.Round(ms*1e3)) * time.Microsecond
}

// runUIBench loads each page of kvmd's web UI and the baseline's bare page
// cfg.UILoads times in one headless Chromium tab. Without Chromium the
// rows are skipped, saying why; a load that fails keeps its error. Only a
// cancelled ctx or a server that does not start ends it with an error.
func runUIBench(ctx context.Context, cfg runConfig, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*uiResult, error) {
	res := &uiResult{loads: cfg.UILoads}
	for _, p := range uiPages {
		res.rows = append(res.rows, &uiRow{uiPage: p})
	}
	chromium, err := findBrowser()
	if err != nil {
		res.skip = err.Error()
		logf("web UI: not measured: %s", res.skip)
		return res, nil
	}

	// The logs page reads the demo journal's entries, written here: kvmd's
	// own --demo journal would also take every line it logs.
	journalDir := filepath.Join(dir, "journal-ui")
	res.journal = "the demo journal (`journal/demo`: about ten of the service's entries in the page's default last hour, " +
		"written by the driver with systemd-journal-remote; kvmd's own log lines do not go into it)"
	if j, err := demojournal.Start(journalDir, time.Now()); err != nil {
		logf("web UI: no journal for the logs page: %v", err)
		journalDir = filepath.Join(dir, "no-journal")
		res.journal = fmt.Sprintf("no journal (%v): /api/log answers 503 and the page is ready once it says so", err)
	} else {
		defer j.Close()
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := procs.start("kvmd-ui", kvmd, demoServeArgs(addr, users, journalDir), filepath.Join(dir, "kvmd-ui.log"))
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return nil, err
	}
	token, err := login(ctx, addr, benchUser, passwd)
	if err != nil {
		return nil, fmt.Errorf("%w; last lines of %s:\n%s", err, srv.logPath, logTail(srv.logPath, 20))
	}
	base, baseAddr, err := startBaseline(ctx, cfg, procs, addr, token, dir, "baseline-ui")
	if err != nil {
		return nil, err
	}
	defer procs.stop(base, 3*time.Second)

	loader, err := newPageLoader(ctx, chromium, filepath.Join(dir, "chromium"), token)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.err = err
		logf("web UI: FAILED: %v", err)
		return res, nil
	}
	defer loader.Close()
	res.browser = loader.product

	for i := range uiWarmup + cfg.UILoads {
		for _, r := range rotate(res.rows, i) {
			host := addr
			if r.base {
				host = baseAddr
			}
			err := loader.session(!r.signedOut)
			var s uiSample
			if err == nil {
				s, err = loader.load("http://"+host+r.path, r.path)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				res.err = fmt.Errorf("%s, load %d: %w", r.name, i+1, err)
				logf("web UI: FAILED: %v", res.err)
				return res, nil
			}
			if i >= uiWarmup {
				r.add(s)
			}
		}
	}
	if srv.exited() {
		return nil, srv.exitError()
	}
	for _, r := range res.rows {
		logf("web UI %-8s load %-8s ready %-8s (medians of %d)", r.name,
			fmtLatency(medianInt(r.load)), fmtLatency(medianInt(r.ready)), len(r.load))
	}
	return res, nil
}

// reference is the baseline page's row, nil when there is none.
func (res *uiResult) reference() *uiRow {
	for _, r := range res.rows {
		if r.base {
			return r
		}
	}
	return nil
}

// meets returns r's median load over ref's and whether r meets the
// pages' targets.
func (r *uiRow) meets(ref *uiRow) (float64, bool) {
	load := medianInt(r.load)
	loadRatio := ratio(float64(load), float64(medianInt(ref.load)))
	return loadRatio, load < targetPageLoad && !math.IsNaN(loadRatio) && loadRatio <= targetPageRatio
}

// misses names the pages that miss their targets, for the report's list
// of misses.
func (res *uiResult) misses() []string {
	if res == nil || res.skip != "" {
		return nil
	}
	ref := res.reference()
	if ref == nil || len(ref.load) == 0 {
		return nil
	}
	var out []string
	for _, r := range res.rows {
		if _, ok := r.meets(ref); !r.base && len(r.load) > 0 && !ok {
			out = append(out, r.name+" page load")
		}
	}
	return out
}

// writeUI writes the web UI rows as a markdown table, then what the
// browser and the logs page were, then why the rows were not measured or
// failed.
func writeUI(w io.Writer, res *uiResult) {
	if res.skip != "" {
		fmt.Fprintf(w, "Not measured: %s.\n", res.skip)
		return
	}
	ref := res.reference()
	measured := ref != nil && len(ref.load) > 0
	if measured {
		fmt.Fprintf(w, "| page | load | load vs baseline | ready | ready vs baseline | requests, body bytes | target | result |\n")
		fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---|---|\n")
		for _, r := range res.rows {
			if len(r.load) == 0 {
				continue
			}
			loadRatio, ok := r.meets(ref)
			target, result := "reference", "—"
			if !r.base {
				target = fmt.Sprintf("load < %s, ≤ %.2fx", fmtLatency(targetPageLoad), targetPageRatio)
				result = verdict(true, ok)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d, %.1f KiB | %s | %s |\n", r.name,
				medianP90(r.load), fmtRatio(loadRatio),
				medianP90(r.ready), fmtRatio(ratio(float64(medianInt(r.ready)), float64(medianInt(ref.ready)))),
				r.requests, float64(r.bytes)/1024, target, result)
		}
		fmt.Fprintf(w, "\nMedians of %d loads each, p90 in brackets. Browser: %s. The logs page read %s.\n", res.loads, res.browser, res.journal)
	}
	if res.err != nil {
		if measured {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "- FAIL %v\n", res.err)
	}
}

// medianP90 formats "12.3 ms (14.1 ms)": the median and the 90th percentile.
func medianP90(ds []time.Duration) string {
	return fmt.Sprintf("%s (%s)", fmtLatency(medianInt(ds)), fmtLatency(percentile(ds, 0.9)))
}
