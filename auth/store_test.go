package auth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestRequestPathReadsNoFile: what a request asks (a password, a role, a
// token) is answered from the Snapshot alone. A store that is not told
// of a change (no watch, no Reload) answers as before it, however long
// after: no request reads a file. Reload takes it.
func TestRequestPathReadsNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\n")
	store, err := OpenStore(path, StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUsers(store)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\nnewbie:"+bhash(t, "hello")+"\n")
	writeFile(t, RolesPath(path), "admin:viewer\n")
	time.Sleep(300 * time.Millisecond) // longer than the old per-request stat interval
	ctx := context.Background()
	if ok, _, _ := u.Verify(ctx, "newbie", "hello"); ok || u.Has("newbie") || u.Role("admin") != RoleAdmin {
		t.Errorf("a request read the changed files: newbie %v %v, admin %v", ok, u.Has("newbie"), u.Role("admin"))
	}
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := u.Verify(ctx, "newbie", "hello"); !ok || u.Role("admin") != RoleViewer {
		t.Errorf("after Reload: newbie %v, admin %v", ok, u.Role("admin"))
	}
}

// TestStoreFollowsFiles: a store that watches (inotify) or polls takes a
// change of the files made by another process within a moment, with no
// call: a token revoked there ends its requests, a user removed there
// ends the change's OnChange.
func TestStoreFollowsFiles(t *testing.T) {
	for _, poll := range []bool{false, true} {
		name := "inotify"
		if poll {
			name = "poll"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			users, bobToken, _ := crashFixture(t, dir)
			s, err := OpenStore(users, StoreConfig{Watch: true, Poll: poll, PollEvery: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ch := watchChanges(s)
			lt := s.Snapshot().token(hashToken(bobToken))
			if lt == nil {
				t.Fatal("no token")
			}
			other, err := OpenStore(users, StoreConfig{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := other.Edit(nil, func(e *Edit) error { return e.DeleteUser("bob") }); err != nil {
				t.Fatal(err)
			}
			if got := ch.wait(t); got != "bob:ended" {
				t.Errorf("changes: %q", got)
			}
			select {
			case <-lt.ctx.Done():
			case <-time.After(time.Second):
				t.Error("the removed user's token's requests did not end")
			}
			t.Logf("taken %s after the change began", time.Since(start))
		})
	}
}

// TestTokenExpiryTimer: a token's requests end at its expiry on the
// store's clock, not a nanosecond before, with no request; a token that
// is expired when read is ended at once.
func TestTokenExpiryTimer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "alice:"+bhash(t, "pw")+"\n")
	clock := clockwork.NewFakeClockAt(time.Unix(1_800_000_000, 0))
	s, err := OpenStore(path, StoreConfig{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var soon, past string
	err = s.Edit(nil, func(e *Edit) error {
		var err error
		if soon, err = e.AddToken(TokenRequest{User: "alice", Name: "soon", Expires: clock.Now().Add(time.Hour)}); err != nil {
			return err
		}
		past, err = e.AddToken(TokenRequest{User: "alice", Name: "past", Expires: clock.Now().Add(-time.Second)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	lt := s.Snapshot().token(hashToken(soon))
	if s.Snapshot().token(hashToken(past)).ctx.Err() == nil {
		t.Error("an expired token's context is live")
	}
	clock.Advance(time.Hour - time.Nanosecond)
	time.Sleep(20 * time.Millisecond) // a timer would fire in a goroutine
	if lt.ctx.Err() != nil {
		t.Fatal("ended a nanosecond before its expiry")
	}
	clock.Advance(time.Nanosecond)
	select {
	case <-lt.ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("not ended at its expiry")
	}
}

// TestRecreatedNameInheritsNothing: a name made again gets none of what a
// former user of the name left (a role line, tokens: an editor removed the
// entry alone); one removed through the store leaves nothing behind.
func TestRecreatedNameInheritsNothing(t *testing.T) {
	dir := t.TempDir()
	users, bobToken, ghostToken := crashFixture(t, dir)
	s, err := OpenStore(users, StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Edit(nil, func(e *Edit) error { return e.AddUser("ghost", "x", RoleViewer) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Edit(nil, func(e *Edit) error { return e.DeleteUser("bob") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Edit(nil, func(e *Edit) error { return e.AddUser("bob", "x", RoleNone) }); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if snap.token(hashToken(ghostToken)) != nil || snap.token(hashToken(bobToken)) != nil {
		t.Error("a name made again has its former user's token")
	}
	if snap.Role("ghost") != RoleViewer {
		t.Errorf("ghost is %v, want the viewer asked for (its old line said admin)", snap.Role("ghost"))
	}
	roles, _ := os.ReadFile(RolesPath(users))
	if string(roles) != "ghost:viewer\n" {
		t.Errorf("roles file %q", roles)
	}
}

// TestSameError: a re-read that fails as before (the same file error,
// however wrapped, or the same damage of a pending change) is the same
// failure; another errno, file or damage is not.
func TestSameError(t *testing.T) {
	dir := t.TempDir()
	_, enoent := os.ReadFile(filepath.Join(dir, "missing"))
	_, enoent2 := os.ReadFile(filepath.Join(dir, "missing"))
	_, other := os.ReadFile(filepath.Join(dir, "other"))
	_, eisdir := os.ReadFile(dir)
	_, damaged := decodePending([]byte("garbage"))
	_, damaged2 := decodePending([]byte("garbage"))
	flipped := encodePending(map[string][]byte{"users": []byte("a:b\n")})
	flipped[len(pendingMagic)] ^= 1
	_, mismatch := decodePending(flipped)
	wrap := func(err error) error { return fmt.Errorf("auth: reading users file: %w", err) }
	for _, c := range []struct {
		name string
		a, b error
		want bool
	}{
		{"none", nil, nil, true},
		{"none and one", nil, enoent, false},
		{"the same file error", wrap(enoent), enoent2, true},
		{"another file", enoent, other, false},
		{"another errno", eisdir, wrap(enoent), false},
		{"the same damage", damaged, damaged2, true},
		{"another damage", damaged, mismatch, false},
		{"a file error and a damage", enoent, damaged, false},
	} {
		if c.a != nil && c.b != nil && c.a == c.b {
			t.Fatalf("%s: one value twice", c.name)
		}
		if got := sameError(c.a, c.b); got != c.want {
			t.Errorf("%s: sameError(%v, %v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
}
