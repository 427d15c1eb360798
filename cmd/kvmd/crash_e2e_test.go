package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"kvmd/auth"

	"kvmd/internal/testutil"
)

// flocks returns the processes holding a flock and those waiting for one,
// from /proc/locks: a waiter's line has "->" before its lock type.
func flocks(t *testing.T) (holders, waiters []int) {
	t.Helper()
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) > 5 && fs[1] == "->" && fs[2] == "FLOCK":
			if pid, err := strconv.Atoi(fs[5]); err == nil {
				waiters = append(waiters, pid)
			}
		case len(fs) > 4 && fs[1] == "FLOCK":
			if pid, err := strconv.Atoi(fs[4]); err == nil {
				holders = append(holders, pid)
			}
		}
	}
	return holders, waiters
}

// dirLock is the lock every writer of the users, roles and tokens files
// takes: a flock of their directory.
type dirLock struct{ f *os.File }

func lockDir(t *testing.T, dir string) *dirLock {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return &dirLock{f}
}

func (l *dirLock) unlock() { l.f.Close() }

// waitFlock waits up to d for pid to hold a flock (holding) or to wait
// for one (!holding). It gives up early, false, once over is closed.
func waitFlock(t *testing.T, pid int, holding bool, d time.Duration, over <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		h, w := flocks(t)
		if slices.Contains(h, pid) && holding || slices.Contains(w, pid) && !holding {
			return true
		}
		select {
		case <-over:
			return false
		default:
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// killBetweenLocks runs start, which makes a process change the
// credential files in dir and returns its pid and a channel closed when
// the change is over (the command exited, the request answered), lets the
// process through skip+1 of its takes of the flock of dir and kills it
// with SIGKILL when it asks for the next: the test holds the lock when the
// process waits for it, lets it go, waits until the process has closed a
// file of dir (which it reads and writes under the lock), and takes the
// lock again, so that it holds it when the process next asks. A writer
// that takes the lock once for its whole change is seen either before or
// after it, never inside. It reports whether the process was killed.
//
// The files' closes are seen through inotify, whose events wait in a
// queue: a look at /proc/locks for the process holding the lock missed
// the holds shorter than the test's polls, on a loaded machine most of
// them, and the test then took the lock only after the next take. A
// process whose next take comes before the test's, or that takes no more,
// is not killed (false); one that neither touches the files nor ends its
// change is stuck: that fails.
func killBetweenLocks(t *testing.T, dir string, skip int, start func() (pid int, over <-chan struct{})) bool {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_CLOSE_NOWRITE|unix.IN_CLOSE_WRITE); err != nil {
		t.Fatal(err)
	}
	l := lockDir(t, dir)
	p, over := start()
	// Whatever happened, the change is over before the files are
	// checked (this runs after the unlocks below).
	defer func() {
		select {
		case <-over:
		case <-time.After(30 * time.Second):
			t.Errorf("process %d's change not over within 30 s of the test's last look", p)
		}
	}()
	defer func() { l.unlock() }() // a second close of an unlocked one is harmless
	if !waitFlock(t, p, false, 10*time.Second, nil) {
		t.Fatalf("process %d never waited for the lock of %s", p, dir)
	}
	for range skip + 1 {
		drainEvents(t, in) // the test's own, and none of the process's yet
		l.unlock()
		if !waitFileClosed(t, in, 10*time.Second, over) {
			select {
			case <-over:
				return false
			default:
				t.Fatalf("process %d neither touched a file of %s nor ended its change within 10 s", p, dir)
			}
		}
		l = lockDir(t, dir)
		// Long enough for a password's hash between two takes on a
		// loaded machine; a process that ends its change ends the wait.
		if !waitFlock(t, p, false, 2*time.Second, over) {
			return false
		}
	}
	syscall.Kill(p, syscall.SIGKILL)
	return true
}

// drainEvents reads and drops the inotify events waiting on in.
func drainEvents(t *testing.T, in int) {
	t.Helper()
	for readEvents(t, in, 0) != nil {
	}
}

// waitFileClosed waits up to d for inotify's in to say that a file of the
// watched directory (not the directory itself: the lock's open) was
// closed. It gives up early, false, once over is closed.
func waitFileClosed(t *testing.T, in int, d time.Duration, over <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for buf := readEvents(t, in, 10*time.Millisecond); len(buf) >= unix.SizeofInotifyEvent; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
			if ev.Len > 0 {
				return true
			}
			buf = buf[unix.SizeofInotifyEvent+int(ev.Len):]
		}
		select {
		case <-over:
			return false
		default:
		}
	}
	return false
}

