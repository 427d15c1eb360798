package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"kvmd/internal/procgroup"
)

// The "Under attack" section (issue 42): what an outsider, a viewer and a
// user being removed can make the daemon do.
const (
	attackBodies     = 240     // unauthenticated bodies sent at once
	attackBodySize   = 1 << 20 // each, the print's limit
	attackPrints     = 240     // operators' prints sent at once, against the budget
	attackRounds     = 20      // revocations of each way
	attackPrintWatch = 3 * time.Second

	targetBodiesOver = 48 << 20
	targetPrintOver  = 8 << 20
	targetRevokeMax  = 500 * time.Millisecond
)

// The revocation ways, in the table's order: key, and the row's words.
var attackWays = []struct{ key, row string }{
	{"api-del", "`DELETE /api/auth/users?name=op` by an admin, from its send"},
	{"api-role", "`PATCH /api/auth/users` `{\"role\":\"viewer\"}`, from its send"},
	{"cmd-del", "`kvmd user del op`, from the command's start"},
	{"cmd-role", "`kvmd user set op --role viewer`, from the command's start"},
}

// The long requests one viewer holds, in the table's order.
var attackKinds = []struct {
	key, row, path string
	share          int
}{
	{"ws", "WebSockets (`/api/ws`)", "/api/ws?stream=0", 16},
	{"follow", "log follows", "/api/log?follow=1", 5},
	{"video", "video streams (`/streamer/stream`)", "/streamer/stream", 8},
}

type attackResult struct {
	// 240 unauthenticated bodies: the daemon's RSS before and at its
	// highest, and the answers (status → count; 0: no answer).
	bodiesIdle, bodiesPeak int64
	bodiesStatus           map[int]int
	// 240 operators' prints at once: the same, against the budget.
	printsIdle, printsPeak int64
	printsStatus           map[int]int
	// One 1 MiB print: RSS before and at its highest while it types.
	printIdle, printPeak int64
	printStatus          int
	// Revocation: for each way, the time until both streams ended.
	revoke map[string][]time.Duration
	// One viewer holds every long request it may: what it got of each
	// kind (opened, refused 429, other), then the admin.
	held                    map[string][3]int
	loginAlone, loginBeside time.Duration
	adminWS, adminVideo     bool
	heldRSS                 int64
}

// runAttack measures the section on a demo daemon of its own (its
// stand-in host takes the prints, its generated picture is the video).
func runAttack(ctx context.Context, procs *children, kvmd, dir string, logf func(string, ...any)) (*attackResult, error) {
	res := &attackResult{revoke: map[string][]time.Duration{}, held: map[string][3]int{}}
	users, passwd, token, jdir, err := viewerSetup(ctx, kvmd, dir, "attack")
	if err != nil {
		return nil, err
	}
	if err := addUser(ctx, kvmd, users, "printer", passwd, "--role", "operator"); err != nil {
		return nil, err
	}
	start := func(name string) (*child, string, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, "", err
		}
		srv, err := procs.start(name, kvmd, []string{"serve", "--demo", "--listen", addr, "--users", users,
			"--journal-dir", jdir, "--access-log=false", "--max-connections-per-address", "1024"}, filepath.Join(dir, name+".log"))
		if err != nil {
			return nil, "", err
		}
		if _, err := waitListening(ctx, srv, addr); err != nil {
			procs.stop(srv, 3*time.Second)
			return nil, "", err
		}
		return srv, addr, nil
	}
	printer := "Authorization: " + basicValue("printer", passwd)
	body := []byte(strings.Repeat("The quick brown FOX jumps over the lazy dog.\n", attackBodySize/45+1)[:attackBodySize])

	// One 1 MiB print on a daemon of its own, watched while it types,
	// then reset.
	srv, addr, err := start("kvmd-attack-print")
	if err != nil {
		return nil, err
	}
	err = runOnePrint(ctx, res, srv.cmd.Process.Pid, addr, printer, body)
	procs.stop(srv, 3*time.Second)
	if err != nil {
		return nil, err
	}
	logf("attack: one 1 MiB print: RSS %s → %s at most (status %d after the reset)", fmtMiB(res.printIdle), fmtMiB(res.printPeak), res.printStatus)

	srv, addr, err = start("kvmd-attack")
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	pid := srv.cmd.Process.Pid

	// 240 unauthenticated 1 MiB prints from 240 addresses.
	if res.bodiesIdle, res.bodiesPeak, res.bodiesStatus, err = sendBodies(ctx, pid, addr, 10, attackBodies, nil, body); err != nil {
		return nil, err
	}
	logf("attack: %d unauthenticated 1 MiB bodies: RSS %s → %s at most; answers %v", attackBodies,
		fmtMiB(res.bodiesIdle), fmtMiB(res.bodiesPeak), res.bodiesStatus)
	// 240 operators' prints at once: the budget refuses some, each print
	// let in stops the one before (409), and a reset every second from
	// the third on stops the last.
	resets, stopResets := context.WithCancel(ctx)
	go func() {
		select {
		case <-resets.Done():
			return
		case <-time.After(attackPrintWatch - time.Second):
		}
		for t := time.NewTicker(time.Second); ; {
			select {
			case <-resets.Done():
				t.Stop()
				return
			case <-t.C:
				checkStatus(ctx, addr, "POST", "/api/hid/reset", []string{printer}, "", 200)
			}
		}
	}()
	res.printsIdle, res.printsPeak, res.printsStatus, err = sendBodies(ctx, pid, addr, 11, attackPrints, []string{printer}, body)
	stopResets()
	if err != nil {
		return nil, err
	}
	logf("attack: %d operators' 1 MiB prints: RSS %s → %s at most; answers %v", attackPrints,
		fmtMiB(res.printsIdle), fmtMiB(res.printsPeak), res.printsStatus)

	// The admin's changes go with a session: a password would be a hash
	// each round (every change of the users file empties the
	// verification cache), timed with the revocation.
	cookie, err := loginFrom(ctx, "127.0.0.1", addr, "admin", passwd)
	if err != nil {
		return nil, err
	}
	if err := runRevocations(ctx, res, kvmd, users, addr, "Cookie: auth_token="+cookie, logf); err != nil {
		return nil, err
	}
	if err := runViewerHolds(ctx, res, pid, addr, token, passwd); err != nil {
		return nil, err
	}
	logf("attack: beside the viewer's long requests %v the admin logs in in %v (alone %v)", res.held, res.loginBeside, res.loginAlone)
	if srv.exited() {
		return nil, srv.exitError()
	}
	return res, nil
}

