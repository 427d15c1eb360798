package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// API tokens are long-lived secrets for scripts and integrations (Home
// Assistant): sent as "Authorization: Bearer kvmd_...", they pass without
// a 2FA code, which such a client cannot type. Each is named, belongs to a
// user, has a role no higher than the user's, and may expire. Only the
// SHA-256 of a token is stored (TokensPath): the secret itself is shown
// once, when it is made. A token is 32 random bytes, so a plain hash is
// enough; a slow one would cost every request.

// TokenPrefix starts every API token, so that one found in a log or a
// repository is recognisable for what it is.
const TokenPrefix = "kvmd_"

// TokensPerm is the mode of the tokens file.
const TokensPerm = 0o600

var (
	// ErrBadAPIToken is a bearer credential that is not an API token's form.
	ErrBadAPIToken = errors.New("auth: malformed API token")
	// ErrTokenExists is a token name the user already has.
	ErrTokenExists = errors.New("auth: the user already has a token of that name")
	// ErrNoToken is a token name the user does not have.
	ErrNoToken = errors.New("auth: no such token")
	// ErrRoleTooHigh is a token asked for with a role above its user's.
	ErrRoleTooHigh = errors.New("auth: a token's role cannot be above its user's")
)

// TokensPath is where the API tokens of the users in the users file at
// usersPath are kept.
func TokensPath(usersPath string) string { return usersPath + ".tokens" }

// ValidAPIToken checks the form of an API token.
func ValidAPIToken(t string) error {
	rest, ok := strings.CutPrefix(t, TokenPrefix)
	if !ok || ValidToken(rest) != nil {
		return ErrBadAPIToken
	}
	return nil
}

// ValidTokenName checks a token's name: the rules of a user name.
func ValidTokenName(name string) error {
	var ne *NameError
	if err := ValidUser(name); errors.As(err, &ne) {
		return fmt.Errorf("token name: %s", ne.Why)
	} else if err != nil {
		return err
	}
	return nil
}

// TokenInfo is what may be shown of a token: never the secret or its hash.
type TokenInfo struct {
	User    string    `json:"user"`
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"`
	// LastUsed is zero for a token never used. The daemon writes it to
	// the file in batches (Tokens.Flush), not on every request.
	LastUsed time.Time `json:"last_used,omitzero"`
}

// tokenEntry is a line of the tokens file:
// user:name:role:created:expires:lastused:sha256hex, times in Unix
// seconds, 0 for none.
type tokenEntry struct {
	TokenInfo
	hash [32]byte
}

