package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/auth"
)

func tokenRun(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = tokenCmd(args, &o, &e)
	return o.String(), e.String(), err
}

// TestUserRoles: --role on add and set, set --role without a password
// prompt, a file of before roles (no roles file) all admins, del forgets
// the role and the tokens.
func TestUserRoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	if _, _, err := userRun("pw1\n", "add", "alice", "--users", path); err != nil {
		t.Fatal(err)
	}
	if r := roleOf(t, path, "alice"); r != auth.RoleAdmin {
		t.Fatalf("role without a roles file: %v, want admin", r)
	}
	if _, _, err := userRun("pw2\n", "add", "bob", "--role", "viewer", "--users", path); err != nil {
		t.Fatal(err)
	}
	checkPasswd(t, path, "bob", "pw2")
	// No password on stdin: set --role of an existing user asks for none.
	if _, _, err := userRun("", "set", "alice", "--role", "operator", "--users", path); err != nil {
		t.Fatal(err)
	}
	checkPasswd(t, path, "alice", "pw1")
	roles, _ := os.ReadFile(auth.RolesPath(path))
	if got, want := string(roles), "bob:viewer\nalice:operator\n"; got != want {
		t.Errorf("roles file = %q, want %q", got, want)
	}
	checkMode(t, auth.RolesPath(path), 0o600)
	if _, _, err := userRun("", "set", "alice", "--role", "root", "--users", path); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("bad role: %v", err)
	}
	if _, _, err := userRun("", "del", "alice", "--role", "admin", "--users", path); err == nil {
		t.Errorf("del --role accepted")
	}
	if _, _, err := tokenRun("add", "ci", "--user", "bob", "--users", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := userRun("", "del", "bob", "--users", path); err != nil {
		t.Fatal(err)
	}
	roles, _ = os.ReadFile(auth.RolesPath(path))
	if string(roles) != "alice:operator\n" {
		t.Errorf("roles file after del = %q", roles)
	}
	if out, _, _ := tokenRun("list", "--users", path); out != "" {
		t.Errorf("tokens of a deleted user kept: %q", out)
	}
}

// roleOf reads user's role as the daemon would.
func roleOf(t *testing.T, path, user string) auth.Role {
	t.Helper()
	s, err := auth.OpenStore(path, auth.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Snapshot().Role(user)
}

// TestTokenCmd: add prints the token once and stores its hash only; the
// role is capped at the user's; list shows no secret; del revokes.
func TestTokenCmd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	if _, _, err := userRun("pw\n", "add", "op", "--role", "operator", "--users", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokenRun("add", "ha", "--user", "op", "--role", "admin", "--users", path); err == nil || !strings.Contains(err.Error(), "above") {
		t.Errorf("admin token for an operator: %v", err)
	}
	if _, _, err := tokenRun("add", "ha", "--user", "ghost", "--users", path); err == nil {
		t.Errorf("token for a user not in the file made")
	}
	out, _, err := tokenRun("add", "ha", "--user", "op", "--role", "viewer", "--expires", "24h", "--users", path)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(out)
	if auth.ValidAPIToken(secret) != nil {
		t.Fatalf("printed %q, not a token", out)
	}
	data, _ := os.ReadFile(auth.TokensPath(path))
	if bytes.Contains(data, []byte(secret[len(auth.TokenPrefix):])) {
		t.Errorf("tokens file holds the secret: %q", data)
	}
	checkMode(t, auth.TokensPath(path), 0o600)
	if _, _, err := tokenRun("add", "ha", "--user", "op", "--users", path); err == nil {
		t.Errorf("second token of the same name made")
	}
	out, _, err = tokenRun("list", "--users", path)
	if err != nil || !strings.HasPrefix(out, "op\tha\tviewer\tcreated ") || strings.Contains(out, "expires -") {
		t.Errorf("list = %q, %v", out, err)
	}
	if _, _, err := tokenRun("del", "ha", "--user", "op", "--users", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokenRun("del", "ha", "--user", "op", "--users", path); err == nil {
		t.Errorf("second del of the same token succeeded")
	}
	if out, _, _ := tokenRun("list", "--users", path); out != "" {
		t.Errorf("list after del = %q", out)
	}
}

// TestUserSetRevokeTokens: set --revoke-tokens changes the password and
// revokes every API token of the user, and only of that user; without it
// the tokens stay. It always asks for the password, --role or not, and
// goes with set only.
func TestUserSetRevokeTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	for _, u := range []string{"alice", "bob"} {
		if _, _, err := userRun("pw\n", "add", u, "--users", path); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"ha", "ci"} {
			if _, _, err := tokenRun("add", n, "--user", u, "--users", path); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(user string) int {
		t.Helper()
		store, err := auth.OpenStore(path, auth.StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		return len(store.Snapshot().Tokens(user))
	}
	if _, _, err := userRun("pw2\n", "set", "alice", "--users", path); err != nil || count("alice") != 2 {
		t.Fatalf("set without --revoke-tokens: %v, %d tokens left", err, count("alice"))
	}
	if _, _, err := userRun("", "add", "carol", "--revoke-tokens", "--users", path); err == nil || !strings.Contains(err.Error(), "--revoke-tokens") {
		t.Errorf("add --revoke-tokens: %v", err)
	}
	// No password on stdin: with --revoke-tokens, --role does not skip it.
	if _, _, err := userRun("", "set", "alice", "--role", "viewer", "--revoke-tokens", "--users", path); err == nil || count("alice") != 2 {
		t.Errorf("set --role --revoke-tokens without a password: %v, %d tokens left", err, count("alice"))
	}
	_, stderr, err := userRun("pw3\n", "set", "alice", "--revoke-tokens", "--users", path)
	if err != nil {
		t.Fatal(err)
	}
	checkPasswd(t, path, "alice", "pw3")
	if count("alice") != 0 || count("bob") != 2 {
		t.Errorf("after set alice --revoke-tokens: alice %d, bob %d tokens", count("alice"), count("bob"))
	}
	if !strings.Contains(stderr, "2 API tokens of alice revoked") {
		t.Errorf("stderr = %q", stderr)
	}
	if _, stderr, err := userRun("pw4\n", "set", "alice", "--revoke-tokens", "--users", path); err != nil || !strings.Contains(stderr, "0 API tokens") {
		t.Errorf("again, with no tokens: %v %q", err, stderr)
	}
}