func basicValue(user, passwd string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+passwd))
}

// watchRSS samples pid's VmRSS every 5 ms until stop is called, and
// returns the highest.
func watchRSS(pid int) (stop func() int64) {
	var most atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			if n, err := readVmRSS(pid); err == nil && n > most.Load() {
				most.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-finished
		return most.Load()
	}
}

// idleRSS is pid's VmRSS after a second without requests.
func idleRSS(ctx context.Context, pid int) (int64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Second):
	}
	return readVmRSS(pid)
}

// sendBodies sends n prints of body at once, each from its own address
// 127.net.x.y with hdr, writing the body while reading the answer, and
// returns the daemon's RSS before and at its highest, and the answers.
func sendBodies(ctx context.Context, pid int, addr string, net, n int, hdr []string, body []byte) (idle, peak int64, status map[int]int, err error) {
	if idle, err = idleRSS(ctx, pid); err != nil {
		return 0, 0, nil, err
	}
	head := rawRequest("POST", "/api/hid/print?limit=0", addr, append([]string{"Content-Type: text/plain",
		fmt.Sprintf("Content-Length: %d", len(body))}, hdr...), nil)
	status = map[int]int{}
	var mu sync.Mutex
	stop := watchRSS(pid)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st := sendBody(ctx, sourceAddr(net, i), addr, head, body)
			mu.Lock()
			status[st]++
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	return idle, stop(), status, nil
}

