package auth

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

// TestPasswordDone: the context a password's requests end with
// (Authenticate's Principal.Done) ends with the first change to its
// user's entry or role, and with nothing else; the users neither file
// names (an external backend's) share one, ended when their default role
// changes or one of them is named, and then their sessions end too.
func TestPasswordDone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "htpasswd")
	hashes := map[string]string{"secret": bhash(t, "secret"), "bob-pw": bhash(t, "bob-pw"), "other": bhash(t, "other")}
	users := func(admin, bob string) {
		writeFile(t, path, "admin:"+hashes[admin]+"\nbob:"+hashes[bob]+"\n")
	}
	users("secret", "bob-pw")
	writeFile(t, RolesPath(path), "bob:operator\n")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := OpenStore(path, StoreConfig{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUsers(store)
	if err != nil {
		t.Fatal(err)
	}
	a := New(u, nil, &Sessions{Max: 10}, NewLimiter(), log)
	reload := func() {
		t.Helper()
		if err := store.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	here := netip.MustParseAddr("192.0.2.1")
	bobDone := func() context.Context {
		t.Helper()
		p, err := a.Authenticate(context.Background(), "bob", "bob-pw", MethodBasic, here)
		if err != nil || p.Role != RoleOperator || p.Done.Err() != nil || p.Recheck != nil {
			t.Fatalf("bob: %+v, %v", p, err)
		}
		return p.Done
	}
	if _, err := a.Authenticate(context.Background(), "bob", "wrong", MethodBasic, here); err == nil {
		t.Fatal("a wrong password let in")
	}
	done := bobDone()
	others := store.Snapshot().done("dave") // a user neither file names
	// One session of a user the files do not name (as an external
	// backend's may be).
	if _, _, err := a.Sessions.Start("dave", here, MethodLogin, 0, store.Clock().Now()); err != nil {
		t.Fatal(err)
	}

	users("other", "bob-pw") // the admin's password
	reload()
	writeFile(t, RolesPath(path), "bob:operator\nadmin:admin\n") // the admin named, as it was
	reload()
	if done.Err() != nil {
		t.Fatal("another user's change ended bob's")
	}
	if others.Err() != nil {
		t.Fatal("a named user's change ended the others'")
	}
	writeFile(t, RolesPath(path), "bob:operator\nadmin:admin\ncarol:viewer\n") // one of the others named
	reload()
	if others.Err() == nil {
		t.Error("one of the others named, with another role: their context goes on")
	}
	if a.Sessions.Len() != 0 {
		t.Error("the session of a user without a role line outlived the change of their role")
	}
	if done.Err() != nil {
		t.Fatal("naming another user ended bob's")
	}

	users("secret", "other") // bob's password
	reload()
	if done.Err() == nil {
		t.Error("bob's password changed: his context goes on")
	}
	users("secret", "bob-pw")
	reload()
	done = bobDone()
	writeFile(t, RolesPath(path), "bob:viewer\nadmin:admin\ncarol:viewer\n")
	reload()
	if done.Err() == nil {
		t.Error("bob's role changed: his context goes on")
	}
	writeFile(t, RolesPath(path), "bob:operator\n")
	reload()
	done = bobDone()
	others = store.Snapshot().done("dave")
	// The roles file unreadable: everyone a viewer.
	os.Remove(RolesPath(path))
	if err := os.Mkdir(RolesPath(path), 0o700); err != nil {
		t.Fatal(err)
	}
	reload()
	if done.Err() == nil || others.Err() == nil {
		t.Errorf("the roles file unreadable: bob's ended %v, the others' %v", done.Err() != nil, others.Err() != nil)
	}
	// Gone.
	os.Remove(RolesPath(path))
	reload()
	done = store.Snapshot().done("bob")
	writeFile(t, path, "admin:"+hashes["secret"]+"\n")
	reload()
	if done.Err() == nil {
		t.Error("bob removed: his context goes on")
	}
}
