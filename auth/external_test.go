package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/pquerna/otp/totp"

	"kvmd/auth/backend"
	"kvmd/auth/backend/backendtest"
	"kvmd/internal/testutil"
)

// extEnv is an Authenticator whose users file holds admin (local) and bob
// (not local), and whose backend knows alice and bob, on a clock the test
// moves.
type extEnv struct {
	a     *Authenticator
	ext   *External
	fake  *backendtest.Fake
	logs  *testutil.SyncBuffer
	clock clockwork.FakeClock
}

var (
	here  = netip.MustParseAddr("192.0.2.1")
	there = netip.MustParseAddr("192.0.2.2")
)

func newExtEnv(t *testing.T, cfg ExternalConfig) *extEnv {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\nbob:"+bhash(t, "file-pw")+"\n")
	e := &extEnv{logs: &testutil.SyncBuffer{}, fake: backendtest.New(map[string]string{"alice": "alice-pw", "bob": "dir-pw"})}
	e.fake.Kind = "ldap"
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	users, err := OpenUsers(path, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend = e.fake
	if cfg.Local == nil {
		cfg.Local = []string{"admin"}
	}
	e.ext, err = NewExternal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lim := NewLimiter()
	lim.Free = 2
	e.a = New(users, nil, &Sessions{Max: 10}, lim, log)
	e.a.External = e.ext
	e.clock = clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0))
	e.a.Clock = e.clock
	return e
}

func (e *extEnv) advance(d time.Duration) { e.clock.Advance(d) }

func (e *extEnv) count(m Method, r Result) uint64 {
	for _, c := range e.a.Counts() {
		if c.Method == m && c.Result == r {
			return c.N
		}
	}
	return 0
}

// outcome names an error of Password as the HTTP layer sees it.
func outcome(err error) string {
	var rl *RateLimitedError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &rl):
		return "blocked"
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case errors.Is(err, ErrUnavailable) && errors.Is(err, backend.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrUnavailable):
		return "unavailable (request)"
	}
	return "unexpected: " + err.Error()
}

func TestExternalRouting(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{CacheTTL: time.Minute})
	ctx := context.Background()
	for _, tc := range []struct {
		user, passwd string
		want         string
		calls        int // the backend's calls after this one
	}{
		{"admin", "secret", "ok", 0},          // local: the file
		{"admin", "wrong", "forbidden", 0},    // local: the file says no; the backend is not asked
		{"alice", "alice-pw", "ok", 1},        // the backend
		{"alice", "wrong", "forbidden", 2},    // the backend says no
		{"bob", "dir-pw", "ok", 3},            // bob is in the file, but not local: the backend decides
		{"bob", "file-pw", "forbidden", 4},    // the file is no fallback
		{"carol", "x", "forbidden", 5},        // unknown everywhere
		{"alice", "alice-pw", "ok", 5},        // cached
		{"admin", "alice-pw", "forbidden", 5}, // admin never goes to the backend
	} {
		got := outcome(e.a.Password(ctx, tc.user, tc.passwd, MethodBasic, here))
		if got != tc.want {
			t.Errorf("%s/%s: %s, want %s", tc.user, tc.passwd, got, tc.want)
		}
		if n := e.fake.Calls(); n != tc.calls {
			t.Errorf("%s/%s: the backend was called %d times in all, want %d", tc.user, tc.passwd, n, tc.calls)
		}
		e.a.Limiter.Success(here) // this test is not about the limiter
	}

	// The service is down: 503, counted, logged once, and no failure for
	// the limiter; local users still get in.
	e.fake.SetErr(fmt.Errorf("%w: connection refused", backend.ErrUnavailable))
	for range 5 {
		if got := outcome(e.a.Password(ctx, "alice", "other-pw", MethodHeader, there)); got != "unavailable" {
			t.Errorf("service down: %s, want unavailable", got)
		}
	}
	if n := e.count(MethodHeader, ResultUnavailable); n != 5 {
		t.Errorf("%d unavailable counted, want 5", n)
	}
	if w := e.a.Limiter.Blocked(there, e.clock.Now()); w != 0 || e.count(MethodHeader, ResultFailed) != 0 {
		t.Errorf("unavailable counted as failures: blocked %s", w)
	}
	if got := outcome(e.a.Password(ctx, "admin", "secret", MethodHeader, there)); got != "ok" {
		t.Errorf("local user while the service is down: %s", got)
	}
	// A cached success still holds while the service is down.
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw", MethodHeader, there)); got != "ok" {
		t.Errorf("cached user while the service is down: %s", got)
	}
	// An answer that is neither yes nor no fails closed.
	e.fake.SetErr(errors.New("confused"))
	if got := outcome(e.a.Password(ctx, "alice", "third-pw", MethodHeader, there)); got != "unavailable" {
		t.Errorf("an unclassified error: %s, want unavailable", got)
	}

	logs := e.logs.String()
	for _, want := range []string{
		`msg="auth ok" user=alice method=basic addr=192.0.2.1 backend=ldap`,
		`msg="auth failed" user=alice method=basic addr=192.0.2.1 reason="wrong user or password" backend=ldap detail="ldap: rejected by the authentication service: wrong password"`,
		`msg="auth failed" user=admin method=basic addr=192.0.2.1 reason="wrong user or password"` + "\n",
		`msg="auth unavailable" user=alice method=xhdr addr=192.0.2.2 err="auth: unavailable: ldap: authentication service unavailable: connection refused" backend=ldap`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, `msg="auth unavailable"`); n != 1 {
		t.Errorf("%d unavailable lines for a burst, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs, "alice-pw") || strings.Contains(logs, "other-pw") {
		t.Errorf("a password in the log:\n%s", logs)
	}
}

