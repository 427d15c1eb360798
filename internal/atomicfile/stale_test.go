package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUpdateRemovesStaleTemp: a writer killed between creating its
// temporary file and renaming it leaves the file behind, holding the new
// content (a 2FA secret, a password hash). The next Update of the same
// file removes it; other files' temporaries are not its to touch.
func TestUpdateRemovesStaleTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "totp.secret")
	stale := []string{filepath.Join(dir, ".totp.secret.tmp123456"), filepath.Join(dir, ".totp.secret.tmp9")}
	other := filepath.Join(dir, ".htpasswd.tmp42")
	for _, p := range append(stale, other) {
		if err := os.WriteFile(p, []byte("JBSWY3DPEHPK3PXP\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Update(path, 0o600, func([]byte) ([]byte, error) { return []byte("new\n"), nil }); err != nil {
		t.Fatal(err)
	}
	for _, p := range stale {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there after the next update (%v)", filepath.Base(p), err)
		}
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("another file's temporary was removed: %v", err)
	}
	// A refused update (fn's error) removes them too: the next run of
	// "kvmd totp init" that finds a secret and stops still cleans up.
	os.WriteFile(stale[0], []byte("x"), 0o600)
	if err := Update(path, 0o600, func([]byte) ([]byte, error) { return nil, os.ErrExist }); err != os.ErrExist {
		t.Fatalf("Update: %v", err)
	}
	if _, err := os.Lstat(stale[0]); !os.IsNotExist(err) {
		t.Errorf("stale temporary kept by a refused update (%v)", err)
	}
}