// readEvents returns the inotify events waiting on in, after waiting up
// to d for some; nil when none came.
func readEvents(t *testing.T, in int, d time.Duration) []byte {
	t.Helper()
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}}, int(d.Milliseconds()))
	if errors.Is(err, unix.EINTR) || n == 0 {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	n, err = unix.Read(in, buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// crashFixture is a users file of admin (no role line: an admin, as every
// user of a file of before roles) and bob (viewer), with an API token of
// bob's, in a directory of its own.
type crashFixture struct {
	dir, users string
	bobToken   string
}

// crashTemplate makes the fixture's files once; each attempt copies them.
func crashTemplate(t *testing.T) *crashFixture {
	t.Helper()
	f := &crashFixture{dir: t.TempDir()}
	f.users = filepath.Join(f.dir, "htpasswd")
	if _, stderr, err := runKvmd(t, "admin-pw\n", "user", "add", "admin", "--users", f.users); err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	if _, stderr, err := runKvmd(t, "bob-pw\n", "user", "add", "bob", "--role", "viewer", "--users", f.users); err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	out, stderr, err := runKvmd(t, "", "token", "add", "ci", "--user", "bob", "--users", f.users)
	if err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	f.bobToken = strings.TrimSpace(out)
	return f
}

func (f *crashFixture) copy(t *testing.T) *crashFixture {
	t.Helper()
	c := &crashFixture{dir: t.TempDir(), bobToken: f.bobToken}
	c.users = filepath.Join(c.dir, "htpasswd")
	if err := testutil.CopyTree(f.dir, c.dir); err != nil {
		t.Fatal(err)
	}
	return c
}

// serve starts a daemon on the fixture's files and waits until it
// answers (its log line would come up to 100 ms late: logbuf).
func (f *crashFixture) serve(t *testing.T) (*proc, string) {
	t.Helper()
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", f.users, "--listen", addr, "--access-log=false")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return d, "http://" + addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not listen on %s:\n%s", addr, d.stderr)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkClient sends the checks of tokens that must fail each from an
// address of its own (127.2.x.y), so that the daemon's back-off for
// failures does not block the loop's other requests.
var checkClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
	n := checkAddr.Add(1)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 2, byte(n>>8), byte(n))}}
	return d.DialContext(ctx, network, addr)
}, DisableKeepAlives: true}}

var checkAddr atomic.Uint32

// do sends a request as admin (X-KVMD headers) or with hdr, and returns
// the status.
func do(t *testing.T, method, url, body string, hdr map[string]string) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if hdr == nil {
		hdr = map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pw"}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := checkClient.Do(req)
	if err != nil {
		return 0 // the daemon was killed
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// eveIsNoAdmin checks, on a fresh daemon over the files as they are, that
// eve (being made a viewer when the writer was killed) cannot do what
// only an admin may.
func eveIsNoAdmin(t *testing.T, f *crashFixture) {
	t.Helper()
	d, base := f.serve(t)
	defer d.cmd.Process.Kill()
	if st := do(t, "GET", base+"/api/auth/users", "", map[string]string{"X-KVMD-User": "eve", "X-KVMD-Passwd": "eve-pw"}); st == 200 {
		t.Errorf("eve, a new viewer whose writer was killed, lists the users: an admin (roles file %q)", fileText(t, f.users+".roles"))
	}
}

// tokenIsDead checks on a fresh daemon that bob's old token, of the bob
// whose removal was killed, does not let the re-created bob in.
func tokenIsDead(t *testing.T, f *crashFixture) {
	t.Helper()
	d, base := f.serve(t)
	defer d.cmd.Process.Kill()
	bearer := map[string]string{"Authorization": "Bearer " + f.bobToken}
	if st := do(t, "GET", base+"/api/auth/check", "", bearer); st == 200 {
		// The removal was killed before it took: bob and the token are
		// still there. Finish it.
		if st := do(t, "DELETE", base+"/api/auth/users?name=bob", "", nil); st != 200 {
			t.Fatalf("removing bob again: %d", st)
		}
	}
	if st := do(t, "POST", base+"/api/auth/users", `{"name":"bob","passwd":"new-bob-pw","role":"viewer"}`, nil); st != 200 {
		t.Fatalf("re-creating bob: %d", st)
	}
	if st := do(t, "GET", base+"/api/auth/check", "", bearer); st != 403 {
		t.Errorf("the token of the removed bob lets the re-created bob in: %d (tokens file %q)", st, fileText(t, f.users+".tokens"))
	}
}

// fileText is a file's content for a failure message, or why it has none.
func fileText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprint(err)
	}
	return string(b)
}

