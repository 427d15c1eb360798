package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/internal/sleep"
)

// The "Under load" section: what holding many idle connections costs
// kvmd against a bare net/http server, what its default connection caps
// do with more, how long a real login takes while 48 addresses send
// wrong passwords, against a login with no flood, all in the same run,
// and whether an admin still logs in and follows the log while one
// viewer's token asks for a thousand WebSockets and twenty follows
// (sharesbench.go).
const (
	stressConns      = 5000 // idle connections held by each server
	stressCapSources = 100  // source addresses of the default-caps attempt
	floodAddrs       = 48
	floodPerAddr     = 2 // connections per flooding address, each a closed loop
	floodLogins      = 5 // timed logins, with and without the flood
	targetFloodLogin = time.Second
)

type stressResult struct {
	// Idle connections, kvmd with its caps raised to hold them all.
	conns                      int
	kvmdBefore, kvmdHeld       int64
	baseBefore, baseHeld       int64
	kvmdAnswered, baseAnswered int
	capAttempted, capHeld      int // default caps
	capRSS                     int64
	capRequest                 time.Duration
	capMax, capPerAddr         int
	// Logins.
	loginAlone, loginFlood  []time.Duration
	floodSent, floodLimited atomic.Int64
	floodWarm               time.Duration
	hashCost                string
	// One viewer's streams and an admin beside them.
	shares *sharesResult
}

// runStress measures the section with kvmd and `kvmbench baseline`, one
// after the other, the machine otherwise idle.
func runStress(ctx context.Context, cfg runConfig, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*stressResult, error) {
	res := &stressResult{conns: stressConns, capMax: 1024, capPerAddr: 64}

	// Idle connections: kvmd with raised caps, then the baseline.
	n := strconv.Itoa(stressConns + 100)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := procs.start("kvmd", kvmd, []string{"serve", "--listen", addr, "--users", users,
		"--max-connections", n, "--max-connections-per-address", n}, filepath.Join(dir, "kvmd-conns.log"))
	if err != nil {
		return nil, err
	}
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return nil, err
	}
	hdr := []string{"X-KVMD-User: " + benchUser, "X-KVMD-Passwd: " + passwd}
	res.kvmdBefore, res.kvmdHeld, res.kvmdAnswered, err = holdIdle(ctx, cfg, srv, addr, rawRequest("GET", "/api/auth/check", addr, hdr, nil))
	procs.stop(srv, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("kvmd idle connections: %w", err)
	}
	logf("idle connections: kvmd %s → %s holding %d", fmtMiB(res.kvmdBefore), fmtMiB(res.kvmdHeld), res.kvmdAnswered)

	baseAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	base, err := procs.start("baseline", cfg.Self, []string{"baseline", "--listen", baseAddr}, filepath.Join(dir, "baseline-conns.log"))
	if err != nil {
		return nil, err
	}
	if _, err := waitListening(ctx, base, baseAddr); err != nil {
		return nil, err
	}
	res.baseBefore, res.baseHeld, res.baseAnswered, err = holdIdle(ctx, cfg, base, baseAddr, rawRequest("GET", "/api/auth/check", baseAddr, nil, nil))
	procs.stop(base, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("baseline idle connections: %w", err)
	}
	logf("idle connections: baseline %s → %s holding %d", fmtMiB(res.baseBefore), fmtMiB(res.baseHeld), res.baseAnswered)

	// The same number against kvmd's default caps, from 100 addresses,
	// sending nothing (slow clients); then a request from another address.
	if addr, err = freeAddr(); err != nil {
		return nil, err
	}
	srv, err = procs.start("kvmd", kvmd, []string{"serve", "--listen", addr, "--users", users}, filepath.Join(dir, "kvmd-caps.log"))
	if err != nil {
		return nil, err
	}
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return nil, err
	}
	err = capsAttempt(ctx, cfg, srv, addr, hdr, res)
	procs.stop(srv, 3*time.Second)
	if err != nil {
		return nil, fmt.Errorf("default caps: %w", err)
	}
	logf("default caps: %d attempted, %d held, RSS %s, a new request %v", res.capAttempted, res.capHeld, fmtMiB(res.capRSS), res.capRequest)

	// Logins: each user logs in once (a real hash: the verification cache
	// has never seen them), alone and then under the flood.
	if err := runFlood(ctx, procs, kvmd, passwd, dir, res, logf); err != nil {
		return nil, err
	}
	if res.shares, err = runShares(ctx, procs, kvmd, dir, logf); err != nil {
		return nil, fmt.Errorf("one viewer's streams: %w", err)
	}
	return res, nil
}

