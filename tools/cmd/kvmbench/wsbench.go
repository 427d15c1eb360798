package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"kvmd/internal/sleep"
)

// wsResult is what the /api/ws rows of the report come from.
type wsResult struct {
	clients          int
	rssIdle, rssWith int64           // the daemon's VmRSS before the clients and with them connected
	busy, led        []time.Duration // per click: until the last client has the event
	clickHold        time.Duration
}

// Targets of the /api/ws rows.
const targetEventLatency = 50 * time.Millisecond

// demoClickHold is kvmd's click_delay: the demo host's power LED flips
// when the button is released, this long after it was pressed.
const demoClickHold = 100 * time.Millisecond

// runWSBench measures /api/ws on the demo daemon: its RSS with cfg.WSClients
// clients connected at once, and for each of cfg.WSSamples power clicks
// (the demo host's power button flips its power LED on release) the time
// from sending POST /api/atx/click until every client has the "busy"
// event, and from the LED's change until every client has the LED event.
// The LED changes on release, at the earliest demoClickHold after the
// request was sent, so send + demoClickHold bounds the change from below
// and the LED row is an upper bound of the pin-to-client latency.
func runWSBench(ctx context.Context, cfg runConfig, procs *children, kvmd, users, passwd, dir string, logf func(string, ...any)) (*wsResult, error) {
	res := &wsResult{clients: cfg.WSClients, clickHold: demoClickHold}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	c, err := procs.start("kvmd-ws", kvmd, append(demoServeArgs(addr, users, filepath.Join(dir, "no-journal")), "--access-log=false",
		// Every client here is 127.0.0.1, and one user: above the
		// per-address default of 64 and the per-user default of 16.
		"--max-connections-per-address", strconv.Itoa(cfg.WSClients+8), "--max-websockets-per-user", strconv.Itoa(cfg.WSClients+8)),
		filepath.Join(dir, "kvmd-ws.log"))
	if err != nil {
		return nil, err
	}
	defer procs.stop(c, 3*time.Second)
	if _, err := waitListening(ctx, c, addr); err != nil {
		return nil, err
	}
	token, err := login(ctx, addr, benchUser, passwd)
	if err != nil {
		return nil, err
	}
	if err := sleep.For(ctx, cfg.Idle); err != nil {
		return nil, err
	}
	if res.rssIdle, err = readVmRSS(c.cmd.Process.Pid); err != nil {
		return nil, err
	}

	type client struct {
		conn   *websocket.Conn
		events chan json.RawMessage // the atx events
	}
	hdr := http.Header{"Cookie": {"auth_token=" + token}}
	clients := make([]*client, cfg.WSClients)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range clients {
		conn, _, err := websocket.Dial(ctx, "ws://"+addr+"/api/ws", &websocket.DialOptions{HTTPHeader: hdr})
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i+1, err)
		}
		defer conn.CloseNow()
		cl := &client{conn: conn, events: make(chan json.RawMessage, 64)}
		clients[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, b, err := conn.Read(cctx)
				if err != nil {
					return
				}
				var ev struct {
					Type  string          `json:"event_type"`
					Event json.RawMessage `json:"event"`
				}
				if json.Unmarshal(b, &ev) == nil && ev.Type == "atx" {
					cl.events <- ev.Event
				}
			}
		}()
	}
	type atxState struct {
		Busy bool `json:"busy"`
		Leds struct {
			Power bool `json:"power"`
		} `json:"leds"`
	}
	// waitAll waits until every client has an atx event satisfying ok and
	// returns when the last one had it.
	waitAll := func(ok func(atxState) bool) (time.Time, error) {
		var last time.Time
		timeout := time.After(10 * time.Second)
		for i, cl := range clients {
			for done := false; !done; {
				select {
				case b := <-cl.events:
					var st atxState
					if json.Unmarshal(b, &st) == nil && ok(st) {
						if t := time.Now(); t.After(last) {
							last = t
						}
						done = true
					}
				case <-timeout:
					return last, fmt.Errorf("client %d: no such atx event within 10 s", i+1)
				}
			}
		}
		return last, nil
	}
	// The initial atx event says where the LED is.
	var led bool
	if _, err := waitAll(func(st atxState) bool { led = st.Leds.Power; return true }); err != nil {
		return nil, err
	}
	if res.rssWith, err = readVmRSS(c.cmd.Process.Pid); err != nil {
		return nil, err
	}
	logf("ws: %d clients connected, RSS %s -> %s", cfg.WSClients, fmtMiB(res.rssIdle), fmtMiB(res.rssWith))

	for i := range cfg.WSSamples {
		sent := time.Now()
		if err := post(ctx, addr, "/api/atx/click?button=power", token); err != nil {
			return nil, err
		}
		busyAt, err := waitAll(func(st atxState) bool { return st.Busy })
		if err != nil {
			return nil, err
		}
		want := !led
		ledAt, err := waitAll(func(st atxState) bool { return st.Leds.Power == want })
		if err != nil {
			return nil, err
		}
		led = want
		res.busy = append(res.busy, busyAt.Sub(sent))
		res.led = append(res.led, ledAt.Sub(sent.Add(demoClickHold)))
		// The button is busy for a second after its release.
		if _, err := waitAll(func(st atxState) bool { return !st.Busy }); err != nil {
			return nil, err
		}
		logf("ws click %d/%d: busy at all clients after %s, LED after %s", i+1, cfg.WSSamples,
			fmtLatency(res.busy[i]), fmtLatency(res.led[i]))
	}
	return res, nil
}

