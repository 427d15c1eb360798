package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// One viewer's API token asks for many streams at once: WebSockets from
// one address with the per-address cap raised to the whole table, and log
// follows; beside them an admin logs in and follows the log. The daemon's
// fair shares (httpd/shares.go) must leave the admin room.
const (
	sharesWS        = 1000 // WebSockets the viewer token asks for
	sharesFollows   = 20   // log follows it asks for
	sharesDialers   = 32   // of them at once
	sharesEntries   = 200  // in the journal the follows read
	targetAdminTime = time.Second
)

type sharesResult struct {
	maxConns, perUser, followers int
	// What the viewer's token got: opened, refused 429 (its share),
	// refused 503 (the room kept for admins), failed otherwise.
	ws, follows [4]int
	// The admin: login, and the time from a follow's request to its
	// first line, alone and beside the viewer's streams.
	loginAlone, loginLoaded   time.Duration
	followAlone, followLoaded time.Duration
	adminWS                   bool // the admin's WebSocket opened beside them
	refusalLines              int  // lines in kvmd's log about the viewer's refusals
	refusedTotal              int
	rss                       int64
}

// runShares measures the shares on a daemon of its own.
func runShares(ctx context.Context, procs *children, kvmd, dir string, logf func(string, ...any)) (*sharesResult, error) {
	res := &sharesResult{maxConns: 1024, perUser: 16, followers: 20}
	users, passwd, token, jdir, err := viewerSetup(ctx, kvmd, dir, "shares")
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "kvmd-shares.log")
	srv, err := procs.start("kvmd", kvmd, []string{"serve", "--listen", addr, "--users", users, "--journal-dir", jdir,
		"--max-connections-per-address", "1024"}, logPath)
	if err != nil {
		return nil, err
	}
	defer procs.stop(srv, 3*time.Second)
	if _, err := waitListening(ctx, srv, addr); err != nil {
		return nil, err
	}

	admin := func(name string) (login, follow time.Duration, err error) {
		start := time.Now()
		cookie, err := loginFrom(ctx, "127.7.0.1", addr, name, passwd)
		if err != nil {
			return 0, 0, fmt.Errorf("the admin's login: %w", err)
		}
		login = time.Since(start)
		start = time.Now()
		body, status, err := followFrom(ctx, "127.7.0.1", addr, "Cookie: auth_token="+cookie)
		if err != nil {
			return 0, 0, fmt.Errorf("the admin's follow: %w", err)
		}
		defer body.Close()
		if status != 200 {
			return 0, 0, fmt.Errorf("the admin's follow: status %d", status)
		}
		if _, err := bufio.NewReader(body).ReadString('\n'); err != nil {
			return 0, 0, fmt.Errorf("the admin's follow: %w", err)
		}
		return login, time.Since(start), nil
	}
	if res.loginAlone, res.followAlone, err = admin("admin"); err != nil {
		return nil, err
	}

	// The viewer's WebSockets, sharesDialers at a time, all held.
	var mu sync.Mutex
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.6.0.1")}, Timeout: 10 * time.Second}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	sem := make(chan struct{}, sharesDialers)
	var wg sync.WaitGroup
	for range sharesWS {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			c, resp, err := websocket.Dial(dctx, "ws://"+addr+"/api/ws?stream=0", &websocket.DialOptions{
				HTTPClient: hc, HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.ws[0]++
				held = append(held, wsCloser{c})
				go func() { // read the greeting and what follows
					for {
						if _, _, err := c.Read(ctx); err != nil {
							return
						}
					}
				}()
			case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
				res.ws[1]++
			case resp != nil && resp.StatusCode == http.StatusServiceUnavailable:
				res.ws[2]++
			default:
				res.ws[3]++
			}
		})
	}
	wg.Wait()
	for range sharesFollows {
		body, status, err := followFrom(ctx, "127.6.0.1", addr, "Authorization: Bearer "+token)
		switch {
		case err == nil && status == 200:
			res.follows[0]++
			held = append(held, body)
		case err == nil && status == http.StatusTooManyRequests:
			res.follows[1]++
		case err == nil && status == http.StatusServiceUnavailable:
			res.follows[2]++
		default:
			res.follows[3]++
		}
		if err == nil && status != 200 {
			body.Close()
		}
	}
	res.refusedTotal = res.ws[1] + res.ws[2] + res.follows[1] + res.follows[2]
	logf("shares: the viewer token's %d WebSockets: %d opened, %d refused 429, %d 503, %d failed; %d follows: %d following, %d 429, %d 503, %d failed",
		sharesWS, res.ws[0], res.ws[1], res.ws[2], res.ws[3], sharesFollows, res.follows[0], res.follows[1], res.follows[2], res.follows[3])

	// Beside them, the admin.
	if res.loginLoaded, res.followLoaded, err = admin("admin2"); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cookie, err := loginFrom(ctx, "127.7.0.1", addr, "admin2", passwd)
	if err != nil {
		cancel()
		return nil, err
	}
	if c, _, err := websocket.Dial(dctx, "ws://"+addr+"/api/ws?stream=0", &websocket.DialOptions{
		HTTPHeader: http.Header{"Cookie": {"auth_token=" + cookie}}}); err == nil {
		res.adminWS = true
		c.CloseNow()
	}
	cancel()
	if res.rss, err = readVmRSS(srv.cmd.Process.Pid); err != nil {
		return nil, err
	}
	// kvmd's log goes out in batches of at most 100 ms; warnings at once.
	time.Sleep(200 * time.Millisecond)
	log, err := os.ReadFile(logPath)
	if err != nil {
		return nil, err
	}
	res.refusalLines = strings.Count(string(log), "share of WebSockets") + strings.Count(string(log), "share of log follows")
	logf("shares: beside them the admin logs in in %v (alone %v) and has the first log line in %v (alone %v); %d refusal lines logged",
		res.loginLoaded, res.loginAlone, res.followLoaded, res.followAlone, res.refusalLines)
	if srv.exited() {
		return nil, srv.exitError()
	}
	return res, nil
}

