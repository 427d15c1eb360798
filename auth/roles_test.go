package auth

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseRoles(t *testing.T) {
	in := "# roles\nalice:viewer\n bob : operator \nbad line\ncarol:root\nROOT:admin\n\ndave:admin\n"
	f, errs := ParseRoles([]byte(in))
	if len(errs) != 3 {
		t.Errorf("errors = %v, want 3 (no colon, bad role, bad name)", errs)
	}
	// carol's line names no role this daemon knows: a viewer, not the
	// admin a user the file does not name is (fail closed).
	want := map[string]Role{"alice": RoleViewer, "bob": RoleOperator, "carol": RoleViewer, "dave": RoleAdmin}
	got := f.Map()
	if len(got) != len(want) {
		t.Fatalf("roles = %v, want %v", got, want)
	}
	for u, r := range want {
		if got[u] != r {
			t.Errorf("%s: %v, want %v", u, got[u], r)
		}
	}
	f.Set("alice", RoleOperator)
	f.Set("erin", RoleViewer)
	f.Delete("bob")
	out := string(f.Bytes())
	wantOut := "# roles\nalice:operator\nbad line\ncarol:root\nROOT:admin\n\ndave:admin\nerin:viewer\n"
	if out != wantOut {
		t.Errorf("edited file:\n%s\nwant:\n%s", out, wantOut)
	}
}

// changes collects what a Store's changes did, for a test to wait for.
type changes struct {
	mu   sync.Mutex
	list []string
	more chan struct{}
}

func watchChanges(s *Store) *changes {
	c := &changes{more: make(chan struct{}, 100)}
	s.OnChange(func(ch Change) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, u := range ch.Ended {
			c.list = append(c.list, u+":ended")
		}
		for _, r := range ch.Roles {
			c.list = append(c.list, r.User+":"+r.Old.String()+">"+r.New.String())
		}
		c.more <- struct{}{}
	})
	return c
}

// wait waits up to two seconds for the next change and returns what the
// changes so far did, and forgets them.
func (c *changes) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-c.more:
	case <-time.After(2 * time.Second):
		t.Fatal("no change seen within 2 s")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := strings.Join(c.list, ",")
	c.list = nil
	return out
}

// TestUsersRoles: no roles file, every user an admin; a role file's change
// is seen by the store's watcher, with no call, and reported; an
// unreadable one makes everyone a viewer.
func TestUsersRoles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(path, []byte("alice:$2y$05$abcdefghijklmnopqrstuu5wqsCUQ9mSgnvXvzcG6Fc4ZtMVEYy.S\nbob:x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u, err := OpenUsers(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Store().Close() })
	if u.Role("alice") != RoleAdmin || u.Role("bob") != RoleAdmin {
		t.Errorf("without a roles file: %v %v, want admins", u.Role("alice"), u.Role("bob"))
	}
	ch := watchChanges(u.Store())
	rp := RolesPath(path)
	if err := os.WriteFile(rp, []byte("bob:viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ch.wait(t); got != "bob:admin>viewer" {
		t.Errorf("changes = %v", got)
	}
	if u.Role("bob") != RoleViewer || u.Role("alice") != RoleAdmin {
		t.Errorf("roles: bob %v alice %v", u.Role("bob"), u.Role("alice"))
	}
	// A roles file that cannot be read (a directory in its place, which
	// fails for root too): everyone is a viewer, and told so.
	if err := os.Remove(rp); err != nil {
		t.Fatal(err)
	}
	if got := ch.wait(t); got != "bob:viewer>admin" {
		t.Errorf("roles file removed: changes = %v", got)
	}
	if err := os.Mkdir(rp, 0o700); err != nil {
		t.Fatal(err)
	}
	if got := ch.wait(t); got != "alice:admin>viewer,bob:admin>viewer" {
		t.Errorf("changes = %v, want both demoted", got)
	}
	if u.Role("alice") != RoleViewer || u.Role("ghost") != RoleViewer {
		t.Errorf("unreadable roles file: alice %v, ghost %v, want viewers (fail closed)", u.Role("alice"), u.Role("ghost"))
	}
	os.Remove(rp)
	ch.wait(t)
	if u.Role("alice") != RoleAdmin {
		t.Errorf("roles file gone again: alice %v, want admin", u.Role("alice"))
	}
}

// TestTokensBatch: uses cost no disk write; Flush writes the last-used
// times once; a revocation from the file (another process) ends the
// token's requests with no call.
func TestTokensBatch(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "htpasswd")
	writeFile(t, users, "alice:"+bhash(t, "pw")+"\n")
	path := TokensPath(users)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := OpenStore(users, StoreConfig{Log: log, Watch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	tk := NewTokens(store, log)
	now := time.Now()
	secret, err := tk.Add("alice", "ci", RoleViewer, now.Add(time.Hour), now, Actor{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	fi0, _ := os.Stat(path)
	var ctx context.Context
	for i := range 1000 {
		lt, c := tk.check(secret, now.Add(time.Duration(i)*time.Millisecond*10))
		if lt == nil {
			t.Fatal("token refused")
		}
		ctx = c
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(fi0.ModTime()) || fi.Size() != fi0.Size() {
		t.Errorf("the tokens file was written by uses")
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	af, _ := ParseTokens(after)
	// A use is recorded when a second has passed since the last one
	// recorded: the last of these, at +9.99 s, is at most a second off.
	if lu := af.List("alice")[0].LastUsed; lu.Before(now.Add(8990 * time.Millisecond).Truncate(time.Second)) {
		t.Errorf("flush wrote last use %v, want about %v: %q -> %q", lu, now.Add(10*time.Second), before, after)
	}
	if c := store.Snapshot().token(hashToken(secret)).ctx; c != ctx {
		t.Errorf("writing the last-used time made the token anew: its requests ended")
	}
	fi1, _ := os.Stat(path)
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(fi1.ModTime()) {
		t.Errorf("a flush with nothing new wrote the file")
	}
	if lt, _ := tk.check(secret, now.Add(2*time.Hour)); lt != nil {
		t.Errorf("expired token accepted")
	}
	if lt, _ := tk.check("kvmd_"+strings.Repeat("0", 64), now); lt != nil {
		t.Errorf("unknown token accepted")
	}
	// Revoked by kvmd token del, from another process (its own store).
	other, err := OpenStore(users, StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Edit(nil, func(e *Edit) error { return e.DeleteToken("alice", "ci") }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Errorf("the revoked token's context is not done")
	}
	if lt, _ := tk.check(secret, now); lt != nil {
		t.Errorf("revoked token accepted")
	}
}

func TestParseTokensKeepsLines(t *testing.T) {
	in := "# tokens\ngarbage\n"
	f, errs := ParseTokens([]byte(in))
	if len(errs) != 1 {
		t.Errorf("errors = %v", errs)
	}
	if _, err := f.Add("bob", "x", RoleAdmin, time.Time{}, time.Unix(1e9, 0)); err != nil {
		t.Fatal(err)
	}
	g, errs := ParseTokens(f.Bytes())
	if len(errs) != 1 || len(g.List("bob")) != 1 || !strings.HasPrefix(string(g.Bytes()), in) {
		t.Errorf("round trip: %q %v", g.Bytes(), errs)
	}
	if l := g.List("bob")[0]; l.Role != "admin" || !l.Expires.IsZero() || l.Created.Unix() != 1e9 {
		t.Errorf("entry = %+v", l)
	}
}
