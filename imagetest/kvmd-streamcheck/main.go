// Command kvmd-streamcheck reads an MJPEG stream in the booted test's
// guest (built for arm64 by the test, copied in through the shared
// directory), where the streamer's own socket is:
//
//	kvmd-streamcheck rate SOCKET PATH SECONDS [PID]
//	kvmd-streamcheck pair SOCKET PATH SOCKET2 PATH2 SECONDS
//	kvmd-streamcheck stall SOCKET PATH SECONDS
//
// rate GETs PATH over the unix socket SOCKET (ustreamer's, or the
// daemon's, where root is trusted by its peer credentials), and counts the
// frames that come in SECONDS after the first one. It prints one JSON
// object: the time from the request to the first whole frame, the frames
// and their mean size, and, with PID, the CPU time that process used over
// the count (utime and stime of /proc/PID/stat, in clock ticks).
//
// pair reads two streams at once for SECONDS (ustreamer's own and the
// daemon's, say): both clients share the machine as it is at that time,
// so their rates compare. It prints a JSON array of the two reports.
//
// stall opens the stream, reads its headers and then nothing for SECONDS:
// a client that stopped reading.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: kvmd-streamcheck rate|stall SOCKET PATH SECONDS [PID]")
		os.Exit(2)
	}
	seconds := func(arg string) time.Duration {
		secs, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			fail(err)
		}
		return time.Duration(secs * float64(time.Second))
	}
	switch os.Args[1] {
	case "rate":
		pid := 0
		if len(os.Args) > 5 {
			pid, _ = strconv.Atoi(os.Args[5])
		}
		if err := rate(os.Args[2], os.Args[3], seconds(os.Args[4]), pid); err != nil {
			fail(err)
		}
	case "pair":
		if len(os.Args) < 7 {
			fail(fmt.Errorf("pair needs SOCKET PATH SOCKET2 PATH2 SECONDS"))
		}
		if err := pair(os.Args[2], os.Args[3], os.Args[4], os.Args[5], seconds(os.Args[6])); err != nil {
			fail(err)
		}
	case "stall":
		if err := stall(os.Args[2], os.Args[3], seconds(os.Args[4])); err != nil {
			fail(err)
		}
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kvmd-streamcheck:", err)
	os.Exit(1)
}

func open(ctx context.Context, sock, path string) (*http.Response, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}, DisableCompression: true}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://localhost"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: HTTP %d %s", path, resp.StatusCode, b)
	}
	return resp, nil
}

// cpuTicks is utime + stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the command: state is field 3, utime 14, stime 15.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return u + st, nil
}

type report struct {
	FirstMS       float64 `json:"first_ms"`
	Frames        int     `json:"frames"`
	Seconds       float64 `json:"seconds"`
	FPS           float64 `json:"fps"`
	BytesPerFrame int64   `json:"bytes_per_frame"`
	CPUTicks      int64   `json:"cpu_ticks,omitempty"`
}

func rate(sock, path string, d time.Duration, pid int) error {
	r, err := measure(sock, path, d, pid)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

func pair(sock1, path1, sock2, path2 string, d time.Duration) error {
	type result struct {
		r   report
		err error
	}
	c := make(chan result, 1)
	go func() {
		r, err := measure(sock2, path2, d, 0)
		c <- result{r, err}
	}()
	r1, err := measure(sock1, path1, d, 0)
	r2 := <-c
	if err != nil {
		return err
	}
	if r2.err != nil {
		return r2.err
	}
	return json.NewEncoder(os.Stdout).Encode([]report{r1, r2.r})
}

// measure opens the stream and counts its frames for d after the first.
func measure(sock, path string, d time.Duration, pid int) (report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	start := time.Now()
	var r report
	resp, err := open(ctx, sock, path)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return r, fmt.Errorf("not a multipart stream: %q", resp.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bufio.NewReaderSize(resp.Body, 256<<10), params["boundary"])
	frame := func() (int64, error) {
		p, err := mr.NextPart()
		if err != nil {
			return 0, err
		}
		return io.Copy(io.Discard, p)
	}
	if _, err := frame(); err != nil {
		return r, err
	}
	r.FirstMS = float64(time.Since(start).Microseconds()) / 1000
	var t0 int64
	if pid > 0 {
		if t0, err = cpuTicks(pid); err != nil {
			return r, err
		}
	}
	counted := time.Now()
	var bytes int64
	for time.Since(counted) < d {
		n, err := frame()
		if err != nil {
			return r, fmt.Errorf("after %d frames: %w", r.Frames, err)
		}
		bytes += n
		r.Frames++
	}
	r.Seconds = time.Since(counted).Seconds()
	if pid > 0 {
		t1, err := cpuTicks(pid)
		if err != nil {
			return r, err
		}
		r.CPUTicks = t1 - t0
	}
	r.FPS = float64(r.Frames) / r.Seconds
	if r.Frames > 0 {
		r.BytesPerFrame = bytes / int64(r.Frames)
	}
	return r, nil
}

func stall(sock, path string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	resp, err := open(ctx, sock, path)
	if err != nil {
		return err
	}
	fmt.Println("stalled")
	time.Sleep(d)
	resp.Body.Close()
	return nil
}