// viewerSetup makes, in dir, a users file (htpasswd-NAME) of two admins
// and a viewer with one password, the viewer's API token, and a journal
// of sharesEntries entries (journal-NAME) to follow. Each admin logging in
// once is a real hash: the verification cache has not seen it.
func viewerSetup(ctx context.Context, kvmd, dir, name string) (users, passwd, token, jdir string, err error) {
	users = filepath.Join(dir, "htpasswd-"+name)
	if passwd, err = randomPassword(); err != nil {
		return
	}
	for _, u := range []string{"admin", "admin2"} {
		if err = addUser(ctx, kvmd, users, u, passwd); err != nil {
			return
		}
	}
	if err = addUser(ctx, kvmd, users, "viewer", passwd, "--role", "viewer"); err != nil {
		return
	}
	if token, err = addToken(ctx, kvmd, users, "viewer"); err != nil {
		return
	}
	jdir = filepath.Join(dir, "journal-"+name)
	err = writeBigJournal(ctx, jdir, sharesEntries)
	return
}

type wsCloser struct{ c *websocket.Conn }

func (w wsCloser) Close() error { return w.c.CloseNow() }

// loginFrom logs user in from the source address src and returns the
// session token.
func loginFrom(ctx context.Context, src, addr, user, passwd string) (string, error) {
	cn, err := dialFrom(ctx, src, addr)
	if err != nil {
		return "", err
	}
	defer cn.Close()
	cn.SetDeadline(time.Now().Add(30 * time.Second))
	body := []byte("user=" + user + "&passwd=" + passwd)
	if _, err := cn.Write(rawRequest("POST", "/api/auth/login", addr, []string{"Content-Type: application/x-www-form-urlencoded"}, body)); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "auth_token" {
			return c.Value, nil
		}
	}
	return "", errors.New("no auth_token cookie")
}

