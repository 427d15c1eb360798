package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"kvmd/internal/sleep"
	"kvmd/journal"
	demojournal "kvmd/journal/demo"
	"kvmd/journal/export"
)

// logResult is what the log rows of the report come from.
type logResult struct {
	entries    int
	lines      int             // lines kvmd sent for the whole boot
	kvmd, jctl []time.Duration // per round: the whole range through kvmd, and journalctl alone
	latency    []time.Duration // follow: journal write to bytes at the client
	argv       []string        // the command both ran (kvmd as a child, the baseline alone)
}

// Targets of the log rows.
const (
	targetSeekRatio     = 1.05
	targetFollowLatency = 50 * time.Millisecond
)

// writeBigJournal writes n entries over the last n milliseconds into real
// journal files with systemd-journal-remote: three of every four are the
// service's units, one is sshd's, which the daemon's unit filter drops.
func writeBigJournal(ctx context.Context, dir string, n int) error {
	remote, err := export.Remote()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, remote, "--output="+filepath.Join(dir, "big.journal"), "-")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	boot := "0123456789abcdef0123456789abcdef"
	units := []string{"kvmd.service", "kvmd-otg.service", "kvmd-vnc.service", "sshd.service"}
	end := time.Now()
	start := end.Add(-time.Duration(n) * time.Millisecond)
	bootStart := start.Add(-time.Hour)
	for i := range n {
		at := start.Add(time.Duration(i) * time.Millisecond)
		fields := append(export.Timestamps(at, bootStart), export.F("_BOOT_ID", boot),
			export.F("_SYSTEMD_UNIT", units[i%len(units)]),
			export.F("MESSAGE", fmt.Sprintf("http addr=192.168.1.%d method=GET path=/api/info status=200 bytes=2090 user=admin entry=%d", i%250, i)))
		if err := export.Write(w, fields); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	in.Close()
	return cmd.Wait()
}

// seekArgv is the command the daemon runs for a whole-boot read of the
// journal in dir (journalctl, under stdbuf where that works), so that the
// baseline does the same work minus kvmd's.
func seekArgv(dir string) ([]string, error) {
	return journal.New(journal.Config{Dir: dir}).Argv()
}

// countLines reads r to the end and counts its lines.
func countLines(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	n := 0
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 && b[len(b)-1] == '\n' {
			n++
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func logGet(ctx context.Context, addr, path, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, body)
	}
	return resp, nil
}

// runLogBench measures /api/log: a whole-boot read of cfg.LogEntries
// entries against journalctl printing the same range, and the latency of
// a follow.
func runLogBench(ctx context.Context, cfg runConfig, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*logResult, error) {
	res := &logResult{entries: cfg.LogEntries}
	big := filepath.Join(dir, "journal-big")
	t0 := time.Now()
	if err := writeBigJournal(ctx, big, cfg.LogEntries); err != nil {
		return nil, err
	}
	logf("wrote %d journal entries in %s", cfg.LogEntries, time.Since(t0).Round(time.Millisecond))

	serveLog := func(name, journalDir string) (*child, string, string, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, "", "", err
		}
		c, err := procs.start(name, kvmd, []string{"serve", "--listen", addr, "--users", users,
			"--journal-dir", journalDir, "--access-log=false"}, filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, "", "", err
		}
		if _, err := waitListening(ctx, c, addr); err != nil {
			return nil, "", "", err
		}
		token, err := login(ctx, addr, benchUser, passwd)
		return c, addr, token, err
	}

	argv, err := seekArgv(big)
	if err != nil {
		return nil, err
	}
	res.argv = argv
	c, addr, token, err := serveLog("kvmd-seek", big)
	if err != nil {
		return nil, err
	}
	// Twice the rounds, less one (an odd count): a seek takes seconds and
	// this machine's noise comes in spells of as long; more pairs give the
	// median of the pairs' ratios something to stand on.
	rounds := 2*cfg.Rounds - 1
	for round := range rounds {
		viaKvmd := func() error {
			start := time.Now()
			resp, err := logGet(ctx, addr, "/api/log?seek=0", token)
			if err != nil {
				return err
			}
			n, err := countLines(resp.Body)
			resp.Body.Close()
			res.kvmd = append(res.kvmd, time.Since(start))
			res.lines = n
			return err
		}
		alone := func() error {
			start := time.Now()
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				return err
			}
			if err := cmd.Start(); err != nil {
				return err
			}
			_, cerr := countLines(out)
			if err := cmd.Wait(); err != nil {
				return err
			}
			res.jctl = append(res.jctl, time.Since(start))
			return cerr
		}
		first, second := viaKvmd, alone
		if round%2 == 1 {
			first, second = alone, viaKvmd
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
		logf("round %d/%d log seek: kvmd %s, journalctl %s", round+1, rounds,
			res.kvmd[len(res.kvmd)-1].Round(time.Millisecond), res.jctl[len(res.jctl)-1].Round(time.Millisecond))
	}
	procs.stop(c, 3*time.Second)

	// Follow: a client attached, entries written one at a time.
	live := filepath.Join(dir, "journal-live")
	j, err := demojournal.Start(live, time.Now())
	if err != nil {
		return nil, err
	}
	defer j.Close()
	c, addr, token, err = serveLog("kvmd-follow", live)
	if err != nil {
		return nil, err
	}
	defer procs.stop(c, 3*time.Second)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := logGet(fctx, addr, "/api/log?follow=1&seek=1", token)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for i := range cfg.LogSamples {
		marker := fmt.Sprintf("kvmbench follow marker %d", i)
		start := time.Now()
		j.Append("kvmd.service", marker)
		timeout := time.After(5 * time.Second)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return nil, fmt.Errorf("follow ended early")
				}
				if strings.HasSuffix(l, marker) {
					res.latency = append(res.latency, time.Since(start))
					break wait
				}
			case <-timeout:
				return nil, fmt.Errorf("follow: %q not seen within 5 s", marker)
			}
		}
		if err := sleep.For(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
	logf("follow latency: median %s over %d entries", medianInt(res.latency).Round(10*time.Microsecond), len(res.latency))
	return res, nil
}
