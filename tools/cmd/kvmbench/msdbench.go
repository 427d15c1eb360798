package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The virtual media upload rows (issue 28): a 1 GiB image uploaded
// through kvmd (POST /api/msd/write, the raw body, over loopback) into its
// storage directory, against cat copying the same file to the same file
// system and sync flushing it, as a user copying the image onto the
// device's disk by hand would; both end with the data on disk.
const (
	msdRounds = 5
	// targetMSDRatio: the daemon's upload at least this fraction of cat's
	// throughput, median of the rounds' ratios. kvmd's upload also has
	// its client (kvmbench, sending the file) on the machine's cores,
	// and two more copies of the data (into and out of the socket).
	targetMSDRatio = 0.5
	// targetMSDRSS bounds the daemon's RSS while it takes the image.
	targetMSDRSS = 32 << 20
)

// msdResult is what the virtual media rows come from.
type msdResult struct {
	size      int64
	cat, kvmd []time.Duration // per round
	ratios    []float64       // per round: kvmd's throughput / cat's
	cpu       []time.Duration // per round: kvmd's user+system CPU time during its upload
	catCPU    []time.Duration // per round: cat's and sync's
	rssBefore int64
	rssMax    []int64 // per round: the highest VmRSS sampled every 20 ms during the upload
	dir       string
	err       error
}

