package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// baselineBody is what kvmd answers on an authenticated GET /api/auth/check.
const baselineBody = `{"ok":true,"result":{}}`

// baselineHandler answers every request with baselineBody, and GET
// /api/info with infoBody when one is given: the least any server has to do
// to produce kvmd's bytes, so the ratio against it is the cost of
// everything kvmd adds.
func baselineHandler(infoBody []byte) http.Handler {
	reply := func(body []byte) http.HandlerFunc {
		length := strconv.Itoa(len(body))
		return func(w http.ResponseWriter, _ *http.Request) {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", length)
			_, _ = w.Write(body)
		}
	}
	check := reply([]byte(baselineBody))
	if infoBody == nil {
		return check
	}
	info := reply(infoBody)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/info" {
			info(w, r)
			return
		}
		check(w, r)
	})
}

// serveBaseline runs the bare server on addr until ctx ends. It runs in its
// own process (the driver execs itself) so it does not share the driver's
// Go runtime.
func serveBaseline(ctx context.Context, addr string, infoBody []byte) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %s: loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           baselineHandler(infoBody),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
