package auth

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/pquerna/otp/totp"
	"golang.org/x/crypto/bcrypt"

	"kvmd/internal/testutil"
)

const testSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

// newTOTPAuthenticator has the user admin with a cost-10 bcrypt hash (tens
// of milliseconds, as on a device) and 2FA on, its clock frozen.
func newTOTPAuthenticator(t *testing.T, logs *testutil.SyncBuffer) (*Authenticator, time.Time) {
	t.Helper()
	dir := t.TempDir()
	h, err := bcrypt.GenerateFromPassword([]byte("secret"), 10)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "htpasswd"), "admin:"+string(h)+"\n")
	if err := os.WriteFile(filepath.Join(dir, "totp"), []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := testLogger(logs)
	users, err := OpenUsers(filepath.Join(dir, "htpasswd"), log)
	if err != nil {
		t.Fatal(err)
	}
	lim := NewLimiter()
	lim.Free = 1 << 30
	a := New(users, NewTOTP(filepath.Join(dir, "totp"), log), &Sessions{Max: 10}, lim, log)
	now := time.Unix(1_800_000_015, 0) // mid-step: the code stays valid
	a.Clock = clockwork.NewFakeClockAt(now)
	return a, now
}

// TestTwoFactorSameWork: with 2FA on, a wrong or missing code costs the
// password hash as a right one does, so the time taken tells nothing about
// the code. It used to answer a wrong code at once: 2 ms against 60.
func TestTwoFactorSameWork(t *testing.T) {
	a, now := newTOTPAuthenticator(t, nil)
	code, err := totp.GenerateCode(testSecret, now)
	if err != nil {
		t.Fatal(err)
	}
	wrong := "000000"
	if wrong == code {
		wrong = "000001"
	}
	ctx := context.Background()
	addr := netip.MustParseAddr("192.0.2.1")
	// hashed tells whether a check computed the password's hash: counted,
	// not timed, so a loaded machine cannot make it lie. The hash is what
	// the time of an answer is made of (tens of milliseconds against
	// microseconds for the rest).
	hashed := func(passwd string) (bool, error) {
		before := a.Users.hashed.Load()
		err := a.Password(ctx, "admin", passwd, MethodBasic, addr)
		return a.Users.hashed.Load() > before, err
	}
	if worked, err := hashed("nothing" + code); err == nil || !worked {
		t.Fatalf("a wrong password: %v, hashed %v", err, worked)
	}
	for _, tt := range []struct{ name, passwd string }{
		{"right password, wrong code", "secret" + wrong},
		{"right password, no code", "secr"},
		{"right password, code cut short", "secret" + code[:3]},
	} {
		worked, err := hashed(tt.passwd)
		if err == nil {
			t.Fatalf("%s: let in", tt.name)
		}
		if !worked {
			t.Errorf("%s: answered without the hash: the code was judged alone", tt.name)
		}
	}
	// A full success is remembered for that exact password and code...
	if _, err := hashed("secret" + code); err != nil {
		t.Fatalf("right password and code: %v", err)
	}
	if worked, err := hashed("secret" + code); err != nil || worked {
		t.Errorf("the same password and code again: %v, hashed %v: want the cache", err, worked)
	}
	// ...and never answers for the password with another code.
	if worked, err := hashed("secret" + wrong); err == nil || !worked {
		t.Errorf("right password, wrong code after a success: %v, hashed %v: the cache told the password was right", err, worked)
	}
}

// TestFailureLogBounded: a flood of failures gives a line for the first
// of each address and user, then one summary with the count per interval,
// not a line each (9 MB of log in 10 s).
func TestFailureLogBounded(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\nviewer:"+bhash(t, "secret")+"\n")
	users, err := OpenUsers(path, testLogger(logs))
	if err != nil {
		t.Fatal(err)
	}
	lim := NewLimiter()
	lim.Free = 1 << 30
	a := New(users, nil, &Sessions{Max: 10}, lim, testLogger(logs))
	// The intervals end when the test says, however slow the machine.
	var mu sync.Mutex
	var ends []func()
	a.failures.afterFunc = func(d time.Duration, f func()) *time.Timer {
		if d != DefaultFailLogEvery {
			t.Errorf("interval %v, want the default %v", d, DefaultFailLogEvery)
		}
		mu.Lock()
		ends = append(ends, f)
		mu.Unlock()
		return nil
	}
	endInterval := func() {
		mu.Lock()
		fs := ends
		ends = nil
		mu.Unlock()
		for _, f := range fs {
			f()
		}
	}
	ctx := context.Background()
	one, two := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	token := strings.Repeat("a", 64)
	for range 50 {
		a.Password(ctx, "admin", "x", MethodBasic, one)
		a.Password(ctx, "viewer", "x", MethodBasic, one)
		a.Session(token, two)
	}
	lines := func(s string) int { return strings.Count(logs.String(), s) }
	if n := lines("auth failed"); n != 3 {
		t.Errorf("%d failure lines for 150 failures of 3 address-user pairs, want 3:\n%s", n, logs.String())
	}
	if n := lines("auth failures held back"); n != 0 {
		t.Errorf("%d summaries before the interval ended", n)
	}
	endInterval()
	for _, want := range []string{`user=admin addr=192.0.2.1 count=49`, `user=viewer addr=192.0.2.1 count=49`, `user=- addr=2001:db8::1 count=49`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no summary with %q:\n%s", want, logs.String())
		}
	}
	// After the interval, the next failure is a full line again; an
	// interval without held-back failures ends without a summary.
	a.Password(ctx, "admin", "x", MethodBasic, one)
	if n := lines("auth failed"); n != 4 {
		t.Errorf("%d failure lines after the interval, want 4", n)
	}
	endInterval()
	if n := lines("auth failures held back"); n != 3 {
		t.Errorf("%d summaries, want 3", n)
	}
}

func testLogger(logs *testutil.SyncBuffer) *slog.Logger {
	if logs == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(logs, nil))
}