// TestExternalLogRate checks that a flood of unavailable checks gives a
// line per unavailableLogEvery, with the count of the lines held back.
func TestExternalLogRate(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{})
	e.fake.SetErr(backend.ErrUnavailable)
	for range 100 {
		e.a.Password(context.Background(), "alice", "alice-pw", MethodBasic, here)
		e.advance(unavailableLogEvery / 50)
	}
	lines := regexp.MustCompile(`msg="auth unavailable".*`).FindAllString(e.logs.String(), -1)
	if len(lines) != 2 {
		t.Fatalf("%d lines for 100 failures over twice the interval, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if strings.Contains(lines[0], "suppressed") || !strings.Contains(lines[1], "suppressed=49") {
		t.Errorf("suppressed counts wrong:\n%s", strings.Join(lines, "\n"))
	}
}

func TestExternalTwoFactor(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{CacheTTL: time.Minute})
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "kvmd", AccountName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	secretPath := filepath.Join(t.TempDir(), "totp.secret")
	if err := os.WriteFile(secretPath, []byte(key.Secret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.a.TOTP = NewTOTP(secretPath, e.a.Log)
	code, err := totp.GenerateCode(key.Secret(), e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	wrong := fmt.Sprintf("%06d", (atoiMust(t, code)+500000)%1000000)
	ctx := context.Background()

	// A wrong or missing code costs the backend's check as a right one
	// does: answering it at once would tell an attacker the code was
	// right whenever the answer was slow (twofactor_test.go).
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw"+wrong, MethodBasic, here)); got != "forbidden" {
		t.Errorf("wrong code: %s", got)
	}
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw", MethodBasic, here)); got != "forbidden" {
		t.Errorf("no code: %s", got)
	}
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw"+code, MethodBasic, here)); got != "ok" {
		t.Errorf("password and code: %s", got)
	}
	if got := outcome(e.a.Password(ctx, "alice", "wrong-pw"+code, MethodBasic, there)); got != "forbidden" {
		t.Errorf("wrong password, right code: %s", got)
	}
	// The code is split off; "alice-pw" without a code is "al" and the
	// code "ice-pw".
	if seen, want := e.fake.Seen(), []string{"alice:alice-pw", "alice:al", "alice:alice-pw", "alice:wrong-pw"}; !slices.Equal(seen, want) {
		t.Errorf("the backend saw %q, want %q (the code split off)", seen, want)
	}
	// The cache holds the password and code that succeeded together: the
	// password with a wrong code is asked again (and refused), and only
	// the same password and code answer from the cache.
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw"+wrong, MethodBasic, there)); got != "forbidden" || e.fake.Calls() != 5 {
		t.Errorf("password of a cached success, wrong code: %s after %d calls, want forbidden after 5", got, e.fake.Calls())
	}
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw"+code, MethodBasic, there)); got != "ok" || e.fake.Calls() != 5 {
		t.Errorf("cached password, right code: %s after %d calls, want ok after 5", got, e.fake.Calls())
	}
}