// holdIdle opens stressConns keep-alive connections to c at addr, sends
// req once on each and reads the answer, and reads c's RSS before and
// after an idle pause with all of them open.
func holdIdle(ctx context.Context, cfg runConfig, c *child, addr string, req []byte) (before, held int64, answered int, err error) {
	if err := sleep.For(ctx, cfg.Idle); err != nil {
		return 0, 0, 0, err
	}
	if before, err = readVmRSS(c.cmd.Process.Pid); err != nil {
		return 0, 0, 0, err
	}
	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for i := range stressConns {
		cn, err := dialFrom(ctx, sourceAddr(1, i/200), addr)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("connection %d: %w", i+1, err)
		}
		conns = append(conns, cn)
		cn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := cn.Write(req); err != nil {
			return 0, 0, 0, fmt.Errorf("connection %d: %w", i+1, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("connection %d: %w", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, 0, 0, fmt.Errorf("connection %d: status %d", i+1, resp.StatusCode)
		}
		cn.SetDeadline(time.Time{})
		answered++
	}
	if err := sleep.For(ctx, cfg.Idle); err != nil {
		return 0, 0, 0, err
	}
	if c.exited() {
		return 0, 0, 0, c.exitError()
	}
	held, err = readVmRSS(c.cmd.Process.Pid)
	return before, held, answered, err
}

// capsAttempt opens stressConns connections that send nothing, from
// stressCapSources addresses, counts those kvmd keeps open, and times a
// request from yet another address meanwhile.
func capsAttempt(ctx context.Context, cfg runConfig, c *child, addr string, hdr []string, res *stressResult) error {
	// The password's hash, once, before: the timed request below is then
	// answered from the verification cache, as a client's next request.
	if err := checkOnce(ctx, addr, hdr); err != nil {
		return err
	}
	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	for i := range stressConns {
		cn, err := dialFrom(ctx, sourceAddr(2, i%stressCapSources), addr)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i+1, err)
		}
		conns = append(conns, cn)
		res.capAttempted++
	}
	if err := sleep.For(ctx, cfg.Idle); err != nil {
		return err
	}
	var probe [1]byte
	for _, cn := range conns {
		cn.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := cn.Read(probe[:]); isTimeout(err) {
			res.capHeld++
		}
	}
	var err error
	if res.capRSS, err = readVmRSS(c.cmd.Process.Pid); err != nil {
		return err
	}
	start := time.Now()
	if err := checkOnce(ctx, addr, hdr); err != nil {
		return fmt.Errorf("a request beside them: %w", err)
	}
	res.capRequest = time.Since(start)
	return nil
}