// runMSDBench writes a file of size pseudo-random bytes, then,
// msdRounds times, alternating which goes first, times cat+sync of it to
// DIR/cat and its upload to kvmd serve --demo --msd-dir DIR/msd (the
// daemon fsyncs the image before it answers), sampling the daemon's
// VmRSS meanwhile; each copy is removed before the next.
func runMSDBench(ctx context.Context, procs *children, kvmd, users, passwd, dir string, size int64, logf func(string, ...any)) (*msdResult, error) {
	res := &msdResult{size: size, dir: dir}
	src := filepath.Join(dir, "msd-source.img")
	if err := writeRandomFile(src, size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	store, catDir := filepath.Join(dir, "msd"), filepath.Join(dir, "cat")
	for _, d := range []string{store, catDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	srv, addr, err := startDemo(ctx, procs, kvmd, users, dir, "kvmd-msd", nil, "--msd-dir", store)
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	pid := srv.cmd.Process.Pid
	if res.rssBefore, err = readVmRSS(pid); err != nil {
		return nil, err
	}
	// A session, as the web UI uploads with: no password hash per request.
	token, err := login(ctx, addr, benchUser, passwd)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for round := range msdRounds {
		var catTook, kvmdTook, catCPU time.Duration
		var rssMax int64
		var cpu time.Duration
		steps := []func() error{
			func() (err error) {
				catTook, catCPU, err = catSync(ctx, src, filepath.Join(catDir, "copy.img"))
				return err
			},
			func() (err error) {
				kvmdTook, rssMax, cpu, err = uploadImage(ctx, client, addr, token, src, size, pid)
				return err
			},
		}
		if round%2 == 1 {
			slices.Reverse(steps)
		}
		for _, step := range steps {
			// Each starts with nothing dirty in the page cache.
			if err := exec.CommandContext(ctx, "sync").Run(); err != nil {
				return nil, err
			}
			if err := step(); err != nil {
				res.err = fmt.Errorf("round %d: %w", round+1, err)
				logf("virtual media upload: FAILED: %v; last lines of %s:\n%s", res.err, srv.logPath, logTail(srv.logPath, 10))
				return res, nil
			}
		}
		if err := os.Remove(filepath.Join(catDir, "copy.img")); err != nil {
			return nil, err
		}
		if err := removeImage(ctx, client, addr, token); err != nil {
			res.err = err
			return res, nil
		}
		res.cat = append(res.cat, catTook)
		res.kvmd = append(res.kvmd, kvmdTook)
		res.ratios = append(res.ratios, catTook.Seconds()/kvmdTook.Seconds())
		res.rssMax = append(res.rssMax, rssMax)
		res.cpu = append(res.cpu, cpu)
		res.catCPU = append(res.catCPU, catCPU)
		logf("virtual media upload %d/%d: cat+sync %.0f MiB/s, kvmd %.0f MiB/s (%.2fx), RSS up to %.1f MiB, CPU %v",
			round+1, msdRounds, mibps(size, catTook), mibps(size, kvmdTook), res.ratios[round],
			float64(rssMax)/(1<<20), cpu.Round(time.Millisecond))
	}
	return res, nil
}

func mibps(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }

// writeRandomFile writes n pseudo-random bytes to path (incompressible, as
// an ISO's contents mostly are) and flushes them.
func writeRandomFile(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{'k', 'v', 'm', 'd'})
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := io.CopyN(w, r, n); err != nil {
		f.Close()
		return err
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// catSync copies src to dst with cat, then flushes dst with sync, and
// returns the time it took and the CPU time of the shell, cat and sync
// (wait4's rusage counts the children the shell waited for).
func catSync(ctx context.Context, src, dst string) (time.Duration, time.Duration, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "sh", "-c", `cat "$1" > "$2" && sync "$2"`, "sh", src, dst)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("cat and sync: %v: %s", err, out)
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// uploadImage sends src to kvmd as image bench.img and returns the time
// to its answer, the daemon's highest VmRSS meanwhile and the CPU time it
// used.
func uploadImage(ctx context.Context, client *http.Client, addr, token, src string, size int64, pid int) (time.Duration, int64, time.Duration, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/msd/write?image=bench.img", f)
	if err != nil {
		return 0, 0, 0, err
	}
	req.ContentLength = size
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})

	var rssMax int64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, err := readVmRSS(pid); err == nil {
				mu.Lock()
				rssMax = max(rssMax, rss)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	cpu0, err := cpuTime(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	took := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return 0, 0, 0, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprintf(`"written":%d`, size)) {
		return 0, 0, 0, fmt.Errorf("upload answered %d: %s", resp.StatusCode, body)
	}
	cpu1, err := cpuTime(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	return took, rssMax, cpu1 - cpu0, nil
}

func removeImage(ctx context.Context, client *http.Client, addr, token string) error {
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/api/msd/remove?image="+url.QueryEscape("bench.img"), nil)
	if err != nil {
		return err
	}
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("removing the image: %d", resp.StatusCode)
	}
	return nil
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, which Linux
// fixes at 100 for userspace on every architecture it runs kvmd on.
const userHZ = 100

// cpuTime is a process's user and system CPU time (/proc/PID/stat, fields
// 14 and 15, after the command name in parentheses).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return time.Duration(u+s) * time.Second / userHZ, nil
}

func (res *msdResult) failure() error {
	if res == nil {
		return nil
	}
	return res.err
}

func msdMethod(size int64) string {
	return fmt.Sprintf("A file of %d MiB of pseudo-random bytes (incompressible, as an ISO's contents mostly are) in kvmbench's temporary directory, on this machine's disk, "+
		"is copied %d times each way, the two alternately (their order swapped each round), `sync` run before each: "+
		"**cat** is `cat SRC > DIR/cat/copy.img && sync DIR/cat/copy.img` (coreutils' `sync FILE` fsyncs it), "+
		"**kvmd** is `POST /api/msd/write?image=bench.img` with the file as the raw body over loopback (plain HTTP, one connection, the session cookie of one login) to `kvmd serve --demo --msd-dir DIR/msd`, "+
		"timed to its answer, which comes once the image is fsynced and renamed into place. Both write the same file system; each copy is removed before the next. "+
		"The ratio is cat's time over kvmd's, per round (above 1: kvmd faster), and its median; kvmd's VmRSS is sampled every 20 ms during each upload, "+
		"its CPU time (user+system, /proc/PID/stat) read before and after; cat's is the shell's with cat and sync (wait4). "+
		"CPU time moves less with the machine's other work than throughput does.\n\n", size>>20, msdRounds)
}

func writeMSD(w io.Writer, res *msdResult) {
	if res.err != nil {
		fmt.Fprintf(w, "The virtual media upload failed: %v\n", res.err)
		return
	}
	fmt.Fprintf(w, "| round | cat+sync | kvmd upload | kvmd / cat | kvmd VmRSS, highest | CPU: cat+sync, kvmd |\n|---:|---:|---:|---:|---:|---:|\n")
	var cpuRatios []float64
	for i := range res.cat {
		fmt.Fprintf(w, "| %d | %.0f MiB/s (%.2f s) | %.0f MiB/s (%.2f s) | %.2fx | %.1f MiB | %.2f s, %.2f s |\n", i+1,
			mibps(res.size, res.cat[i]), res.cat[i].Seconds(), mibps(res.size, res.kvmd[i]), res.kvmd[i].Seconds(),
			res.ratios[i], float64(res.rssMax[i])/(1<<20), res.catCPU[i].Seconds(), res.cpu[i].Seconds())
		cpuRatios = append(cpuRatios, res.cpu[i].Seconds()/max(res.catCPU[i].Seconds(), 1e-3))
	}
	ratio := median(res.ratios)
	rss := slices.Max(res.rssMax)
	fmt.Fprintf(w, "\n| measure | value | target | result |\n|---|---:|---|---|\n")
	fmt.Fprintf(w, "| %d MiB upload through kvmd / cat+sync to the same disk (median of the rounds' ratios) | %.2fx | ≥ %.2fx | %s |\n",
		res.size>>20, ratio, targetMSDRatio, verdict(true, ratio >= targetMSDRatio))
	fmt.Fprintf(w, "| CPU time to land the image, kvmd / cat+sync (median of the rounds' ratios) | %.2fx | — | — |\n", median(cpuRatios))
	fmt.Fprintf(w, "| kvmd VmRSS during the uploads, highest (before them) | %.1f MiB (%.1f MiB) | < %d MiB | %s |\n",
		float64(rss)/(1<<20), float64(res.rssBefore)/(1<<20), targetMSDRSS>>20, verdict(true, rss < targetMSDRSS))
}