// sendBody sends one request and returns its status, 0 without one.
func sendBody(ctx context.Context, src, addr string, head, body []byte) int {
	c, err := dialFrom(ctx, src, addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(head); err != nil {
		return 0
	}
	go c.Write(body) // fails once the daemon has answered and closed
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// runOnePrint sends one 1 MiB print, watches the daemon's RSS while it
// types for attackPrintWatch, then resets the keyboard, which ends it.
func runOnePrint(ctx context.Context, res *attackResult, pid int, addr, hdr string, body []byte) error {
	var err error
	if res.printIdle, err = idleRSS(ctx, pid); err != nil {
		return err
	}
	c, err := dialFrom(ctx, "127.12.0.1", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := watchRSS(pid)
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(rawRequest("POST", "/api/hid/print?limit=0", addr, []string{"Content-Type: text/plain", hdr}, body)); err != nil {
		stop()
		return err
	}
	time.Sleep(attackPrintWatch)
	if err := checkStatus(ctx, addr, "POST", "/api/hid/reset", []string{hdr}, "", 200); err != nil {
		stop()
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	res.printPeak = stop()
	if err != nil {
		return fmt.Errorf("the print's answer: %w", err)
	}
	resp.Body.Close()
	res.printStatus = resp.StatusCode
	return nil
}

// checkStatus sends one request (with body, when not "") and fails
// unless it gets want.
func checkStatus(ctx context.Context, addr, method, path string, hdr []string, body string, want int) error {
	c, err := dialFrom(ctx, "127.0.0.1", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var b []byte
	if method != "GET" {
		b = []byte(body)
	}
	if _, err := c.Write(rawRequest(method, path, addr, hdr, b)); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		got, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, got)
	}
	return nil
}

// runRevocations measures each way attackRounds times: op, an operator,
// opens a WebSocket and a log follow with its password (Basic), then
// is removed or demoted; the time is until the later of the two ends.
func runRevocations(ctx context.Context, res *attackResult, kvmd, users, addr, admin string, logf func(string, ...any)) error {
	opPasswd, err := randomPassword()
	if err != nil {
		return err
	}
	op := "Authorization: " + basicValue("op", opPasswd)
	jsonHdr := "Content-Type: application/json"
	kvmdCmd := func(args ...string) error {
		cmd := exec.CommandContext(ctx, kvmd, append(args, "--users", users)...)
		cmd.SysProcAttr = procgroup.Attr()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kvmd %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for round := range attackRounds {
		for _, way := range attackWays {
			// op back, an operator, and let in as one.
			if err := checkStatus(ctx, addr, "POST", "/api/auth/users", []string{admin, jsonHdr},
				`{"name":"op","passwd":"`+opPasswd+`","role":"operator"}`, 200); err != nil {
				return err
			}
			if err := checkStatus(ctx, addr, "POST", "/api/hid/set_connected?connected=1", []string{op}, "", 200); err != nil {
				return err
			}
			ended, err := openAttackStreams(ctx, addr, op)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, way.key, err)
			}
			time.Sleep(20 * time.Millisecond)
			start := time.Now()
			switch way.key {
			case "api-del":
				err = checkStatus(ctx, addr, "DELETE", "/api/auth/users?name=op", []string{admin}, "", 200)
			case "api-role":
				err = checkStatus(ctx, addr, "PATCH", "/api/auth/users", []string{admin, jsonHdr}, `{"name":"op","role":"viewer"}`, 200)
			case "cmd-del":
				err = kvmdCmd("user", "del", "op")
			case "cmd-role":
				err = kvmdCmd("user", "set", "op", "--role", "viewer")
			}
			if err != nil {
				return err
			}
			var last time.Time
			for range 2 {
				select {
				case at := <-ended:
					last = at
				case <-time.After(5 * time.Second):
					return fmt.Errorf("round %d, %s: a stream of op was still open 5 s after", round+1, way.key)
				}
			}
			res.revoke[way.key] = append(res.revoke[way.key], last.Sub(start))
			if way.key != "api-del" && way.key != "cmd-del" {
				if err := checkStatus(ctx, addr, "DELETE", "/api/auth/users?name=op", []string{admin}, "", 200); err != nil {
					return err
				}
			}
		}
	}
	for _, way := range attackWays {
		med, most := medianMaxDur(res.revoke[way.key])
		logf("attack: op's streams ended after %s: median %v, max %v", way.key, med, most)
	}
	return nil
}

// openAttackStreams opens a WebSocket and a log follow with hdr, reads the
// first of each, and returns a channel that gets the time each ends.
func openAttackStreams(ctx context.Context, addr, hdr string) (<-chan time.Time, error) {
	ended := make(chan time.Time, 2)
	name, value, _ := strings.Cut(hdr, ": ")
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, "ws://"+addr+"/api/ws?stream=0", &websocket.DialOptions{HTTPHeader: http.Header{name: {value}}})
	if err != nil {
		return nil, fmt.Errorf("WebSocket: %w", err)
	}
	if _, _, err := c.Read(dctx); err != nil {
		c.CloseNow()
		return nil, err
	}
	go func() {
		defer c.CloseNow()
		for {
			if _, _, err := c.Read(ctx); err != nil {
				ended <- time.Now()
				return
			}
		}
	}()
	body, status, err := followFrom(ctx, "127.0.0.1", addr, hdr)
	if err != nil || status != 200 {
		return nil, fmt.Errorf("follow: %d %v", status, err)
	}
	br := bufio.NewReader(body)
	if _, err := br.ReadString('\n'); err != nil {
		body.Close()
		return nil, err
	}
	go func() {
		defer body.Close()
		io.Copy(io.Discard, br)
		ended <- time.Now()
	}()
	return ended, nil
}

func medianMaxDur(ds []time.Duration) (med, most time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(ds))
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[len(s)-1]
}

