package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"time"
)

// diagResult is what the diagnostics row of the report comes from.
type diagResult struct {
	took  []time.Duration // request sent to last byte read
	sizes []int64
	name  string // the first bundle's file name
	files int    // and its number of files
	err   error
}

// Targets of the diagnostics row (issue 15).
const (
	targetDiagTime = 5 * time.Second
	targetDiagSize = 2 << 20
	diagSamples    = 3
)

// runDiagBench fetches the support bundle of the demo board from kvmd
// serve --demo (its own demo journal, the bundled Raspberry Pi 4 tree)
// diagSamples times, one after the other, and checks each is a zip
// archive with summary.txt first.
func runDiagBench(ctx context.Context, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*diagResult, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// No --journal-dir: the demo writes its own journal, as make run has it.
	srv, err := procs.start("kvmd-diag", kvmd, []string{"serve", "--demo", "--listen", addr, "--users", users}, filepath.Join(dir, "kvmd-diag.log"))
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return nil, err
	}
	res := &diagResult{}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range diagSamples {
		took, body, name, err := fetchBundle(ctx, client, addr, passwd)
		if err != nil {
			res.err = fmt.Errorf("sample %d: %w", i+1, err)
			logf("diagnostics: FAILED: %v; last lines of %s:\n%s", res.err, srv.logPath, logTail(srv.logPath, 10))
			return res, nil
		}
		z, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
		if err != nil || len(z.File) == 0 || z.File[0].Name != "summary.txt" {
			res.err = fmt.Errorf("sample %d: not a zip archive with summary.txt first (%v)", i+1, err)
			return res, nil
		}
		if i == 0 {
			res.name, res.files = name, len(z.File)
		}
		res.took = append(res.took, took)
		res.sizes = append(res.sizes, int64(len(body)))
		logf("diagnostics bundle %d: %v, %d bytes", i+1, took.Round(time.Millisecond), len(body))
	}
	return res, nil
}

func fetchBundle(ctx context.Context, client *http.Client, addr, passwd string) (time.Duration, []byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/diagnostics", nil)
	if err != nil {
		return 0, nil, "", err
	}
	req.SetBasicAuth(benchUser, passwd)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	took := time.Since(start)
	if err != nil {
		return 0, nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, "", fmt.Errorf("status %d: %.200s", resp.StatusCode, body)
	}
	_, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	return took, body, params["filename"], nil
}

func (res *diagResult) failure() error {
	if res == nil || res.err == nil {
		return nil
	}
	return fmt.Errorf("diagnostics: %w", res.err)
}

func diagMethod() string {
	return fmt.Sprintf("`GET /api/diagnostics` (Basic credentials) from kvmd `serve --demo`: the bundled Raspberry Pi 4 tree, the demo journal, the fake "+
		"capture device; fetched %d times one after another, each timed from the request to the last byte of the zip archive, which must open "+
		"with summary.txt first. Medians, the range in brackets.\n\n", diagSamples)
}

func writeDiag(w io.Writer, res *diagResult) {
	if res.err != nil {
		fmt.Fprintf(w, "FAILED: %v\n", res.err)
		return
	}
	took, size := medianInt(res.took), medianInt(res.sizes)
	fmt.Fprintf(w, "| row | time | size | target | result |\n|---|---:|---:|---|---|\n")
	fmt.Fprintf(w, "| diagnostics bundle on the demo board | %s [%s–%s] | %.1f KiB | < %s, < %s | %s |\n",
		fmtLatency(took), fmtLatency(minOf(res.took)), fmtLatency(maxOf(res.took)), float64(size)/1024,
		fmtLatency(targetDiagTime), fmtMiB(targetDiagSize), verdict(true, took < targetDiagTime && size < targetDiagSize))
	fmt.Fprintf(w, "\n%s: %d files.\n", res.name, res.files)
}

func minOf[T int64 | time.Duration](s []T) T {
	m := s[0]
	for _, v := range s {
		m = min(m, v)
	}
	return m
}

func maxOf[T int64 | time.Duration](s []T) T {
	m := s[0]
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