func unixSeconds(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func fromUnix(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("bad time %q", s)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.Unix(n, 0).UTC(), nil
}

func (e *tokenEntry) line() string {
	return strings.Join([]string{e.User, e.Name, e.Role, unixSeconds(e.Created), unixSeconds(e.Expires), unixSeconds(e.LastUsed),
		hex.EncodeToString(e.hash[:])}, ":")
}

func parseTokenLine(line string) (*tokenEntry, error) {
	f := strings.Split(line, ":")
	if len(f) != 7 {
		return nil, fmt.Errorf("want 7 fields, got %d", len(f))
	}
	e := &tokenEntry{TokenInfo: TokenInfo{User: f[0], Name: f[1], Role: f[2]}}
	if err := ValidUser(e.User); err != nil {
		return nil, err
	}
	if err := ValidTokenName(e.Name); err != nil {
		return nil, err
	}
	if _, err := ParseRole(e.Role); err != nil {
		return nil, err
	}
	var err error
	if e.Created, err = fromUnix(f[3]); err != nil {
		return nil, err
	}
	if e.Expires, err = fromUnix(f[4]); err != nil {
		return nil, err
	}
	if e.LastUsed, err = fromUnix(f[5]); err != nil {
		return nil, err
	}
	h, err := hex.DecodeString(f[6])
	if err != nil || len(h) != 32 {
		return nil, errors.New("bad hash")
	}
	copy(e.hash[:], h)
	return e, nil
}

// TokensFile is a parsed tokens file. Lines that do not parse, and
// comments, are kept as they are by an edit.
type TokensFile struct {
	lines   []string
	entries []*tokenEntry // nil where the line is not an entry
}

// ParseTokens parses a tokens file; its errors are the lines that give no
// token.
func ParseTokens(data []byte) (*TokensFile, []error) {
	f := &TokensFile{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		f.lines = append(f.lines, line)
		f.entries = append(f.entries, nil)
		if t := strings.TrimSpace(line); t == "" || t[0] == '#' {
			continue
		}
		e, err := parseTokenLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		f.entries[len(f.entries)-1] = e
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return f, errs
}

// List returns the tokens of user, or everyone's when user is "".
func (f *TokensFile) List(user string) []TokenInfo {
	var out []TokenInfo
	for _, e := range f.entries {
		if e != nil && (user == "" || e.User == user) {
			out = append(out, e.TokenInfo)
		}
	}
	return out
}

func (f *TokensFile) find(user, name string) int {
	return slices.IndexFunc(f.entries, func(e *tokenEntry) bool { return e != nil && e.User == user && e.Name == name })
}

// Add makes a new token and returns its secret, the only time it exists
// outside the caller's hands.
func (f *TokensFile) Add(user, name string, role Role, expires, now time.Time) (string, error) {
	if err := ValidUser(user); err != nil {
		return "", err
	}
	if err := ValidTokenName(name); err != nil {
		return "", err
	}
	if role < RoleViewer || role > RoleAdmin {
		return "", ErrBadRole
	}
	if f.find(user, name) >= 0 {
		return "", ErrTokenExists
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	secret := TokenPrefix + hex.EncodeToString(raw[:])
	e := &tokenEntry{TokenInfo: TokenInfo{User: user, Name: name, Role: role.String(), Created: now.UTC().Truncate(time.Second)},
		hash: sha256.Sum256([]byte(secret))}
	if !expires.IsZero() {
		e.Expires = expires.UTC().Truncate(time.Second)
	}
	f.lines = append(f.lines, e.line())
	f.entries = append(f.entries, e)
	return secret, nil
}

// Delete removes user's token name.
func (f *TokensFile) Delete(user, name string) error {
	i := f.find(user, name)
	if i < 0 {
		return ErrNoToken
	}
	f.lines = slices.Delete(f.lines, i, i+1)
	f.entries = slices.Delete(f.entries, i, i+1)
	return nil
}

// DeleteUser removes every token of user and returns how many.
func (f *TokensFile) DeleteUser(user string) int {
	n := 0
	for i := len(f.entries) - 1; i >= 0; i-- {
		if e := f.entries[i]; e != nil && e.User == user {
			f.lines = slices.Delete(f.lines, i, i+1)
			f.entries = slices.Delete(f.entries, i, i+1)
			n++
		}
	}
	return n
}

// Bytes returns the file's text.
func (f *TokensFile) Bytes() []byte {
	var b bytes.Buffer
	for i, l := range f.lines {
		if e := f.entries[i]; e != nil {
			l = e.line()
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Tokens is the daemon's API tokens: checked against the Store's
// Snapshot on every request (a hash and a map lookup, no file), made and
// revoked through the Store, and their last-used times, kept in memory,
// written to the tokens file every FlushEvery.
type Tokens struct {
	store *Store
	log   *slog.Logger
	// Local tells whether user's password is the users file's (nil:
	// everyone's is); a user of an external backend may have tokens
	// without being in the file.
	Local func(user string) bool
	dirty atomic.Bool
}

// Actor is who asked for a change, for the log.
type Actor struct {
	User   string
	Method Method
	Addr   netip.Addr
}

// NewTokens returns the API tokens of store.
func NewTokens(store *Store, log *slog.Logger) *Tokens {
	return &Tokens{store: store, log: log}
}

// check returns the live token of secret, marked used at now, and the
// context its requests end with; nil when there is none or it expired.
func (t *Tokens) check(secret string, now time.Time) (*liveToken, context.Context) {
	lt := t.store.Snapshot().token(hashToken(secret))
	if lt == nil || (!lt.info.Expires.IsZero() && !now.Before(lt.info.Expires)) {
		return nil, nil
	}
	// Seconds are all the file keeps: a store per second at most, and
	// the batch flag set only then.
	n := now.UnixNano()
	if prev := lt.used.Load(); n-prev >= int64(time.Second) && lt.used.CompareAndSwap(prev, n) {
		t.dirty.Store(true)
	}
	return lt, lt.ctx
}

// List returns the tokens of user (everyone's for ""), with their
// last-used times as the daemon knows them.
func (t *Tokens) List(user string) []TokenInfo {
	return t.store.Snapshot().Tokens(user)
}

// Add makes a token (Edit.AddToken) and writes it to the file; by is who
// asked. A user checked by an external backend (Local) need not be in the
// users file; its role is the caller's to check.
func (t *Tokens) Add(user, name string, role Role, expires, now time.Time, by Actor) (string, error) {
	var secret string
	err := t.store.Edit(&by, func(e *Edit) error {
		e.Now = now
		var err error
		secret, err = e.AddToken(TokenRequest{User: user, Name: name, Role: role, Expires: expires,
			External: t.Local != nil && !t.Local(user)})
		return err
	})
	if err == nil {
		t.log.Info("token created", "user", user, "token", name, "role", role.String(), "by", by.User,
			"method", string(by.Method), "addr", addrString(by.Addr))
	}
	return secret, err
}

// Delete revokes user's token name: from the file, and its open requests
// end, before it returns.
func (t *Tokens) Delete(user, name string, by Actor) error {
	return t.store.Edit(&by, func(e *Edit) error { return e.DeleteToken(user, name) })
}

var errNothing = errors.New("nothing to do")

// Flush writes the last-used times that changed since the last Flush. It
// is the only write a token's use causes, so a busy script costs the SD
// card one small write per FlushEvery, not one per request.
func (t *Tokens) Flush() error {
	if !t.dirty.Swap(false) {
		return nil
	}
	snap := t.store.Snapshot()
	err := t.store.Edit(nil, func(e *Edit) error {
		changed := false
		for _, te := range e.Tokens.entries {
			if te == nil {
				continue
			}
			lt := snap.tokens[te.hash]
			if lt == nil {
				continue
			}
			if n := lt.used.Load(); n != 0 {
				lu := time.Unix(0, n).UTC().Truncate(time.Second)
				if lu.After(te.LastUsed) {
					te.LastUsed, changed = lu, true
				}
			}
		}
		if !changed {
			return errNothing
		}
		return nil
	})
	if errors.Is(err, errNothing) {
		return nil
	}
	if err != nil {
		t.dirty.Store(true) // try again next time
		return fmt.Errorf("auth: writing token last-used times: %w", err)
	}
	return nil
}

// FlushEvery is how often Run writes the last-used times.
const FlushEvery = time.Minute

// Run flushes the last-used times every FlushEvery until ctx ends, and
// once more then.
func (t *Tokens) Run(ctx context.Context) {
	tick := time.NewTicker(FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := t.Flush(); err != nil {
				t.log.Warn("tokens", "err", err)
			}
			return
		case <-tick.C:
			if err := t.Flush(); err != nil {
				t.log.Warn("tokens", "err", err)
			}
		}
	}
}