func atoiMust(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestExternalCache(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{CacheTTL: time.Minute})
	ctx := context.Background()
	check := func(passwd, want string, calls int) {
		t.Helper()
		if got := outcome(e.a.Password(ctx, "alice", passwd, MethodHeader, here)); got != want {
			t.Errorf("%s: %s, want %s", passwd, got, want)
		}
		if n := e.fake.Calls(); n != calls {
			t.Errorf("%s: %d calls in all, want %d", passwd, n, calls)
		}
		e.a.Limiter.Success(here)
	}
	for range 10 {
		check("alice-pw", "ok", 1)
	}
	e.advance(59 * time.Second)
	check("alice-pw", "ok", 1)
	e.advance(time.Second) // the TTL has passed
	check("alice-pw", "ok", 2)
	// Failures are never cached.
	check("wrong", "forbidden", 3)
	check("wrong", "forbidden", 4)
	// A password changed at the service: the old one holds until the
	// TTL passes, then no more.
	e.fake.Set("alice", "new-pw")
	e.advance(30 * time.Second)
	check("alice-pw", "ok", 4)
	check("new-pw", "ok", 5)
	e.advance(30 * time.Second)
	check("alice-pw", "forbidden", 6)
	check("new-pw", "ok", 6)
	// Only audit-worthy checks are logged: not the cached ones.
	if n := strings.Count(e.logs.String(), `msg="auth ok"`); n != 3 {
		t.Errorf("%d auth ok lines, want 3 (the uncached successes):\n%s", n, e.logs)
	}

	// Expired entries are dropped once a TTL, at the next success.
	e.advance(2 * time.Minute)
	check("new-pw", "ok", 7)
	if n := e.ext.cached(); n != 1 {
		t.Errorf("%d cache entries after the others expired, want 1", n)
	}

	// A full cache starts over.
	e.ext.cacheSize = 3
	for i := range 5 {
		e.fake.Set(fmt.Sprintf("u%d", i), "pw")
		check2 := e.a.Password(ctx, fmt.Sprintf("u%d", i), "pw", MethodHeader, here)
		if check2 != nil {
			t.Fatal(check2)
		}
	}
	if n := e.ext.cached(); n > 3 {
		t.Errorf("%d cache entries, bound 3", n)
	}

	// TTL 0: no cache.
	e = newExtEnv(t, ExternalConfig{})
	for i := range 3 {
		if err := e.a.Password(ctx, "alice", "alice-pw", MethodHeader, here); err != nil || e.fake.Calls() != i+1 {
			t.Errorf("without a cache: %v after %d calls, want ok after %d", err, e.fake.Calls(), i+1)
		}
	}
}

func TestExternalLimiter(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{CacheTTL: time.Minute})
	ctx := context.Background()
	// Free is 2: the third failure blocks.
	for i, want := range []string{"forbidden", "forbidden", "forbidden", "blocked", "blocked"} {
		if got := outcome(e.a.Password(ctx, "alice", "guess", MethodBasic, here)); got != want {
			t.Errorf("attempt %d: %s, want %s", i+1, got, want)
		}
	}
	if n := e.fake.Calls(); n != 3 {
		t.Errorf("the backend was asked %d times, want 3: a blocked address must not reach it", n)
	}
	// The right password from the blocked address is not checked either,
	// not even against the cache; another address is not blocked.
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw", MethodBasic, here)); got != "blocked" {
		t.Errorf("right password from the blocked address: %s", got)
	}
	if got := outcome(e.a.Password(ctx, "alice", "alice-pw", MethodBasic, there)); got != "ok" {
		t.Errorf("right password from elsewhere: %s", got)
	}
	if n := e.count(MethodBasic, ResultBlocked); n != 3 {
		t.Errorf("%d blocked counted, want 3", n)
	}
}

