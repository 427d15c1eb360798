package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// TestServeShares: the daemon hands --max-websockets-per-user and
// --log-followers to the server's shares: with 2 and 4, one user's third
// WebSocket and second follow are answered 429.
func TestServeShares(t *testing.T) {
	journaltest.Require(t)
	jdir := t.TempDir()
	journaltest.Write(t, jdir, "system", []journaltest.Entry{{Unit: "kvmd.service", Message: "a line"}})
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--demo", "--users", users, "--listen", addr, "--journal-dir", jdir,
		"--max-websockets-per-user", "2", "--log-followers", "4")
	d.stderr.wait(t, `kvmd listening`)
	hdr := http.Header{"X-Kvmd-User": {"admin"}, "X-Kvmd-Passwd": {"pw"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []int{101, 101, 429} {
		c, resp, err := websocket.Dial(ctx, "ws://"+addr+"/api/ws?stream=0", &websocket.DialOptions{HTTPHeader: hdr})
		got := 101
		if err != nil {
			if resp == nil {
				t.Fatal(err)
			}
			got = resp.StatusCode
		} else {
			defer c.CloseNow()
		}
		if got != want {
			t.Errorf("WebSocket %d: %d, want %d", i+1, got, want)
		}
	}
	for i, want := range []int{200, 429} {
		resp, err := getLog(t, "http://"+addr+"/api/log?follow=1", "admin", "pw")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("follow %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	d.stderr.wait(t, `refused beyond the user's share of WebSockets`)
}
