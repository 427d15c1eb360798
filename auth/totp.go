package auth

import (
	"encoding/base32"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

// CodeLen is the number of characters at the end of a password that are the
// 2FA code when 2FA is on.
const CodeLen = 6

// totpOpts are the parameters every authenticator app uses by default, with
// one 30 s step of clock drift allowed either way.
var totpOpts = totp.ValidateOpts{Period: 30, Skew: 1, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// TOTP holds the 2FA secret from its file, re-read when the file changes. An
// empty file means 2FA is off. A file that is configured but cannot be read
// or does not hold a base32 secret fails closed: every check fails, and the
// log says why once per change.
type TOTP struct {
	path  string
	log   *slog.Logger
	watch fileWatch

	mu     sync.RWMutex
	secret string
	err    error
}

// NewTOTP watches the secret file at path.
func NewTOTP(path string, log *slog.Logger) *TOTP {
	t := &TOTP{path: path, log: log, watch: fileWatch{path: path}}
	t.refresh(true)
	return t
}

// ParseSecret checks a secret file's contents and returns the secret in
// canonical form: upper case, no padding, "" for an empty file.
func ParseSecret(data []byte) (string, error) {
	s := strings.ToUpper(strings.TrimSpace(string(data)))
	s = strings.TrimRight(s, "=")
	if s == "" {
		return "", nil
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return "", errors.New("auth: 2FA secret file holds more than one word, not one base32 secret")
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(s)
	if err != nil || len(raw) < 10 {
		return "", errors.New("auth: 2FA secret is not a base32 secret of at least 80 bits")
	}
	return s, nil
}

func (t *TOTP) refresh(force bool) {
	if !t.watch.changed(force) {
		return
	}
	secret, err := TOTPFile{t.path}.Read()
	t.mu.Lock()
	t.secret, t.err = secret, err
	t.mu.Unlock()
	switch {
	case err != nil:
		t.log.Error("2FA secret unusable, every password check fails", "path", t.path, "err", err)
	case secret == "":
		t.log.Info("2FA is off (secret file empty)", "path", t.path)
	default:
		t.log.Info("2FA is on", "path", t.path)
	}
}

// State reports whether 2FA is on, or why the secret cannot be used.
func (t *TOTP) State() (on bool, err error) {
	t.refresh(false)
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.secret != "", t.err
}

// Check reports whether code is valid at now, for the current, previous or
// next 30 s step. It is false when 2FA is off or broken.
func (t *TOTP) Check(code string, now time.Time) bool {
	t.mu.RLock()
	secret, err := t.secret, t.err
	t.mu.RUnlock()
	if secret == "" || err != nil {
		return false
	}
	ok, verr := totp.ValidateCustom(code, secret, now.UTC(), totpOpts)
	return ok && verr == nil
}