// followFrom opens GET /api/log?follow=1 from src with the header hdr and
// returns its body (the connection, left open) and status.
func followFrom(ctx context.Context, src, addr, hdr string) (io.ReadCloser, int, error) {
	cn, err := dialFrom(ctx, src, addr)
	if err != nil {
		return nil, 0, err
	}
	cn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := cn.Write(rawRequest("GET", "/api/log?follow=1", addr, []string{hdr}, nil)); err != nil {
		cn.Close()
		return nil, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(cn), nil)
	if err != nil {
		cn.Close()
		return nil, 0, err
	}
	cn.SetDeadline(time.Time{})
	return struct {
		io.Reader
		io.Closer
	}{resp.Body, cn}, resp.StatusCode, nil
}

// writeShares writes the section's rows about the shares.
func writeShares(w io.Writer, s *sharesResult) {
	fmt.Fprintf(w, "| one viewer token asks for %d WebSockets: opened / refused 429 (its share) / 503 / failed | %d / %d / %d / %d | opened ≤ %d | %s |\n",
		sharesWS, s.ws[0], s.ws[1], s.ws[2], s.ws[3], s.perUser, verdict(true, s.ws[0] <= s.perUser && s.ws[3] == 0))
	fmt.Fprintf(w, "| the same token asks for %d log follows: following / refused 429 / 503 / failed | %d / %d / %d / %d | following ≤ %d | %s |\n",
		sharesFollows, s.follows[0], s.follows[1], s.follows[2], s.follows[3], s.followers/4, verdict(true, s.follows[0] <= s.followers/4 && s.follows[3] == 0))
	fmt.Fprintf(w, "| beside them, an admin logs in (alone: %s) | %s | < %s | %s |\n",
		fmtLatency(s.loginAlone), fmtLatency(s.loginLoaded), fmtLatency(targetAdminTime), verdict(true, s.loginLoaded < targetAdminTime))
	fmt.Fprintf(w, "| beside them, the admin follows the log: first line after (alone: %s) | %s | < %s | %s |\n",
		fmtLatency(s.followAlone), fmtLatency(s.followLoaded), fmtLatency(targetAdminTime), verdict(true, s.followLoaded < targetAdminTime))
	fmt.Fprintf(w, "| beside them, the admin's WebSocket opens | %s | yes | %s |\n", yesNo(s.adminWS), verdict(true, s.adminWS))
	fmt.Fprintf(w, "| the %d refusals: lines in kvmd's log | %d | ≤ 2 (one a minute for each user and kind) | %s |\n",
		s.refusedTotal, s.refusalLines, verdict(true, s.refusalLines >= 1 && s.refusalLines <= 2))
	fmt.Fprintf(w, "| RSS with the viewer's streams open | %s | — | — |\n", fmtMiB(s.rss))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// sharesMethod is the shares' part of the section's prose.
func sharesMethod() string {
	return fmt.Sprintf("**One viewer's streams.** kvmd (`serve`, its defaults but `--max-connections-per-address 1024`, a journal of %d entries written with systemd-journal-remote) "+
		"has two admins and a viewer made with `kvmd user add` (bcrypt), and an API token of the viewer's from `kvmd token add`. "+
		"One admin logs in (a real hash) and follows the log (`GET /api/log?follow=1` with the session cookie, timed from the request to the first line) from 127.7.0.1; "+
		"then the viewer's token asks for %d WebSockets (`/api/ws`, coder/websocket, %d at a time, each held open and read) and %d follows, all from 127.6.0.1; "+
		"then the other admin logs in (a real hash too) and follows the log, and opens a WebSocket; the lines kvmd logged about the refusals are counted. All over loopback.\n\n",
		sharesEntries, sharesWS, sharesDialers, sharesFollows)
}
