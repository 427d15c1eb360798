package auth

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRoles(t *testing.T) {
	in := "# roles\nalice:viewer\n bob : operator \nbad line\ncarol:root\nROOT:admin\n\ndave:admin\n"
	f, errs := ParseRoles([]byte(in))
	if len(errs) != 3 {
		t.Errorf("errors = %v, want 3 (no colon, bad role, bad name)", errs)
	}
	want := map[string]Role{"alice": RoleViewer, "bob": RoleOperator, "dave": RoleAdmin}
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

// TestUsersRoles: no roles file, every user an admin; a role file's change
// is seen and reported; an unreadable one makes everyone a viewer.
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
	if u.Role("alice") != RoleAdmin || u.Role("bob") != RoleAdmin {
		t.Errorf("without a roles file: %v %v, want admins", u.Role("alice"), u.Role("bob"))
	}
	var changes []string
	u.OnRoleChange = func(user string, old, new Role) { changes = append(changes, user+":"+old.String()+">"+new.String()) }
	rp := RolesPath(path)
	if err := os.WriteFile(rp, []byte("bob:viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u.Refresh(true)
	if u.Role("bob") != RoleViewer || u.Role("alice") != RoleAdmin {
		t.Errorf("roles: bob %v alice %v", u.Role("bob"), u.Role("alice"))
	}
	if strings.Join(changes, ",") != "bob:admin>viewer" {
		t.Errorf("changes = %v", changes)
	}
	// A roles file that cannot be read (a directory in its place, which
	// fails for root too): everyone is a viewer, and told so.
	changes = nil
	if err := os.Remove(rp); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rp, 0o700); err != nil {
		t.Fatal(err)
	}
	u.Refresh(true)
	if u.Role("alice") != RoleViewer || u.Role("ghost") != RoleViewer {
		t.Errorf("unreadable roles file: alice %v, ghost %v, want viewers (fail closed)", u.Role("alice"), u.Role("ghost"))
	}
	if strings.Join(changes, ",") != "alice:admin>viewer" {
		t.Errorf("changes = %v, want alice demoted", changes)
	}
	os.Remove(rp)
	u.Refresh(true)
	if u.Role("alice") != RoleAdmin {
		t.Errorf("roles file gone again: alice %v, want admin", u.Role("alice"))
	}
}

// TestTokensBatch: uses cost no disk write; Flush writes the last-used
// times once; a revocation from the file ends the token's requests.
func TestTokensBatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "htpasswd.tokens")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tk := OpenTokens(path, log)
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
	// Revoked by kvmd token del, from another process.
	if err := UpdateTokens(path, func(f *TokensFile) error { return f.Delete("alice", "ci") }); err != nil {
		t.Fatal(err)
	}
	tk.Refresh(true)
	select {
	case <-ctx.Done():
	default:
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
