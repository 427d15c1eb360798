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

// baselineHandler answers every request with baselineBody: the least any
// server has to do to produce kvmd's bytes, so the ratio against it is the
// cost of everything kvmd adds.
func baselineHandler() http.Handler {
	length := strconv.Itoa(len(baselineBody))
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", length)
		_, _ = w.Write([]byte(baselineBody))
	})
}

// serveBaseline runs the bare server on addr until ctx ends. It runs in its
// own process (the driver execs itself) so it does not share the driver's
// Go runtime.
func serveBaseline(ctx context.Context, addr string) error {
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
		Handler:           baselineHandler(),
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
