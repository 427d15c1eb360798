package auth

import (
	"log/slog"
	"sync"
	"time"

	"github.com/pquerna/otp/totp"
)

// Enroll turns 2FA on from the web UI: Begin makes a secret that is only
// held in memory; Confirm writes it to the secret file (TOTPFile) only
// after a code from it checked, so that an app that scanned it wrong
// never locks everyone out. The secret file is the daemon's one secret,
// as in kvmd: it is everyone's 2FA.
type Enroll struct {
	Path    string // the 2FA secret file
	Account string // the label authenticator apps show (the host name)
	Log     *slog.Logger
	// TOTP, when set, is the daemon's reader of Path: it re-reads the
	// file at once after a change, so the next request already sees it.
	TOTP *TOTP

	mu      sync.Mutex
	pending map[string]pendingSecret // by user who began
}

type pendingSecret struct {
	secret  string
	expires time.Time
}

// enrollFor is how long a begun enrollment waits for its code.
const enrollFor = 10 * time.Minute

// Begin makes a new secret for user to scan and returns it and its
// otpauth:// URI. Nothing is written yet.
func (e *Enroll) Begin(user string, now time.Time) (secret, uri string, err error) {
	key, err := NewTOTPKey(e.Account, nil)
	if err != nil {
		return "", "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == nil {
		e.pending = map[string]pendingSecret{}
	}
	for u, p := range e.pending {
		if now.After(p.expires) {
			delete(e.pending, u)
		}
	}
	e.pending[user] = pendingSecret{secret: key.Secret(), expires: now.Add(enrollFor)}
	return key.Secret(), key.URL(), nil
}

// Confirm writes user's begun secret to the secret file when code is its
// code now; ErrForbidden otherwise (nothing begun, expired, wrong code).
func (e *Enroll) Confirm(user, code string, now time.Time, by Actor) error {
	e.mu.Lock()
	p, ok := e.pending[user]
	if ok && now.After(p.expires) {
		delete(e.pending, user)
		ok = false
	}
	e.mu.Unlock()
	if !ok {
		return ErrForbidden
	}
	if valid, _ := totp.ValidateCustom(code, p.secret, now, totpOpts); !valid {
		return ErrForbidden
	}
	if err := (TOTPFile{e.Path}).Write(p.secret); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.pending, user)
	e.mu.Unlock()
	e.reread()
	e.Log.Info("2FA changed", "state", "on", "user", by.User, "method", string(by.Method), "addr", addrString(by.Addr))
	return nil
}

// Disable empties the secret file: 2FA off (the file stays: a missing one
// refuses every login, as the daemon fails closed).
func (e *Enroll) Disable(by Actor) error {
	if err := (TOTPFile{e.Path}).Clear(); err != nil {
		return err
	}
	e.reread()
	e.Log.Info("2FA changed", "state", "off", "user", by.User, "method", string(by.Method), "addr", addrString(by.Addr))
	return nil
}

func (e *Enroll) reread() {
	if e.TOTP != nil {
		e.TOTP.refresh(true)
	}
}
