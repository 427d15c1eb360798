package client_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"kvmd/client"
	"kvmd/client/clienttest"
)

// The 2FA tests run against the real daemon, which checks codes against
// real time; only the client's clock is fake. Each test picks the fake
// time relative to the real one so that what it wants to happen does, and
// says why.

// fakeClock is a client clock that stands still; Sleep notes the wait and
// moves the clock on by it, without waiting.
type fakeClock struct {
	mu    sync.Mutex
	at    time.Time
	slept []time.Duration
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slept = append(f.slept, d)
	f.at = f.at.Add(d)
	return nil
}

func (f *fakeClock) waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.slept)
}

// stepStart is the start of the 30 s step t is in.
func stepStart(t time.Time) time.Time { return time.Unix(t.Unix()/30*30, 0) }

func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := client.Code(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// awayFromStepEnd waits (real time) until the current step has at least
// need left, so that the daemon's step cannot change during a test.
func awayFromStepEnd(need time.Duration) {
	now := time.Now()
	if left := stepStart(now).Add(client.Period).Sub(now); left < need {
		time.Sleep(left + 10*time.Millisecond)
	}
}

// totpDaemon starts a daemon with 2FA on: user admin, password "s3cret".
func totpDaemon(t *testing.T) (*clienttest.Daemon, string) {
	t.Helper()
	users := clienttest.Users(t, kvmdBin, "admin", "s3cret")
	path, secret := clienttest.TOTPSecret(t)
	return clienttest.Start(t, kvmdBin, nil, "--users", users, "--totp-secret", path), secret
}

// fakeTimeClient is a client of d with a fake clock at at, recording its
// requests with the time on that clock.
func fakeTimeClient(d *clienttest.Daemon, secret string, at time.Time) (*client.Client, *fakeClock, *recorder) {
	clk := &fakeClock{at: at}
	c, rec := newClient(d, "admin", "s3cret")
	c.TOTPSecret, c.Now, c.Sleep = secret, clk.Now, clk.Sleep
	rec.clock = clk.Now
	return c, clk, rec
}

// TestTOTPNearStepEnd: with 0.4 s left in the step, the client waits for
// the next step and sends its code, which the daemon accepts.
func TestTOTPNearStepEnd(t *testing.T) {
	d, secret := totpDaemon(t)
	// The fake clock is 0.4 s before the end of the daemon's current step
	// S, so the client sends the code of S+1. The daemon accepts S-1, S
	// and S+1, and if its own clock moves into S+1 meanwhile, S+1 is its
	// current step: the code is accepted either way. A client that sent
	// the code of S would be accepted too, which is why the test checks
	// which code was sent.
	real := time.Now()
	s := stepStart(real)
	c, clk, rec := fakeTimeClient(d, secret, s.Add(client.Period-400*time.Millisecond))
	if err := c.Check(context.Background()); err != nil {
		t.Fatalf("check: %v", err)
	}
	if got := clk.waits(); !slices.Equal(got, []time.Duration{400 * time.Millisecond}) {
		t.Errorf("slept %v, want [400ms]: until the next step", got)
	}
	now, next := code(t, secret, s), code(t, secret, s.Add(client.Period))
	if now == next {
		t.Skipf("the codes of two steps are the same (%s): cannot tell them apart", now)
	}
	if got := rec.sent(); !slices.Equal(got, []string{"s3cret" + next}) {
		t.Errorf("sent %q, want the next step's code %s (the current one is %s)", got, next, now)
	}
	if !slices.Equal(rec.statuses, []int{200}) {
		t.Errorf("daemon answered %v, want [200]", rec.statuses)
	}

	// Login sends the code in its form, with the same timing.
	c, clk, _ = fakeTimeClient(d, secret, s.Add(client.Period-400*time.Millisecond))
	if _, err := c.Login(context.Background()); err != nil {
		t.Fatalf("login: %v", err)
	}
	if got := clk.waits(); !slices.Equal(got, []time.Duration{400 * time.Millisecond}) {
		t.Errorf("login slept %v, want [400ms]", got)
	}
}

// TestTOTPTiming: wherever the client's clock is in a step, the code it
// sends has at least a second left on that clock, and it waits only when
// the current code has a second or less.
func TestTOTPTiming(t *testing.T) {
	d, secret := totpDaemon(t)
	for _, tc := range []struct {
		left time.Duration
		wait bool
	}{
		{100 * time.Millisecond, true},
		{900 * time.Millisecond, true},
		{time.Second, true},
		{1500 * time.Millisecond, false},
		{15 * time.Second, false},
		{29 * time.Second, false},
	} {
		t.Run(tc.left.String(), func(t *testing.T) {
			// The fake clock is in the daemon's current step S: the client
			// sends the code of S or S+1, both in the daemon's window (S-1
			// to S+1, or S to S+2 should its clock move on meanwhile).
			s := stepStart(time.Now())
			start := s.Add(client.Period - tc.left)
			c, clk, rec := fakeTimeClient(d, secret, start)
			if err := c.Check(context.Background()); err != nil {
				t.Fatalf("check: %v", err)
			}
			waits := clk.waits()
			if tc.wait && !slices.Equal(waits, []time.Duration{tc.left}) || !tc.wait && len(waits) != 0 {
				t.Errorf("slept %v, want a wait: %v", waits, tc.wait)
			}
			sent := rec.sent()
			if len(sent) != 1 || len(rec.at) != 1 {
				t.Fatalf("%d requests, want 1", len(sent))
			}
			// Which step's code was it?
			var end time.Time
			for k := -1; k <= 2; k++ {
				st := s.Add(time.Duration(k) * client.Period)
				if sent[0] == "s3cret"+code(t, secret, st) {
					if !end.IsZero() {
						t.Skip("two steps have the same code: cannot tell which was sent")
					}
					end = st.Add(client.Period)
				}
			}
			if end.IsZero() {
				t.Fatalf("sent %q, the code of no step near %v", sent[0], s)
			}
			if left := end.Sub(rec.at[0]); left < client.MinCodeLife {
				t.Errorf("the code sent at %v had %v left, want at least %v", rec.at[0], left, client.MinCodeLife)
			}
			if wantEnd := s.Add(client.Period); tc.wait && end != wantEnd.Add(client.Period) || !tc.wait && end != wantEnd {
				t.Errorf("sent the code of the step ending %v", end)
			}
		})
	}
}

// TestTOTPRetryNextCode: a client whose first code the daemon refuses
// retries once with the next step's code, which is accepted.
func TestTOTPRetryNextCode(t *testing.T) {
	d, secret := totpDaemon(t)
	// The daemon accepts the codes of steps S-1, S and S+1 of its step S.
	// A client clock two steps behind, in the middle of S-2, sends the
	// code of S-2 (refused); its next code, of S-1, is within the
	// daemon's drift and accepted. The daemon's step must not change
	// during the test, hence the wait away from its end.
	awayFromStepEnd(3 * time.Second)
	s := stepStart(time.Now())
	c, clk, rec := fakeTimeClient(d, secret, s.Add(-2*client.Period+client.Period/2))
	codes := make([]string, 4) // S-2 .. S+1
	for i := range codes {
		codes[i] = code(t, secret, s.Add(time.Duration(i-2)*client.Period))
	}
	if slices.Contains(codes[1:], codes[0]) {
		t.Skip("the code of S-2 equals one the daemon accepts: the first attempt would succeed")
	}
	if err := c.Check(context.Background()); err != nil {
		t.Fatalf("check: %v (daemon answered %v)", err, rec.statuses)
	}
	if got, want := rec.sent(), []string{"s3cret" + codes[0], "s3cret" + codes[1]}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	if !slices.Equal(rec.statuses, []int{403, 200}) {
		t.Errorf("daemon answered %v, want [403 200]", rec.statuses)
	}
	if w := clk.waits(); len(w) != 0 {
		t.Errorf("slept %v, want no wait (15 s left, and the retry needs none)", w)
	}
}

// TestTOTPWrongPassword: a wrong password is retried once, then its 403
// is returned: no loop.
func TestTOTPWrongPassword(t *testing.T) {
	d, secret := totpDaemon(t)
	c, rec := newClient(d, "admin", "wrong")
	c.TOTPSecret = secret // real clock
	err := c.Check(context.Background())
	apiError(t, err, 403, "ForbiddenError")
	sent := rec.sent()
	if len(sent) != 2 || !slices.Equal(rec.statuses, []int{403, 403}) {
		t.Fatalf("sent %q, answers %v: want two attempts, both refused", sent, rec.statuses)
	}
	// The retry's code is the step's after the first one's.
	s := stepStart(time.Now())
	found := false
	for k := -2; k <= 1; k++ {
		st := s.Add(time.Duration(k) * client.Period)
		if sent[0] == "wrong"+code(t, secret, st) {
			found = true
			if want := "wrong" + code(t, secret, st.Add(client.Period)); sent[1] != want {
				t.Errorf("retry sent %q, want %q (the next step's code)", sent[1], want)
			}
		}
	}
	if !found {
		t.Errorf("first attempt sent %q, not the password and a current code", sent[0])
	}

	// A rate-limited address is not retried either.
	for range 10 {
		var e *client.Error
		rec.mu.Lock()
		rec.statuses = nil
		rec.mu.Unlock()
		if err := c.Check(context.Background()); errors.As(err, &e) && e.Status == http.StatusTooManyRequests {
			if len(rec.statuses) != 1 {
				t.Errorf("a 429 was retried: answers %v", rec.statuses)
			}
			return
		}
	}
	t.Error("no 429 after ten wrong passwords")
}

// TestTOTPWaitCancelled: a wait for the next step ends with the context,
// and nothing is sent.
func TestTOTPWaitCancelled(t *testing.T) {
	rec := &recorder{rt: http.DefaultTransport}
	now := stepStart(time.Now()).Add(client.Period - 500*time.Millisecond)
	c := &client.Client{
		BaseURL: "http://127.0.0.1:1", User: "admin", Password: "pw", TOTPSecret: "JBSWY3DPEHPK3PXP",
		HTTPClient: &http.Client{Transport: rec}, Now: func() time.Time { return now },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Check(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrUnreachable) {
		t.Errorf("err %v, want the context's", err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Errorf("returned after %v: the real sleep did not end with the context", d)
	}
	if len(rec.sent()) != 0 {
		t.Error("sent a request")
	}
}
