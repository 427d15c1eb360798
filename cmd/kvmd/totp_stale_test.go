package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTOTPInitRemovesStaleTemp: a "kvmd totp init" killed before its
// rename leaves a temporary file holding the new secret; the next run
// removes it, whether it writes a secret or refuses to replace one.
func TestTOTPInitRemovesStaleTemp(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "totp.secret")
	stale := filepath.Join(dir, ".totp.secret.tmp3141592")
	if err := os.WriteFile(stale, []byte("JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runKvmd(t, "", "totp", "init", "--secret", secret); err != nil {
		t.Fatalf("totp init: %v\n%s", err, stderr)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file survived totp init (%v)", err)
	}
	os.WriteFile(stale, []byte("x"), 0o640)
	if _, _, err := runKvmd(t, "", "totp", "init", "--secret", secret); err == nil {
		t.Fatal("totp init replaced a secret without -f")
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file survived a refused totp init (%v)", err)
	}
}
