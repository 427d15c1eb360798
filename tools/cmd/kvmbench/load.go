package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// loadConfig describes one closed-loop measurement.
type loadConfig struct {
	Addr       string // host:port on loopback
	Request    []byte // one complete raw HTTP/1.1 request, keep-alive
	WantStatus int
	Conns      int
	Warmup     time.Duration // run but not counted
	Duration   time.Duration // counted
}

// loadResult is what one measurement saw.
type loadResult struct {
	Requests int64
	Elapsed  time.Duration
	Hist     histogram
}

// RPS returns the completed requests per second of the counted period.
func (r *loadResult) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// statusError is a response whose status is not the expected one.
type statusError struct {
	Want, Got int
	Body      []byte
}

func (e *statusError) Error() string {
	body := e.Body
	if len(body) > 300 {
		body = body[:300]
	}
	return fmt.Sprintf("status %d, want %d; body %q", e.Got, e.Want, body)
}

const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// ioGrace is how long past the planned end a request may still take before
// its connection's deadline fails the round: a stalled server must not stall
// the driver.
const ioGrace = 5 * time.Second

// runLoad drives cfg.Conns keep-alive connections in a closed loop: each
// writes the request, reads the whole response, checks the status and only
// then sends the next. Requests that start and end inside the counted period
// are counted and their latency recorded. The first error (a wrong status, a
// broken connection) ends the run and is returned.
func runLoad(ctx context.Context, cfg loadConfig) (*loadResult, error) {
	if cfg.Conns < 1 {
		return nil, errors.New("load: need at least one connection")
	}
	conns := make([]net.Conn, 0, cfg.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(cfg.Warmup + cfg.Duration + ioGrace)
	d := net.Dialer{Timeout: 2 * time.Second}
	for range cfg.Conns {
		c, err := d.DialContext(ctx, "tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		conns = append(conns, c)
		if err := c.SetDeadline(deadline); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
	}

	var (
		phase    atomic.Int32
		failOnce sync.Once
		failErr  error
		failed   = make(chan struct{})
		wg       sync.WaitGroup
		results  = make([]*loadResult, len(conns))
	)
	fail := func(err error) {
		failOnce.Do(func() {
			failErr = err
			close(failed)
		})
	}
	for i, c := range conns {
		// Separate allocations: per-request counters of different
		// connections must not share a cache line.
		results[i] = new(loadResult)
		wg.Go(func() {
			if err := loadConn(c, cfg, &phase, results[i]); err != nil {
				fail(err)
			}
		})
	}

	var start, end time.Time
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
		case <-failed:
		}
		return false
	}
	if wait(cfg.Warmup) {
		start = time.Now()
		phase.Store(phaseMeasure)
		wait(cfg.Duration)
		end = time.Now()
	}
	phase.Store(phaseStop)
	if ctx.Err() != nil {
		for _, c := range conns {
			c.Close() // unblock reads now rather than at the deadline
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-failed:
		return nil, failErr
	default:
	}

	res := &loadResult{Elapsed: end.Sub(start)}
	for _, r := range results {
		res.Requests += r.Requests
		res.Hist.merge(&r.Hist)
	}
	return res, nil
}

// loadConn is one closed-loop client; it returns when the phase is stop or
// on the first error.
func loadConn(c net.Conn, cfg loadConfig, phase *atomic.Int32, out *loadResult) error {
	rr := newRespReader(c)
	for {
		p := phase.Load()
		if p == phaseStop {
			return nil
		}
		t0 := time.Now()
		if _, err := c.Write(cfg.Request); err != nil {
			return stopOr(phase, fmt.Errorf("writing request: %w", err))
		}
		resp, err := rr.read()
		if err != nil {
			return stopOr(phase, err)
		}
		lat := time.Since(t0)
		if resp.Status != cfg.WantStatus {
			return &statusError{Want: cfg.WantStatus, Got: resp.Status, Body: append([]byte(nil), resp.Body...)}
		}
		if p == phaseMeasure && phase.Load() == phaseMeasure {
			out.Requests++
			out.Hist.record(lat)
		}
		if resp.Close {
			return stopOr(phase, errors.New("server closed the keep-alive connection (Connection: close)"))
		}
	}
}

// stopOr drops errors caused by the run ending (connections closed under
// the client) and passes the others on.
func stopOr(phase *atomic.Int32, err error) error {
	if phase.Load() == phaseStop {
		return nil
	}
	return err
}