// TestKillBetweenFileWrites kills the writer of a change that spans the
// users, roles and tokens files between its file writes, from the command
// line and through the API: a new viewer must not come back as an admin,
// and a removed user's token must not let the re-created name in. Each
// attempt kills one gap between takes of the lock later than the last,
// if that killed (a writer that took the lock once per file is killed
// between two files), and each case goes on until wantKills attempts
// killed, failing if maxAttempts did not get there: an attempt whose
// writer took the lock again before the test could (a gap of
// microseconds, most often lost on a loaded machine) is checked but not
// counted, and a case whose kills never land shows nothing. (A writer
// that changes the files under one lock has no such point inside its
// change; the kills inside it are TestCrashInsideChange's, in package
// auth.)
func TestKillBetweenFileWrites(t *testing.T) {
	const wantKills, maxAttempts = 3, 40
	tmpl := crashTemplate(t)
	cases := []struct {
		name  string
		run   func(t *testing.T, f *crashFixture, skip int) bool // reports a kill
		check func(t *testing.T, f *crashFixture)
	}{
		{"kvmd user add --role viewer", func(t *testing.T, f *crashFixture, skip int) bool {
			cmd := exec.Command(kvmdBin, "user", "add", "eve", "--role", "viewer", "--users", f.users)
			cmd.Stdin = strings.NewReader("eve-pw\n")
			return killBetweenLocks(t, f.dir, skip, startCmd(t, cmd))
		}, eveIsNoAdmin},
		{"POST /api/auth/users viewer", func(t *testing.T, f *crashFixture, skip int) bool {
			return killBetweenLocks(t, f.dir, skip, f.request(t, "POST", "/api/auth/users", `{"name":"eve","passwd":"eve-pw","role":"viewer"}`))
		}, eveIsNoAdmin},
		{"kvmd user del", func(t *testing.T, f *crashFixture, skip int) bool {
			cmd := exec.Command(kvmdBin, "user", "del", "bob", "--users", f.users)
			return killBetweenLocks(t, f.dir, skip, startCmd(t, cmd))
		}, tokenIsDead},
		{"DELETE /api/auth/users", func(t *testing.T, f *crashFixture, skip int) bool {
			return killBetweenLocks(t, f.dir, skip, f.request(t, "DELETE", "/api/auth/users?name=bob", ""))
		}, tokenIsDead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kills, attempts, skip := 0, 0, 0
			for kills < wantKills && attempts < maxAttempts {
				attempts++
				f := tmpl.copy(t)
				killed := tc.run(t, f, skip)
				if killed {
					kills++
				}
				tc.check(t, f)
				if t.Failed() {
					t.Fatalf("attempt %d, let through %d takes of the lock, killed when asking for the next: %v", attempts, skip+1, killed)
				}
				// The next attempt kills at the next gap, or, past the
				// writer's last take, at the first again.
				skip++
				if !killed {
					skip = 0
				}
			}
			if kills < wantKills {
				t.Fatalf("only %d of %d attempts killed the writer between two of its takes of the lock; want %d", kills, attempts, wantKills)
			}
			t.Logf("%d of %d attempts killed the writer between two of its takes of the lock", kills, attempts)
		})
	}
}