// checkOnce sends one GET /api/auth/check with hdr on a new connection
// from an address of its own, and wants 200.
func checkOnce(ctx context.Context, addr string, hdr []string) error {
	cn, err := dialFrom(ctx, sourceAddr(3, 1), addr)
	if err != nil {
		return err
	}
	defer cn.Close()
	cn.SetDeadline(time.Now().Add(10 * time.Second))
	cn.Write(rawRequest("GET", "/api/auth/check", addr, hdr, nil))
	resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sourceAddr is a loopback source address 127.net.hi.lo+1: Linux answers
// the whole 127/8, so each is a client address of its own to kvmd.
func sourceAddr(net, i int) string {
	return fmt.Sprintf("127.%d.%d.%d", net, i/250, i%250+1)
}

func dialFrom(ctx context.Context, src, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// runFlood times floodLogins logins alone, then floodLogins more while
// floodAddrs addresses send wrong passwords to /api/auth/login as fast as
// they are answered.
func runFlood(ctx context.Context, procs *children, kvmd, passwd, dir string, res *stressResult, logf func(string, ...any)) error {
	users := filepath.Join(dir, "htpasswd-flood")
	var names []string
	for i := range 2 * floodLogins {
		name := "login" + strconv.Itoa(i+1)
		if err := addUser(ctx, kvmd, users, name, passwd); err != nil {
			return err
		}
		names = append(names, name)
	}
	res.hashCost = "bcrypt as written by `kvmd user add`"
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv, err := procs.start("kvmd", kvmd, []string{"serve", "--listen", addr, "--users", users}, filepath.Join(dir, "kvmd-flood.log"))
	if err != nil {
		return err
	}
	defer procs.stop(srv, 3*time.Second)
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return err
	}
	loginOnce := func(name string) (time.Duration, error) {
		body := []byte("user=" + name + "&passwd=" + passwd)
		cn, err := dialFrom(ctx, "127.5.0.1", addr)
		if err != nil {
			return 0, err
		}
		defer cn.Close()
		start := time.Now()
		cn.SetDeadline(time.Now().Add(30 * time.Second))
		cn.Write(rawRequest("POST", "/api/auth/login", addr, []string{"Content-Type: application/x-www-form-urlencoded"}, body))
		resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("login %s: status %d", name, resp.StatusCode)
		}
		return d, nil
	}
	for _, name := range names[:floodLogins] {
		d, err := loginOnce(name)
		if err != nil {
			return err
		}
		res.loginAlone = append(res.loginAlone, d)
	}

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var answeredAddrs atomic.Int64
	for a := range floodAddrs {
		src := sourceAddr(4, a)
		var once sync.Once
		for w := range floodPerAddr {
			wg.Go(func() {
				flood(fctx, src, addr, w, &res.floodSent, &res.floodLimited, func() { once.Do(func() { answeredAddrs.Add(1) }) })
			})
		}
	}
	// A sustained flood: every address has had an answer (a failure
	// counted, or a block).
	start := time.Now()
	for answeredAddrs.Load() < floodAddrs && time.Since(start) < time.Minute && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	res.floodWarm = time.Since(start)
	for _, name := range names[floodLogins:] {
		d, err := loginOnce(name)
		if err != nil {
			stop()
			wg.Wait()
			return fmt.Errorf("under the flood: %w", err)
		}
		res.loginFlood = append(res.loginFlood, d)
	}
	stop()
	wg.Wait()
	if srv.exited() {
		return srv.exitError()
	}
	logf("login: alone %v, under a %d-address flood %v (%d wrong passwords sent, %d answered 429)",
		medianInt(res.loginAlone), floodAddrs, medianInt(res.loginFlood), res.floodSent.Load(), res.floodLimited.Load())
	return nil
}

