package auth

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestTOTPFile: the secret file's one writer: Create makes an empty file
// once, Init a secret it refuses to replace without force, Write and
// Clear set and empty it; a new file is TOTPPerm, and Read gives back
// what was written, in canonical form.
func TestTOTPFile(t *testing.T) {
	f := TOTPFile{Path: filepath.Join(t.TempDir(), "totp.secret")}
	if _, err := f.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of a missing file: %v", err)
	}
	if created, err := f.Create(); !created || err != nil {
		t.Fatalf("Create: %v %v", created, err)
	}
	if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != TOTPPerm {
		t.Fatalf("the new file: %v %v, want mode %o", fi.Mode(), err, TOTPPerm)
	}
	secret, err := f.Init("host", false)
	if err != nil || len(secret) != 32 {
		t.Fatalf("Init on an empty file: %q %v", secret, err)
	}
	if created, err := f.Create(); created || err != nil {
		t.Errorf("Create over a secret: %v %v, want it kept", created, err)
	}
	if _, err := f.Init("host", false); !errors.Is(err, ErrTOTPExists) {
		t.Errorf("Init over a secret: %v, want ErrTOTPExists", err)
	}
	if got, err := f.Read(); got != secret || err != nil {
		t.Errorf("Read: %q %v, want %q", got, err, secret)
	}
	again, err := f.Init("host", true)
	if err != nil || again == secret {
		t.Errorf("Init with force: %q %v, want a new secret", again, err)
	}
	if err := f.Write("jbswy3dpehpk3pxp"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Read(); got != "JBSWY3DPEHPK3PXP" || err != nil {
		t.Errorf("Read after Write: %q %v", got, err)
	}
	if err := f.Clear(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(f.Path); err != nil || len(b) != 0 {
		t.Errorf("after Clear: %q %v, want an empty file", b, err)
	}
	key, err := NewTOTPKey("host", nil)
	if err != nil || key.Issuer() != "kvmd" || key.AccountName() != "host" || key.Period() != 30 {
		t.Errorf("NewTOTPKey: %v %v", key, err)
	}
}