// startCmd is killBetweenLocks's start for a command: its change is over
// when it has exited (and been waited for, before the test goes on).
func startCmd(t *testing.T, cmd *exec.Cmd) func() (int, <-chan struct{}) {
	return func() (int, <-chan struct{}) {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		over := make(chan struct{})
		go func() { cmd.Wait(); close(over) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-over })
		return cmd.Process.Pid, over
	}
}

// request is killBetweenLocks's start for a write through the API of a
// daemon on the fixture's files: its change is over when it has been
// answered (or the daemon killed).
func (f *crashFixture) request(t *testing.T, method, path, body string) func() (int, <-chan struct{}) {
	d, base := f.serve(t)
	return func() (int, <-chan struct{}) {
		over := make(chan struct{})
		go func() { do(t, method, base+path, body, nil); close(over) }()
		return d.cmd.Process.Pid, over
	}
}

// killModel is what the kill loop knows of the files: each user's role,
// and the API tokens it made, live or dead. An operation killed midway
// may have taken effect or not: its user may have either role, and a
// token it made may or may not exist (its secret is then unknown).
type killModel struct {
	roles map[string]string    // user -> role
	live  map[string]killToken // token secret -> whose and its name
	dead  map[string]string    // secrets that must never let anyone in again -> whose
}

type killToken struct{ user, name string }

// killOp is one write through the API, with what it changes in the model
// when it has taken effect.
type killOp struct {
	name         string
	method, path string
	body         string
	user         string // whose role it sets ("" none), to role ("": removed)
	role         string
	token        string // the secret it revokes, or that its user's removal kills
}

// nextOp picks an operation that makes sense in m.
func (m *killModel) nextOp(rnd *rand.Rand) killOp {
	roles := []string{"viewer", "operator", "admin"}
	var users []string // everyone but admin, who stays
	for u := range m.roles {
		if u != "admin" {
			users = append(users, u)
		}
	}
	slices.Sort(users)
	var absent []string
	for _, u := range []string{"bob", "carol", "eve"} {
		if _, ok := m.roles[u]; !ok {
			absent = append(absent, u)
		}
	}
	var tokens []string
	for s := range m.live {
		tokens = append(tokens, s)
	}
	slices.Sort(tokens)
	for {
		switch rnd.IntN(6) {
		case 0:
			if len(absent) > 0 {
				u, r := absent[rnd.IntN(len(absent))], roles[rnd.IntN(2)]
				return killOp{name: "add user", method: "POST", path: "/api/auth/users",
					body: `{"name":"` + u + `","passwd":"` + u + `-pw","role":"` + r + `"}`, user: u, role: r}
			}
		case 1:
			if len(users) > 0 {
				u := users[rnd.IntN(len(users))]
				return killOp{name: "remove user", method: "DELETE", path: "/api/auth/users?name=" + u, user: u}
			}
		case 2:
			if len(users) > 0 {
				u, r := users[rnd.IntN(len(users))], roles[rnd.IntN(len(roles))]
				return killOp{name: "set role", method: "PATCH", path: "/api/auth/users", body: `{"name":"` + u + `","role":"` + r + `"}`, user: u, role: r}
			}
		case 3:
			if len(users) > 0 {
				u := users[rnd.IntN(len(users))]
				return killOp{name: "set password", method: "PATCH", path: "/api/auth/users", body: `{"name":"` + u + `","passwd":"` + u + `-pw2"}`}
			}
		case 4:
			if len(users) > 0 {
				u := users[rnd.IntN(len(users))]
				return killOp{name: "add token", method: "POST", path: "/api/auth/tokens",
					body: fmt.Sprintf(`{"name":"t%d","user":"%s","role":"viewer"}`, rnd.IntN(1_000_000), u)}
			}
		case 5:
			if len(tokens) > 0 {
				s := tokens[rnd.IntN(len(tokens))]
				return killOp{name: "revoke token", method: "DELETE", path: "/api/auth/tokens?user=" + m.live[s].user + "&name=" + m.live[s].name, token: s}
			}
		}
	}
}