// runViewerHolds has the viewer's token ask for one more than its share
// of each kind of long request, all from 127.13.0.1, and holds what it
// got; beside them an admin logs in (a real hash), opens a WebSocket and
// a video stream.
func runViewerHolds(ctx context.Context, res *attackResult, pid int, addr, token, passwd string) error {
	start := time.Now()
	if _, err := loginFrom(ctx, "127.14.0.1", addr, "admin2", passwd); err != nil {
		return fmt.Errorf("the admin's login alone: %w", err)
	}
	res.loginAlone = time.Since(start)
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	bearer := "Authorization: Bearer " + token
	for _, k := range attackKinds {
		var got [3]int
		for range k.share + 1 {
			c, st, err := holdGet(ctx, "127.13.0.1", addr, k.path, bearer, k.key == "ws")
			switch {
			case err == nil && (st == 200 || st == 101):
				got[0]++
				held = append(held, c)
			case err == nil && st == 429:
				got[1]++
			default:
				got[2]++
			}
			if c != nil && !(err == nil && (st == 200 || st == 101)) {
				c.Close()
			}
		}
		res.held[k.key] = got
	}
	start = time.Now()
	// A real hash too: the users file changed since admin's password was
	// last checked (op removed), which empties the verification cache.
	cookie, err := loginFrom(ctx, "127.14.0.1", addr, "admin", passwd)
	if err != nil {
		return fmt.Errorf("the admin's login beside the viewer: %w", err)
	}
	res.loginBeside = time.Since(start)
	for _, k := range []struct {
		path string
		ok   *bool
	}{{"/api/ws?stream=0", &res.adminWS}, {"/streamer/stream", &res.adminVideo}} {
		c, st, err := holdGet(ctx, "127.14.0.1", addr, k.path, "Cookie: auth_token="+cookie, strings.HasPrefix(k.path, "/api/ws"))
		*k.ok = err == nil && (st == 200 || st == 101)
		if c != nil {
			c.Close()
		}
	}
	var err2 error
	res.heldRSS, err2 = readVmRSS(pid)
	return err2
}