// post sends an authenticated POST and wants 200.
func post(ctx context.Context, addr, path, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	req.AddCookie(&http.Cookie{Name: "auth_token", Value: token})
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: status %d: %s", path, resp.StatusCode, body)
	}
	return nil
}

// writeWSRows adds the /api/ws rows to the summary table; it returns the
// targets missed.
func writeWSRows(w io.Writer, r *wsResult) (misses []string) {
	if r == nil {
		return nil
	}
	fmt.Fprintf(w, "| RSS with %d `/api/ws` clients connected (before them) | %s (%s) | — | — |\n",
		r.clients, fmtMiB(r.rssWith), fmtMiB(r.rssIdle))
	med, worst := medianInt(r.led), percentile(r.led, 1)
	ok := med > 0 && med < targetEventLatency
	if !ok {
		misses = append(misses, "ws event latency")
	}
	fmt.Fprintf(w, "| `/api/ws` ATX LED change to the event at all %d clients, upper bound (median / max of %d) | %s / %s | median < %s | %s |\n",
		r.clients, len(r.led), fmtLatency(med), fmtLatency(worst), fmtLatency(targetEventLatency), verdict(true, ok))
	fmt.Fprintf(w, "| `/api/ws` POST /api/atx/click sent to the busy event at all %d clients (median / max) | %s / %s | — | — |\n",
		r.clients, fmtLatency(medianInt(r.busy)), fmtLatency(percentile(r.busy, 1)))
	return misses
}

// wsMethod is the note on how the /api/ws rows were measured.
func wsMethod(r *wsResult) string {
	return fmt.Sprintf("- `/api/ws` rows: the demo daemon (its own process) with %d WebSocket clients connected at once "+
		"(coder/websocket, the session cookie; all from 127.0.0.1 and one user, so `--max-connections-per-address` and `--max-websockets-per-user` are raised above their defaults of 64 and 16), VmRSS read before they connect and once each had its initial events. "+
		"Then %d power clicks through `POST /api/atx/click?button=power`: the demo host's power button flips its power LED "+
		"(a faked GPIO pin, read by the daemon every 10 ms) on release, %s after the press, so the LED row is the time from "+
		"the request's send + %s until the last of the clients has the LED event: an upper bound of the pin-to-client "+
		"latency. The busy row is from the request's send to the last client's busy event.\n",
		r.clients, len(r.led), r.clickHold, r.clickHold)
}
