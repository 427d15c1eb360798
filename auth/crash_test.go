package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The crash tests run a change in a child process (this test binary run
// again, TestCrashChild) that kills itself with SIGKILL at one of the
// change's steps, then read the files as the next process would.

const (
	crashDirEnv  = "KVMD_CRASH_DIR"
	crashOpEnv   = "KVMD_CRASH_OP"
	crashStepEnv = "KVMD_CRASH_STEP"
)

// crashOps are the changes that span files, as the API and the commands
// make them: each runs on the fixture of crashFixture. unwritten names the
// files a change leaves alone: its "wrote FILE" step is the one step of
// crashSteps it never reaches.
var crashOps = map[string]struct {
	edit      func(e *Edit) error
	unwritten []string
}{
	// A new viewer: an entry and a role line.
	"add viewer": {func(e *Edit) error {
		return e.AddUser("eve", "$2y$04$p3MM4R.pqWc06kO1T/be3exmQrYUBiVfoqfa5lmUnCZK361vImKJa", RoleViewer)
	}, []string{"tokens"}},
	// A name made again: the role line and the token its former user
	// left (an editor removed the entry alone) go with it.
	"re-create": {func(e *Edit) error {
		return e.AddUser("ghost", "$2y$04$p3MM4R.pqWc06kO1T/be3exmQrYUBiVfoqfa5lmUnCZK361vImKJa", RoleNone)
	}, nil},
	// A removal: the entry, the role line and the tokens.
	"remove": {func(e *Edit) error { return e.DeleteUser("bob") }, nil},
	// A password reset (a new hash: the fixture's old one would change
	// nothing) that revokes the user's tokens.
	"reset": {func(e *Edit) error {
		e.Users.Set("bob", "$2y$04$23pAm1X/5bbtV4LGlKeRYejbEjhl0kVhKYitOSfxQRfK5JqejPBji")
		e.RevokeTokens("bob")
		return nil
	}, []string{"roles"}},
}

// crashSteps are the points of a change of the three files at which the
// child dies: before anything, with FILE.pending written, after each file,
// after all of them (FILE.pending still there), and not at all.
var crashSteps = []string{"start", "wrote pending", "wrote roles", "wrote tokens", "wrote users", "wrote all", "none"}

// crashFixture writes the files every crash test starts from: admin (no
// role line: an admin), bob (a viewer with a token), a role line and a
// token of ghost, who is not in the users file.
func crashFixture(t *testing.T, dir string) (users string, bobToken, ghostToken string) {
	t.Helper()
	users = filepath.Join(dir, "htpasswd")
	writeFile(t, users, "# users\nadmin:$2y$04$p3MM4R.pqWc06kO1T/be3exmQrYUBiVfoqfa5lmUnCZK361vImKJa\nbob:$2y$04$p3MM4R.pqWc06kO1T/be3exmQrYUBiVfoqfa5lmUnCZK361vImKJa\n")
	writeFile(t, RolesPath(users), "bob:viewer\nghost:admin\n")
	// Fixed secrets: every fixture is the same, byte for byte.
	bobToken, ghostToken = TokenPrefix+strings.Repeat("b", 64), TokenPrefix+strings.Repeat("9", 64)
	line := func(user, name, role, secret string) string {
		h := hashToken(secret)
		return fmt.Sprintf("%s:%s:%s:1800000000:0:0:%x\n", user, name, role, h[:])
	}
	writeFile(t, TokensPath(users), line("bob", "ci", "viewer", bobToken)+line("ghost", "old", "admin", ghostToken))
	return users, bobToken, ghostToken
}

// TestCrashChild is the child: it runs crashOps[op] on the files in dir
// and kills itself at step. It does nothing in a normal test run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the crash tests' child process")
	}
	store, err := OpenStore(filepath.Join(dir, "htpasswd"), StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	step := os.Getenv(crashStepEnv)
	die := func(at string) error {
		if at == step {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not instant
		}
		return nil
	}
	store.crash = die
	err = store.Edit(nil, func(e *Edit) error {
		die("start")
		return crashOps[os.Getenv(crashOpEnv)].edit(e)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashInsideChange kills a process at every step of every change that
// spans the users, roles and tokens files, and reads the files as the
// next process (the daemon, the next command) does: each file whole, and
// all of them either as before the change or as after it; never a role
// given, a role line or token left to a user's name, or a token of a
// removed user kept. A reader that may not write reads a change cut short
// as done (TestPendingReadOnly).
func TestCrashInsideChange(t *testing.T) {
	for _, op := range slices.Sorted(func(yield func(string) bool) {
		for k := range crashOps {
			if !yield(k) {
				return
			}
		}
	}) {
		// The files before the change and after it, made without a crash.
		beforeDir, afterDir := t.TempDir(), t.TempDir()
		crashFixture(t, beforeDir)
		users, _, _ := crashFixture(t, afterDir)
		s, err := OpenStore(users, StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Edit(nil, crashOps[op].edit); err != nil {
			t.Fatal(err)
		}
		before, after := readAll(t, beforeDir), readAll(t, afterDir)
		for _, step := range crashSteps {
			t.Run(op+"/"+step, func(t *testing.T) {
				dir := t.TempDir()
				users, bobToken, ghostToken := crashFixture(t, dir)
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashOpEnv+"="+op, crashStepEnv+"="+step)
				out, err := cmd.CombinedOutput()
				killed := false
				if ee, ok := err.(*exec.ExitError); ok {
					if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
						killed = true
					}
				}
				// Every step is reached and killed there, but "none" and
				// the writes of the files the change leaves alone: a step
				// never reached (renamed, moved, or a change that wrote
				// less than it should) would test nothing.
				unwritten := slices.ContainsFunc(crashOps[op].unwritten, func(f string) bool { return step == "wrote "+f })
				switch {
				case (step == "none" || unwritten) && err != nil:
					t.Fatalf("the child, not to be killed at %q, failed: %v\n%s", step, err, out)
				case step != "none" && !unwritten && !killed:
					t.Fatalf("the child never reached the step %q (exit %v):\n%s", step, err, out)
				}
				// The next process reads the files.
				s, err := OpenStore(users, StoreConfig{})
				if err != nil {
					t.Fatal(err)
				}
				got := readAll(t, dir)
				for name, b := range got {
					if name == "pending" && b != "" {
						t.Errorf("FILE.pending left after the next read: %q", b)
					}
				}
				delete(got, "pending")
				delete(before, "pending")
				delete(after, "pending")
				if !maps2Equal(got, before) && !maps2Equal(got, after) {
					t.Errorf("the files are neither as before nor as after the change:\n%v\nbefore %v\nafter %v", got, before, after)
				}
				snap := s.Snapshot()
				for _, path := range []string{users, RolesPath(users), TokensPath(users)} {
					data, _ := os.ReadFile(path)
					var errs []error
					switch path {
					case users:
						_, errs = ParseHtpasswd(data)
					case RolesPath(users):
						_, errs = ParseRoles(data)
					default:
						_, errs = ParseTokens(data)
					}
					if len(errs) > 0 {
						t.Errorf("%s does not parse whole: %v", path, errs)
					}
				}
				if snap.Has("eve") && snap.Role("eve") != RoleViewer {
					t.Errorf("eve, made a viewer, is %v", snap.Role("eve"))
				}
				if snap.Has("ghost") {
					if snap.Role("ghost") != RoleAdmin || snap.token(hashToken(ghostToken)) != nil {
						// RoleNone on add: no line, an admin, as kvmd user add
						// makes one; the old line said admin too, so the
						// token is what tells.
						t.Errorf("the new ghost inherited: role %v, old token %v", snap.Role("ghost"), snap.token(hashToken(ghostToken)) != nil)
					}
					if _, named := mustRoles(t, users).Role("ghost"); named {
						t.Errorf("the old ghost's role line is still there")
					}
				}
				if !snap.Has("bob") && snap.token(hashToken(bobToken)) != nil {
					t.Errorf("bob is gone but his token is still there")
				}
				if snap.Has("bob") && snap.Role("bob") != RoleViewer {
					t.Errorf("bob is %v", snap.Role("bob"))
				}
			})
		}
	}
}

func mustRoles(t *testing.T, users string) *RolesFile {
	t.Helper()
	b, _ := os.ReadFile(RolesPath(users))
	f, _ := ParseRoles(b)
	return f
}

// readAll returns the four files of dir by name, "" for one missing.
func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	users := filepath.Join(dir, "htpasswd")
	out := map[string]string{}
	for name, p := range map[string]string{"users": users, "roles": RolesPath(users), "tokens": TokensPath(users), "pending": PendingPath(users)} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPendingReadOnly: a change cut short that the reader may not finish
// (the daemon under ReadOnlyPaths=/etc/kvmd) is read as done, and one
// whose FILE.pending is damaged makes every user a viewer and refuses
// every token (the files may be halfway), until it is removed.
func TestPendingReadOnly(t *testing.T) {
	dir := t.TempDir()
	users, bobToken, _ := crashFixture(t, dir)
	s := &Store{users: users, roles: RolesPath(users), tokens: TokensPath(users), pending: PendingPath(users)}
	s.log = testLogger(nil)
	newRoles := []byte("bob:admin\n")
	raw := rawFiles{users: []byte("admin:x\nbob:x\n"), roles: []byte("bob:viewer\n")}
	got := s.finishPending(nil, encodePending(map[string][]byte{"roles": newRoles}), nil, raw)
	if !bytes.Equal(got.roles, newRoles) || got.broken != nil {
		t.Errorf("read-only finish: roles %q, broken %v", got.roles, got.broken)
	}
	if b, _ := os.ReadFile(RolesPath(users)); bytes.Equal(b, newRoles) {
		t.Error("a reader without the lock wrote the files")
	}

	// Damaged: a byte changed.
	p := encodePending(map[string][]byte{"roles": newRoles, "users": []byte("admin:x\n")})
	p[len(pendingMagic)+8] ^= 1
	if err := os.WriteFile(PendingPath(users), p, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(users, StoreConfig{Log: testLogger(nil)})
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if snap.Role("admin") != RoleViewer || snap.token(hashToken(bobToken)) != nil {
		t.Errorf("damaged pending change: admin %v, bob's token %v; want a viewer and no token", snap.Role("admin"), snap.token(hashToken(bobToken)) != nil)
	}
	if err := st.Edit(nil, func(e *Edit) error { return nil }); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("an edit over a damaged pending change: %v", err)
	}
	os.Remove(PendingPath(users))
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if snap := st.Snapshot(); snap.Role("admin") != RoleAdmin || snap.token(hashToken(bobToken)) == nil {
		t.Errorf("pending change removed: admin %v, token %v", snap.Role("admin"), snap.token(hashToken(bobToken)) != nil)
	}
}

// TestPendingUndo: a file that cannot be written once FILE.pending is (a
// full disk) undoes the change: the files as before, no FILE.pending, the
// error returned, and the snapshot as before.
func TestPendingUndo(t *testing.T) {
	for _, at := range []string{"wrote pending", "wrote roles", "wrote tokens", "wrote users", "wrote all"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			users, bobToken, _ := crashFixture(t, dir)
			before := readAll(t, dir)
			s, err := OpenStore(users, StoreConfig{})
			if err != nil {
				t.Fatal(err)
			}
			errFull := errors.New("no space left")
			s.crash = func(step string) error {
				if step == at {
					return errFull
				}
				return nil
			}
			if err := s.Edit(nil, func(e *Edit) error { return e.DeleteUser("bob") }); !errors.Is(err, errFull) {
				t.Fatalf("Edit: %v, want the write's error", err)
			}
			if got := readAll(t, dir); !maps2Equal(got, before) {
				t.Errorf("files after the undo:\n%v\nwant\n%v", got, before)
			}
			if snap := s.Snapshot(); !snap.Has("bob") || snap.token(hashToken(bobToken)) == nil {
				t.Errorf("the snapshot lost bob or his token")
			}
		})
	}
}

func TestPendingRoundTrip(t *testing.T) {
	in := map[string][]byte{"users": []byte("a:b\n"), "roles": {}, "tokens": []byte("x\ny\n\n")}
	got, err := decodePending(encodePending(in))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(in) {
		t.Errorf("round trip: %q, want %q", got, in)
	}
	enc := encodePending(in)
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x20
		if _, err := decodePending(bad); err == nil {
			t.Errorf("a change of byte %d not caught", i)
			break
		}
	}
	for n := range len(enc) {
		if _, err := decodePending(enc[:n]); err == nil {
			t.Errorf("cut at %d not caught", n)
			break
		}
	}
}