// holdGet sends GET path from src with hdr (a WebSocket handshake when
// upgrade) and returns its connection, left open, and the status.
func holdGet(ctx context.Context, src, addr, path, hdr string, upgrade bool) (io.Closer, int, error) {
	c, err := dialFrom(ctx, src, addr)
	if err != nil {
		return nil, 0, err
	}
	hdrs := []string{hdr}
	if upgrade {
		hdrs = append(hdrs, "Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==")
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(rawRequest("GET", path, addr, hdrs, nil)); err != nil {
		c.Close()
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	c.SetDeadline(time.Time{})
	// What comes after (frames, events, lines) is left in the kernel's
	// buffers: the daemon holds each request as a slow client's.
	return c, resp.StatusCode, nil
}

// writeAttack writes the section's tables.
func writeAttack(w io.Writer, r *attackResult) {
	ans := func(m map[int]int) string {
		var keys []int
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			name := fmt.Sprint(k)
			if k == 0 {
				name = "none"
			}
			parts = append(parts, fmt.Sprintf("%d × %s", m[k], name))
		}
		return strings.Join(parts, ", ")
	}
	over := func(peak, idle int64) int64 { return max(peak-idle, 0) }
	fmt.Fprintf(w, "| measure | value | target | result |\n|---|---:|---|---|\n")
	fmt.Fprintf(w, "| %d unauthenticated 1 MiB `POST /api/hid/print` at once, from %d addresses: RSS over idle at its highest (idle %s) | %s | < %s | %s |\n",
		attackBodies, attackBodies, fmtMiB(r.bodiesIdle), fmtMiB(over(r.bodiesPeak, r.bodiesIdle)), fmtMiB(targetBodiesOver),
		verdict(true, over(r.bodiesPeak, r.bodiesIdle) < targetBodiesOver))
	fmt.Fprintf(w, "| their answers | %s | all 401 | %s |\n", ans(r.bodiesStatus), verdict(true, r.bodiesStatus[401] == attackBodies))
	fmt.Fprintf(w, "| %d operators' 1 MiB prints at once (the body budget, 4 MiB): RSS over idle at its highest (idle %s) | %s | — | — |\n",
		attackPrints, fmtMiB(r.printsIdle), fmtMiB(over(r.printsPeak, r.printsIdle)))
	fmt.Fprintf(w, "| their answers | %s | — | — |\n", ans(r.printsStatus))
	fmt.Fprintf(w, "| one 1 MiB print, its first %s of typing: RSS over idle at its highest (idle %s) | %s | < %s | %s |\n",
		attackPrintWatch, fmtMiB(r.printIdle), fmtMiB(over(r.printPeak, r.printIdle)), fmtMiB(targetPrintOver),
		verdict(true, over(r.printPeak, r.printIdle) < targetPrintOver))
	fmt.Fprintf(w, "| the print's answer after `POST /api/hid/reset` | %d | 409 (stopped) | %s |\n", r.printStatus, verdict(true, r.printStatus == 409))
	fmt.Fprintf(w, "\n| an operator's WebSocket and log follow (Basic) ended by | median | worst of %d | target | result |\n|---|---:|---:|---|---|\n", attackRounds)
	for _, way := range attackWays {
		med, most := medianMaxDur(r.revoke[way.key])
		fmt.Fprintf(w, "| %s | %s | %s | worst ≤ %s | %s |\n", way.row, fmtLatency(med), fmtLatency(most), fmtLatency(targetRevokeMax),
			verdict(true, len(r.revoke[way.key]) == attackRounds && most <= targetRevokeMax))
	}
	fmt.Fprintf(w, "\n| one viewer token asks for one more than its share, all from one address | opened / 429 / other | share | result |\n|---|---:|---:|---|\n")
	for _, k := range attackKinds {
		g := r.held[k.key]
		fmt.Fprintf(w, "| %s | %d / %d / %d | %d | %s |\n", k.row, g[0], g[1], g[2], k.share, verdict(true, g[0] == k.share && g[1] == 1))
	}
	fmt.Fprintf(w, "| beside them, an admin logs in (alone: %s) | %s | < %s | %s |\n",
		fmtLatency(r.loginAlone), fmtLatency(r.loginBeside), fmtLatency(targetAdminTime), verdict(true, r.loginBeside > 0 && r.loginBeside < targetAdminTime))
	fmt.Fprintf(w, "| beside them, the admin's WebSocket and video stream open | %s, %s | yes | %s |\n", yesNo(r.adminWS), yesNo(r.adminVideo), verdict(true, r.adminWS && r.adminVideo))
	fmt.Fprintf(w, "| RSS with the viewer's long requests held | %s | — | — |\n", fmtMiB(r.heldRSS))
}

// attackMethod is the section's prose.
func attackMethod() string {
	return fmt.Sprintf("kvmd (`serve --demo`: its stand-in host takes the keyboard's reports, its generated picture is the video; `--max-connections-per-address 1024`, "+
		"the access log off, a journal of %d entries written with systemd-journal-remote), users made with `kvmd user add` (bcrypt), the viewer's API token with `kvmd token add`; "+
		"its VmRSS is sampled every 5 ms from `/proc/PID/status`, idle being the figure after a second without requests. "+
		"The one print runs on a daemon of its own, started for it; the rest on another, in the order below. "+
		"**One print.** An operator sends one 1 MiB print (45-character lines); the RSS is watched while it types for %s, then `POST /api/hid/reset` stops it. "+
		"**Bodies.** %d connections from as many loopback addresses each send the headers of a `POST /api/hid/print?limit=0` announcing 1 MiB, without credentials, "+
		"then the 1 MiB while reading the answer; then the same with an operator's Basic credentials (the prints the budget lets in type on the stand-in host, each stopping the one before; a reset each second from the third on ends the last). "+
		"**Revocation.** User `op`, an operator, is made through the API; it opens `GET /api/ws` and `GET /api/log?follow=1` with Basic credentials and reads the first message of each; "+
		"then it is removed or demoted (the API by an admin's session), %d times each way, the ways in turn; the time is from the request's send (or the command's start) until the client sees the later of its two streams end. "+
		"**One viewer's long requests.** The viewer's token asks, from one address, for one more than its share of each kind below and holds what it got, read by nobody; "+
		"beside them an admin logs in and opens a WebSocket and a video stream (the other admin logged in alone before: each login a real hash). Snapshots are counted too (4 in flight a user), "+
		"but the demo's are answered at once, so none is held here. All over loopback, on this machine's cores.\n\n",
		sharesEntries, attackPrintWatch, attackBodies, attackRounds)
}