// flood sends wrong passwords from src on one keep-alive connection until
// ctx ends, reconnecting when kvmd closes it.
func flood(ctx context.Context, src, addr string, w int, sent, limited *atomic.Int64, answered func()) {
	var cn net.Conn
	var br *bufio.Reader
	defer func() {
		if cn != nil {
			cn.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		if cn == nil {
			var err error
			if cn, err = dialFrom(ctx, src, addr); err != nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			br = bufio.NewReader(cn)
			c := cn
			context.AfterFunc(ctx, func() { c.Close() })
		}
		body := []byte("user=login1&passwd=wrong-" + strconv.Itoa(w) + "-" + strconv.Itoa(i))
		cn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := cn.Write(rawRequest("POST", "/api/auth/login", addr, []string{"Content-Type: application/x-www-form-urlencoded"}, body)); err != nil {
			cn.Close()
			cn = nil
			continue
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			cn.Close()
			cn = nil
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sent.Add(1)
		answered()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited.Add(1)
			// A refusal is cheap for both sides; a short pause keeps
			// the flood from being a CPU spin of the driver itself.
			time.Sleep(10 * time.Millisecond)
		}
		if resp.Close {
			cn.Close()
			cn = nil
		}
	}
}

// writeStress writes the section's tables.
func writeStress(w io.Writer, s *stressResult) {
	perConn := func(before, held int64, n int) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f KiB", float64(held-before)/float64(n)/1024)
	}
	fmt.Fprintf(w, "| idle keep-alive connections held | RSS before | RSS holding them | per connection |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(w, "| baseline, %d | %s | %s | %s |\n", s.baseAnswered, fmtMiB(s.baseBefore), fmtMiB(s.baseHeld), perConn(s.baseBefore, s.baseHeld, s.baseAnswered))
	fmt.Fprintf(w, "| kvmd (caps raised), %d | %s | %s | %s |\n", s.kvmdAnswered, fmtMiB(s.kvmdBefore), fmtMiB(s.kvmdHeld), perConn(s.kvmdBefore, s.kvmdHeld, s.kvmdAnswered))
	if s.baseHeld > s.baseBefore && s.baseAnswered > 0 {
		fmt.Fprintf(w, "| kvmd / baseline, per connection | | | %.2fx |\n",
			float64(s.kvmdHeld-s.kvmdBefore)/float64(s.kvmdAnswered)/(float64(s.baseHeld-s.baseBefore)/float64(s.baseAnswered)))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| measure | value | target | result |\n|---|---:|---|---|\n")
	fmt.Fprintf(w, "| default caps (%d, %d per address): slow connections attempted from %d addresses / held open | %d / %d | held ≤ %d | %s |\n",
		s.capMax, s.capPerAddr, stressCapSources, s.capAttempted, s.capHeld, s.capMax, verdict(true, s.capHeld <= s.capMax))
	fmt.Fprintf(w, "| default caps: RSS with them | %s | — | — |\n", fmtMiB(s.capRSS))
	fmt.Fprintf(w, "| default caps: a request from another address meanwhile | %s | < 1 s | %s |\n", fmtLatency(s.capRequest), verdict(true, s.capRequest < time.Second))
	alone, flooded := medianInt(s.loginAlone), medianInt(s.loginFlood)
	fmt.Fprintf(w, "| login, nothing else running (median of %d) | %s | reference | — |\n", len(s.loginAlone), fmtLatency(alone))
	fmt.Fprintf(w, "| login under a %d-address wrong-password flood (median of %d, max %s) | %s (%.1fx) | < %s | %s |\n",
		floodAddrs, len(s.loginFlood), fmtLatency(maxDur(s.loginFlood)), fmtLatency(flooded), float64(flooded)/float64(max(alone, 1)),
		fmtLatency(targetFloodLogin), verdict(true, flooded < targetFloodLogin))
	fmt.Fprintf(w, "| the flood: wrong passwords sent / answered 429 | %d / %d | — | — |\n", s.floodSent.Load(), s.floodLimited.Load())
	if s.shares != nil {
		writeShares(w, s.shares)
	}
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// stressMethod is the section's prose.
func stressMethod(s *stressResult) string {
	return fmt.Sprintf("**Idle connections.** kvmd (`serve`, no demo, its caps raised to %d for this row) and the bare `kvmbench baseline` are each started alone; "+
		"after %s idle their VmRSS is read, then %d keep-alive connections are opened to each (from loopback addresses 127.1.x.y), "+
		"each sends one `GET /api/auth/check` (to kvmd with `X-KVMD-User`/`X-KVMD-Passwd`, answered from the verification cache after the first) and reads the answer, "+
		"and after another %s idle with all of them open VmRSS is read again. "+
		"**Default caps.** kvmd with its defaults gets %d connections from %d addresses that send nothing (slow clients); after the idle pause, the ones still open are counted, "+
		"and a request from another address is timed from connect to answer. "+
		"**Login under a flood.** A users file of %d users made with `kvmd user add` (%s); each logs in once with `POST /api/auth/login`, "+
		"so every login is a real hash (the verification cache has never seen it). %d of them log in one after the other with nothing else running; then %d addresses "+
		"(127.4.0.1–%d) send wrong passwords for one user to `/api/auth/login`, %d connections each in a closed loop (a 429 answer is followed by a 10 ms pause), and once every "+
		"flooding address has had an answer (%s) the other %d log in one after the other from 127.5.0.1, timed from the request to the answer. All on this machine's cores, over loopback.\n\n",
		stressConns+100, "1s", stressConns, "1s", stressConns, stressCapSources, 2*floodLogins, s.hashCost, floodLogins, floodAddrs, floodAddrs,
		floodPerAddr, s.floodWarm.Round(10*time.Millisecond), floodLogins) + sharesMethod()
}
