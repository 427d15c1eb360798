package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
)

// TestRunPair: each server of a pair gets exactly its warm-up and its
// requests, in turns. (Both are this process here, so their CPU times are
// not told apart; TestRunEndToEnd has the servers' own.)
func TestRunPair(t *testing.T) {
	var counts [2]atomic.Int64
	var cfgs [2]countConfig
	for i := range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			counts[i].Add(1)
			w.Write([]byte("ok"))
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		addr := ln.Addr().String()
		cfgs[i] = countConfig{Addr: addr, Request: rawRequest("GET", "/", addr, nil, nil), WantStatus: 200,
			Conns: 3, Warm: 7, Requests: 1003 + 10*i, PID: os.Getpid()}
	}
	res, err := runPair(context.Background(), cfgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, cfg := range cfgs {
		if got, want := counts[i].Load(), int64(cfg.Warm+cfg.Requests); got != want {
			t.Errorf("server %d answered %d requests, want %d", i, got, want)
		}
		if res[i].CPU < 0 || res[i].Elapsed <= 0 {
			t.Errorf("server %d: %+v", i, res[i])
		}
	}
}
