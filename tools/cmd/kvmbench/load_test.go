package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunLoad(t *testing.T) {
	srv := httptest.NewServer(baselineHandler(nil))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	cfg := loadConfig{
		Addr: addr, Request: rawRequest("GET", "/api/auth/check", addr, nil, nil),
		WantStatus: 200, Conns: 2, Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond,
	}
	res, err := runLoad(context.Background(), cfg)
	if err != nil {
		t.Fatalf("runLoad: %v", err)
	}
	// Even a slow, loaded CI box does far more than 50 loopback round trips
	// in 200 ms; far more than a million would mean requests are not being
	// waited for.
	if res.Requests < 50 || res.Requests > 1_000_000 {
		t.Errorf("requests = %d in %v, implausible", res.Requests, res.Elapsed)
	}
	if res.Elapsed < cfg.Duration || res.Elapsed > cfg.Duration+time.Second {
		t.Errorf("elapsed = %v, want about %v", res.Elapsed, cfg.Duration)
	}
	if res.Hist.n != uint64(res.Requests) {
		t.Errorf("histogram holds %d samples, want %d", res.Hist.n, res.Requests)
	}
	p50, p99 := res.Hist.quantile(0.5), res.Hist.quantile(0.99)
	if p50 <= 0 || p99 < p50 || p99 > time.Second {
		t.Errorf("p50 = %v, p99 = %v, implausible", p50, p99)
	}
	if rps := res.RPS(); rps < float64(res.Requests) || rps > float64(res.Requests)*6 {
		t.Errorf("RPS() = %.0f for %d requests in %v", rps, res.Requests, res.Elapsed)
	}
}

func TestRunLoadWrongStatus(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 100 {
			fmt.Fprint(w, "fine")
			return
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"ok":false,"result":{"error":"ForbiddenError"}}`)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	start := time.Now()
	_, err := runLoad(context.Background(), loadConfig{
		Addr: addr, Request: rawRequest("GET", "/", addr, nil, nil),
		WantStatus: 200, Conns: 1, Warmup: 10 * time.Millisecond, Duration: 5 * time.Second,
	})
	var se *statusError
	if !errors.As(err, &se) {
		t.Fatalf("runLoad error = %v, want a statusError", err)
	}
	if se.Got != 403 || se.Want != 200 || !strings.Contains(string(se.Body), "ForbiddenError") {
		t.Errorf("statusError = %+v", se)
	}
	if !strings.Contains(err.Error(), "status 403, want 200") {
		t.Errorf("message %q does not name the statuses", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("runLoad took %v: a bad status must end the run at once", d)
	}
}

func TestRunLoadCanceled(t *testing.T) {
	srv := httptest.NewServer(baselineHandler(nil))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := runLoad(ctx, loadConfig{
		Addr: addr, Request: rawRequest("GET", "/", addr, nil, nil),
		WantStatus: 200, Conns: 2, Warmup: 10 * time.Millisecond, Duration: 10 * time.Second,
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("runLoad error = %v, want the context's", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("canceled runLoad took %v", d)
	}
}

func TestBaselineHandlerBytes(t *testing.T) {
	rec := httptest.NewRecorder()
	baselineHandler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/api/auth/check", nil))
	if rec.Code != 200 || rec.Body.String() != `{"ok":true,"result":{}}` ||
		rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Content-Length") != "23" {
		t.Errorf("baseline answered %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
}