// TestKillLoop kills the daemon with SIGKILL at random points of its
// writes to the users, roles and tokens files through the API (users
// added and removed, roles and passwords set, tokens made and revoked),
// at least 100 times while a write was in flight (3 of them, at least, inside
// a change of the files: FILE.pending left), and after each kill
// starts it again on the files left behind and checks them: every file
// parses whole, no user holds a role that neither the state before the
// write nor after it gave, no token revoked or of a removed user lets
// anyone in (also once its user's name is made again), and admin is
// still an admin. KVMD_KILL_SEED=N replays a run.
func TestKillLoop(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KVMD_KILL_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = n
	}
	t.Logf("KVMD_KILL_SEED=%d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))

	dir := t.TempDir()
	users := filepath.Join(dir, "htpasswd")
	hash, err := bcrypt.GenerateFromPassword([]byte("admin-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte("admin:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &crashFixture{dir: dir, users: users}
	m := &killModel{roles: map[string]string{"admin": "admin"}, live: map[string]killToken{}, dead: map[string]string{}}
	var pending *killOp
	// The kills' delays are drawn over how long a write of the kind takes
	// now, measured on a write of it let through whole: the first of each
	// kind and one in measureEvery after, so that the delays follow the
	// machine's speed as other work comes and goes. (Learnt only from
	// the writes that outran their kill, the estimate stayed where the
	// first ones left it, 100 ms: with three cores busy every kill landed
	// in the first 125 ms of writes that hashed a password for longer,
	// none at their end, where the files change: 0 inside in 1000.)
	const measureEvery = 4
	est := map[string]time.Duration{}
	seen := map[string]int{} // writes of each kind so far
	// At least wantKills kills in flight, and wantInside of them inside a
	// change of the files: FILE.pending found at the restart (written
	// before the first file, removed after the last). From one kill in ten
	// to one in fifty lands there (fewer with a core busy); a loop whose
	// kills never do shows nothing of the files' order. 1000 kills with
	// fewer than 3 there fail.
	const wantKills, wantInside = 100, 3
	kills, writes := 0, 0
	inside := 0
	start := time.Now()
	for kills < wantKills || inside < wantInside {
		if writes > 4*max(kills, wantKills) {
			t.Fatalf("only %d of %d writes were killed in flight", kills, writes)
		}
		if kills >= 10*wantKills {
			t.Fatalf("%d kills in flight, only %d of them inside a change of the files (%s left)", kills, inside, auth.PendingPath(users))
		}
		d, base := f.serve(t)
		m.check(t, f, base, pending, false)
		if t.Failed() {
			t.Fatalf("after %d kills, %d writes (the last %+v)", kills, writes, pending)
		}
		op := m.nextOp(rnd)
		pending = &op
		writes++
		measure := seen[op.name]%measureEvery == 0
		seen[op.name]++
		var delay time.Duration
		if !measure {
			delay = time.Duration(rnd.Int64N(int64(est[op.name])*5/4 + 1))
		}
		type result struct {
			status int
			body   []byte
			took   time.Duration
		}
		res := make(chan result, 1)
		sent := time.Now()
		go func() {
			st, b := doBody(op.method, base+op.path, op.body)
			res <- result{st, b, time.Since(sent)}
		}()
		var r result
		if measure {
			r = <-res
			est[op.name] = r.took
			d.cmd.Process.Kill() // after the write: no kill inside it
		} else {
			select {
			case r = <-res:
				d.cmd.Process.Kill() // after the write: no kill inside it
			case <-time.After(delay):
				d.cmd.Process.Kill()
				r = <-res
				if r.status == 0 {
					kills++
				}
			}
		}
		<-d.done
		d.done <- nil
		if r.status == 0 {
			if _, err := os.Stat(auth.PendingPath(users)); err == nil {
				inside++
			}
		}
		if r.status == 200 {
			m.apply(op, r.body)
			pending = nil
		} else if r.status != 0 {
			t.Fatalf("%s %s %s: %d %s", op.method, op.path, op.body, r.status, r.body)
		}
	}
	d, base := f.serve(t)
	m.check(t, f, base, pending, true)
	d.stop(t)
	t.Logf("%d writes, %d killed in flight, %d of them inside a change of the files (FILE.pending left), in %s", writes, kills, inside, time.Since(start).Round(time.Millisecond))
}

// doBody sends a request as admin and returns the status (0: no answer,
// the daemon was killed) and the body.
func doBody(method, url, body string) (int, []byte) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("X-KVMD-User", "admin")
	req.Header.Set("X-KVMD-Passwd", "admin-pw")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, b
}

// apply records a write that took effect.
func (m *killModel) apply(op killOp, body []byte) {
	switch {
	case op.name == "add token":
		var v struct {
			Result struct{ User, Name, Token string } `json:"result"`
		}
		if json.Unmarshal(body, &v) == nil && v.Result.Token != "" {
			m.live[v.Result.Token] = killToken{v.Result.User, v.Result.Name}
		}
	case op.token != "":
		m.kill(op.token)
	case op.user != "" && op.role == "":
		delete(m.roles, op.user)
		for s, tk := range m.live {
			if tk.user == op.user {
				m.kill(s)
			}
		}
	case op.user != "":
		m.roles[op.user] = op.role
	}
}

func (m *killModel) kill(secret string) {
	m.dead[secret] = m.live[secret].user
	delete(m.live, secret)
}

// check reads the files left behind and asks the daemon serving them at
// base; pending is the write that was killed, whose effect may or may not
// be there. It brings the model to what it finds. The dead tokens of the
// users not there are tried only with all (the last check).
func (m *killModel) check(t *testing.T, f *crashFixture, base string, pending *killOp, all bool) {
	t.Helper()
	parse := map[string]func([]byte) []error{
		f.users:             func(b []byte) []error { _, e := auth.ParseHtpasswd(b); return e },
		f.users + ".roles":  func(b []byte) []error { _, e := auth.ParseRoles(b); return e },
		f.users + ".tokens": func(b []byte) []error { _, e := auth.ParseTokens(b); return e },
	}
	for path, p := range parse {
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) && path != f.users {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if errs := p(b); len(errs) > 0 {
			t.Errorf("%s does not parse whole: %v\n%s", path, errs, b)
		}
	}
	st, b := doBody("GET", base+"/api/auth/users", "")
	var v struct {
		Result struct {
			Users []struct{ Name, Role string } `json:"users"`
		} `json:"result"`
	}
	if st != 200 || json.Unmarshal(b, &v) != nil {
		t.Fatalf("GET /api/auth/users as admin: %d %s", st, b)
	}
	got := map[string]string{}
	for _, u := range v.Result.Users {
		got[u.Name] = u.Role
	}
	for _, u := range []string{"admin", "bob", "carol", "eve"} {
		allowed := []string{m.roles[u]}
		if pending != nil && pending.user == u {
			allowed = append(allowed, pending.role)
		}
		if !slices.Contains(allowed, got[u]) {
			t.Errorf("%s has the role %q; before the write %q, the write %+v (roles file %q)", u, got[u], m.roles[u], pending, fileText(t, f.users+".roles"))
		}
	}
	if got["admin"] != "admin" {
		t.Errorf("admin is %q", got["admin"])
	}
	if pending != nil && pending.user != "" {
		if _, ok := got[pending.user]; ok {
			m.roles[pending.user] = got[pending.user]
		} else if pending.role == "" {
			m.apply(*pending, nil) // the removal took: its tokens are dead
		} else {
			delete(m.roles, pending.user)
		}
	}
	if pending != nil && pending.token != "" {
		// A revocation killed midway: the token is dead or alive.
		bearer := map[string]string{"Authorization": "Bearer " + pending.token}
		if do(t, "GET", base+"/api/auth/check", "", bearer) != 200 {
			m.kill(pending.token)
		}
	}
	for s, u := range m.dead {
		// A dead token of a user who is not there cannot let anyone in
		// but through a bug the next check finds once the name is back.
		if _, back := got[u]; !back && !all {
			continue
		}
		if st := do(t, "GET", base+"/api/auth/check", "", map[string]string{"Authorization": "Bearer " + s}); st != 403 {
			t.Errorf("a revoked token, or one of a removed user, answers %d (tokens file %q)", st, fileText(t, f.users+".tokens"))
		}
	}
	for s, tk := range m.live {
		if st := do(t, "GET", base+"/api/auth/check", "", map[string]string{"Authorization": "Bearer " + s}); st != 200 {
			t.Errorf("a live token of %s answers %d", tk.user, st)
		}
	}
}
