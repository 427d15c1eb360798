// Command kvmd-whepcheck is the booted test's WebRTC peer, run in the
// guest (qemu's user network keeps the guest's UDP from the host): it
// signals to the daemon by WHEP over the daemon's unix socket (root is an
// admin there), receives N access units of its H.264 track with pion,
// writes them to OUT as an Annex B stream for the host to decode, ends
// the session with a DELETE, and prints what it saw as JSON.
//
//	kvmd-whepcheck SOCK N OUT
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"kvmd/whep/wheptest"
)

type result struct {
	FirstMS     float64 `json:"first_ms"` // the offer to the first unit
	Units       int     `json:"units"`
	Keys        int     `json:"keys"`
	Bytes       int     `json:"bytes"`
	FPS         float64 `json:"fps"` // units a second after the first
	PlayoutZero bool    `json:"playout_zero"`
	Deleted     int     `json:"deleted"` // the DELETE's status
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kvmd-whepcheck SOCK N OUT")
		os.Exit(2)
	}
	sock, out := os.Args[1], os.Args[3]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "N: a number of units")
		os.Exit(2)
	}
	if err := run(sock, n, out); err != nil {
		fmt.Fprintln(os.Stderr, "kvmd-whepcheck:", err)
		os.Exit(1)
	}
}

func run(sock string, n int, out string) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := wheptest.Dial(ctx, wheptest.Post(hc, "http://kvmd/api/media/whep", nil))
	if err != nil {
		return err
	}
	defer c.Close()
	var r result
	var stream []byte
	var first time.Time
	r.PlayoutZero = true
	for r.Units < n {
		u, err := c.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d units: %w", r.Units, err)
		}
		if r.Units == 0 {
			first = u.Arrived
			r.FirstMS = float64(time.Since(start).Microseconds()) / 1000
		}
		r.Units++
		if u.Key {
			r.Keys++
		}
		r.PlayoutZero = r.PlayoutZero && u.PlayoutZero
		r.Bytes += len(u.Data)
		stream = append(stream, u.Data...)
		if r.Units == n && n > 1 {
			r.FPS = float64(n-1) / u.Arrived.Sub(first).Seconds()
		}
	}
	if err := os.WriteFile(out, stream, 0o644); err != nil {
		return err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, "http://kvmd"+c.Location, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	r.Deleted = resp.StatusCode
	return json.NewEncoder(os.Stdout).Encode(r)
}