// margin is how late past its bound an answer may come, on a loaded
// machine.
const margin = 300 * time.Millisecond

// TestExternalSlow checks that a backend that does not answer gives 503
// within the timeout, whether it honours its context or not, and leaves
// nothing running behind when it does.
func TestExternalSlow(t *testing.T) {
	const timeout = 150 * time.Millisecond
	for _, deaf := range []bool{false, true} {
		t.Run(fmt.Sprintf("deaf=%v", deaf), func(t *testing.T) {
			e := newExtEnv(t, ExternalConfig{Timeout: timeout, MaxChecks: 2})
			release := e.fake.Stall(deaf)
			defer release()
			start := time.Now()
			err := e.a.Password(context.Background(), "alice", "alice-pw", MethodBasic, here)
			if took := time.Since(start); took < timeout || took > timeout+margin {
				t.Errorf("answered after %s, want %s to %s", took, timeout, timeout+margin)
			}
			if got := outcome(err); got != "unavailable" {
				t.Errorf("%s, want unavailable", got)
			}
			if !deaf {
				if !e.fake.WaitIdle(margin) {
					t.Error("the backend's Verify still runs after the timeout")
				}
			} else {
				release()
				if !e.fake.WaitIdle(time.Second) {
					t.Error("the backend's Verify still runs after its release")
				}
			}
			e.ext.mu.Lock()
			n := len(e.ext.inflight)
			e.ext.mu.Unlock()
			if n != 0 {
				t.Errorf("%d checks still in flight", n)
			}
		})
	}

	// The request's context ends first: the request leaves at once, and
	// the check, with no one left waiting, is cancelled.
	e := newExtEnv(t, ExternalConfig{Timeout: 10 * time.Second})
	defer e.fake.Stall(false)()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := e.a.Password(ctx, "alice", "alice-pw", MethodBasic, here)
	if got := outcome(err); got != "unavailable (request)" || time.Since(start) > 50*time.Millisecond+margin {
		t.Errorf("request ended: %s after %s", got, time.Since(start))
	}
	if !e.fake.WaitIdle(margin) {
		t.Error("the check was not cancelled when its only waiter left")
	}
}

