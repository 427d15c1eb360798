package auth

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"kvmd/internal/atomicfile"
)

// TOTPPerm is the mode of a new 2FA secret file: the device's one secret.
const TOTPPerm = 0o600

// TOTPFile is the 2FA secret file at Path, and its one writer, whoever
// writes it: kvmd totp (init, del), kvmd firstboot (an empty one, 2FA
// off) and the web UI's enrollment (Enroll). Every write is atomic and
// locked (atomicfile), a new file made with TOTPPerm; the daemon reads it
// through TOTP, which re-reads it when it changes.
type TOTPFile struct {
	Path string
}

// ErrTOTPExists is Init's refusal to replace a secret without force.
var ErrTOTPExists = errors.New("auth: the file already holds a 2FA secret")

// Read returns the secret, checked and in canonical form (ParseSecret):
// "" when the file is empty (2FA off). A missing file is an error
// wrapping fs.ErrNotExist.
func (f TOTPFile) Read() (string, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return "", fmt.Errorf("auth: reading 2FA secret: %w", err)
	}
	return ParseSecret(data)
}

// Create makes an empty file (2FA off) unless one exists; created says
// whether it did. The file must exist: the daemon refuses every login
// when the secret file it is configured with is missing.
func (f TOTPFile) Create() (created bool, err error) {
	err = f.update(func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, errKeep
		}
		return []byte{}, nil
	})
	if errors.Is(err, errKeep) {
		return false, nil
	}
	return err == nil, err
}

// errKeep ends an update that leaves the file as it is.
var errKeep = errors.New("auth: 2FA secret file kept")

// Init writes a new random secret and returns it; a file that already
// holds one is left alone (ErrTOTPExists) unless force is set: replacing
// it locks out every authenticator app enrolled with the old one.
func (f TOTPFile) Init(account string, force bool) (string, error) {
	key, err := NewTOTPKey(account, nil)
	if err != nil {
		return "", err
	}
	secret := key.Secret()
	err = f.update(func(old []byte) ([]byte, error) {
		if len(bytes.TrimSpace(old)) != 0 && !force {
			return nil, ErrTOTPExists
		}
		return []byte(secret + "\n"), nil
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// Write makes secret the file's (2FA on).
func (f TOTPFile) Write(secret string) error {
	return f.update(func([]byte) ([]byte, error) { return []byte(secret + "\n"), nil })
}

// Clear empties the file (2FA off); it never removes it (see Create).
func (f TOTPFile) Clear() error {
	return f.update(func([]byte) ([]byte, error) { return []byte{}, nil })
}

func (f TOTPFile) update(change func(old []byte) ([]byte, error)) error {
	if err := atomicfile.Update(f.Path, TOTPPerm, change); err != nil {
		return fmt.Errorf("auth: writing 2FA secret %s: %w", f.Path, err)
	}
	return nil
}

// NewTOTPKey makes the TOTP key every authenticator app takes by default
// (SHA1, 6 digits, 30 s), issued by kvmd for account, with secret (nil: a
// new random one of 160 bits).
func NewTOTPKey(account string, secret []byte) (*otp.Key, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "kvmd", AccountName: account, Period: 30,
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Secret: secret})
	if err != nil {
		return nil, fmt.Errorf("auth: generating 2FA secret: %w", err)
	}
	return key, nil
}

// TOTPAccount is the label authenticator apps show for this device's 2FA:
// the host name, so that several KVMs can be told apart.
func TOTPAccount() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "kvmd"
}
