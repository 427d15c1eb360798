package auth

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func bhash(t testing.TB, p string) string {
	h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestUsersVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	writeFile(t, path, "admin:"+bhash(t, "secret")+"\nplain:secret\n")
	u, err := OpenUsers(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Store().Close() })
	ch := watchChanges(u.Store())
	ctx := context.Background()
	tests := []struct {
		user, passwd string
		ok, cached   bool
	}{
		{"admin", "secret", true, false},
		{"admin", "secret", true, true},
		{"admin", "Secret", false, false},
		{"plain", "secret", false, false}, // a plaintext "hash" never matches
		{"ghost", "secret", false, false},
	}
	for _, tt := range tests {
		ok, cached, err := u.Verify(ctx, tt.user, tt.passwd)
		if err != nil || ok != tt.ok || cached != tt.cached {
			t.Errorf("Verify(%s, %s) = %v %v %v, want %v %v", tt.user, tt.passwd, ok, cached, err, tt.ok, tt.cached)
		}
	}

	// A change drops the cache and reports the users whose entry changed.
	writeFile(t, path, "admin:"+bhash(t, "other")+"\nplain:secret\n")
	if got := ch.wait(t); got != "admin:ended" {
		t.Errorf("changes: %q, want admin's entry", got)
	}
	if ok, _, _ := u.Verify(ctx, "admin", "secret"); ok {
		t.Error("old password still accepted after the change")
	}
	if ok, cached, _ := u.Verify(ctx, "admin", "other"); !ok || cached {
		t.Errorf("new password: ok %v cached %v, want true false", ok, cached)
	}

	// A context that ends while waiting for a slow-hash turn gives up.
	for u.slow.free > 0 {
		if _, err := u.slow.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := u.Verify(cctx, "admin", "nope"); err == nil {
		t.Error("Verify waited past its context")
	}
}

func TestOpenUsersMissing(t *testing.T) {
	if _, err := OpenUsers(filepath.Join(t.TempDir(), "nope"), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a missing users file at start is not an error")
	}
}