// TestExternalBound checks that at most MaxChecks questions are in flight,
// that one finding no slot in time is unavailable without reaching the
// backend, and that identical concurrent checks are one question.
func TestExternalBound(t *testing.T) {
	ctx := context.Background()
	t.Run("bound", func(t *testing.T) {
		e := newExtEnv(t, ExternalConfig{Timeout: 5 * time.Second, MaxChecks: 3, CacheTTL: time.Minute})
		release := e.fake.Stall(false)
		defer release()
		const n = 20
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			user := fmt.Sprintf("user%d", i)
			e.fake.Set(user, "pw")
			wg.Go(func() {
				errs[i] = e.a.Password(ctx, user, "pw", MethodBasic, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
			})
		}
		deadline := time.Now().Add(2 * time.Second)
		for e.fake.Calls() < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // time for more to slip through, were the bound broken
		if got := e.fake.Active(); got != 3 {
			t.Errorf("%d checks running while the backend stalls, want the bound, 3", got)
		}
		release()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("user%d: %v", i, err)
			}
		}
		if got := e.fake.MaxActive(); got != 3 {
			t.Errorf("at most %d checks ran at once, want 3", got)
		}
	})

	t.Run("no slot in time", func(t *testing.T) {
		const timeout = 100 * time.Millisecond
		e := newExtEnv(t, ExternalConfig{Timeout: timeout, MaxChecks: 1})
		release := e.fake.Stall(true)
		defer release()
		first := make(chan error, 1)
		go func() { first <- e.a.Password(ctx, "alice", "alice-pw", MethodBasic, here) }()
		for e.fake.Calls() == 0 {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		err := e.a.Password(ctx, "bob", "dir-pw", MethodBasic, here)
		if got := outcome(err); got != "unavailable" || time.Since(start) > timeout+margin {
			t.Errorf("no free slot: %s after %s, want unavailable within %s", got, time.Since(start), timeout)
		}
		if got := outcome(<-first); got != "unavailable" {
			t.Errorf("the stalled check: %s", got)
		}
		if n := e.fake.Calls(); n != 1 {
			t.Errorf("the backend was called %d times, want 1: the second never got a slot", n)
		}
		release()
		// The slot is free again.
		if got := outcome(e.a.Password(ctx, "bob", "dir-pw", MethodBasic, here)); got != "ok" {
			t.Errorf("after the release: %s", got)
		}
	})

	t.Run("collapse", func(t *testing.T) {
		e := newExtEnv(t, ExternalConfig{Timeout: 5 * time.Second})
		release := e.fake.Stall(false)
		defer release()
		const n = 10
		var wg sync.WaitGroup
		errs := make([]error, n+1)
		for i := range n {
			wg.Go(func() { errs[i] = e.a.Password(ctx, "alice", "alice-pw", MethodHeader, here) })
		}
		wg.Go(func() { errs[n] = e.a.Password(ctx, "alice", "wrong", MethodHeader, there) })
		deadline := time.Now().Add(2 * time.Second)
		for {
			e.ext.mu.Lock()
			c := e.ext.inflight[e.ext.cacheKey.key("alice", "alice-pw")]
			waiting := c != nil && c.waiters == n
			e.ext.mu.Unlock()
			if waiting || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		release()
		wg.Wait()
		for i, err := range errs[:n] {
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		}
		if got := outcome(errs[n]); got != "forbidden" {
			t.Errorf("another password of the same user: %s", got)
		}
		if got := e.fake.Calls(); got != 2 {
			t.Errorf("%d calls for %d identical checks and another, want 2", got, n)
		}
	})
}

// TestExternalSessions checks that an external user's login gives a
// session like a local user's.
func TestExternalSessions(t *testing.T) {
	e := newExtEnv(t, ExternalConfig{})
	tok, _, err := e.a.Login(context.Background(), "alice", "alice-pw", 0, here)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetErr(backend.ErrUnavailable) // the session needs no backend
	if p, err := e.a.Session(tok, here); err != nil || p.User != "alice" {
		t.Errorf("Session: %q %v", p.User, err)
	}
	if _, _, err := e.a.Login(context.Background(), "alice", "wrong", 0, here); outcome(err) != "unavailable" {
		t.Errorf("login while down: %v", err)
	}
}

func TestNewExternal(t *testing.T) {
	f := backendtest.New(nil)
	for _, tc := range []struct {
		cfg  ExternalConfig
		want string
	}{
		{ExternalConfig{}, "no backend"},
		{ExternalConfig{Backend: f, CacheTTL: -1}, "negative"},
		{ExternalConfig{Backend: f, Timeout: -1}, "negative"},
		{ExternalConfig{Backend: f, Local: []string{"Admin"}}, `local user "Admin"`},
	} {
		if _, err := NewExternal(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	e, err := NewExternal(ExternalConfig{Backend: f, Local: []string{"admin", "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	if e.timeout != DefaultTimeout || cap(e.slots) != DefaultMaxChecks || e.ttl != 0 {
		t.Errorf("defaults: timeout %s, slots %d, ttl %s", e.timeout, cap(e.slots), e.ttl)
	}
	if !e.Local("ops") || e.Local("alice") || e.Name() != "fake" {
		t.Error("Local or Name")
	}
}
