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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/internal/atomicfile"
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
	if err := ValidUser(name); err != nil {
		return fmt.Errorf("token name: %s", strings.TrimPrefix(err.Error(), "user name "))
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

func unix(t time.Time) string {
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
	return strings.Join([]string{e.User, e.Name, e.Role, unix(e.Created), unix(e.Expires), unix(e.LastUsed),
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

// UpdateTokens edits the tokens file at path under atomicfile's lock; a
// missing file starts empty, an error from edit leaves it as it was.
func UpdateTokens(path string, edit func(*TokensFile) error) error {
	return atomicfile.Update(path, TokensPerm, func(old []byte) ([]byte, error) {
		f, _ := ParseTokens(old)
		if err := edit(f); err != nil {
			return nil, err
		}
		return f.Bytes(), nil
	})
}

// Tokens is the daemon's view of the tokens file: re-read when it changes
// (kvmd token add|del from a shell), written when a token is made or
// revoked through the API and, every FlushEvery, with the last-used times
// that changed.
type Tokens struct {
	path  string
	log   *slog.Logger
	watch fileWatch

	mu     sync.RWMutex
	byHash map[[32]byte]*liveToken
	dirty  atomic.Bool
	// logged are revocations already logged by Revoke, with who did
	// it: Refresh does not log them again.
	logged map[string]bool
}

// Actor is who asked for a change, for the log.
type Actor struct {
	User   string
	Method Method
	Addr   netip.Addr
}

// liveToken is a token as the daemon holds it.
type liveToken struct {
	info     TokenInfo
	role     Role
	used     atomic.Int64 // unix nanos of the last use; 0: never
	announce atomic.Int64 // unix nanos of the last "token used" log line
	// ctx ends when the token is revoked, or its user's streams are
	// ended (EndUser): the requests it let in end with it.
	ctx    context.Context
	cancel context.CancelFunc
}

// OpenTokens reads the tokens file at path; a missing one is no tokens.
func OpenTokens(path string, log *slog.Logger) *Tokens {
	t := &Tokens{path: path, log: log, watch: fileWatch{path: path}}
	t.Refresh(true)
	return t
}

// Refresh re-reads the file if it changed (looking at most every
// watchInterval without force). Tokens gone from it are revoked: their
// open requests end.
func (t *Tokens) Refresh(force bool) {
	if !t.watch.changed(force) {
		return
	}
	data, err := os.ReadFile(t.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		// Fail closed: a token revoked must not pass because the file
		// cannot be read.
		t.log.Error("tokens file unreadable: every API token is refused until it is", "path", t.path, "err", err)
	}
	f, errs := ParseTokens(data)
	for _, e := range errs {
		t.log.Warn("tokens file", "path", t.path, "err", e)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byHash
	t.byHash = make(map[[32]byte]*liveToken, len(f.entries))
	for _, e := range f.entries {
		if e == nil {
			continue
		}
		role, _ := ParseRole(e.Role)
		if lt := old[e.hash]; lt != nil && lt.info.User == e.User && lt.info.Name == e.Name && lt.role == role {
			lt.info.Expires = e.Expires
			if n := e.LastUsed.UnixNano(); !e.LastUsed.IsZero() && n > lt.used.Load() {
				lt.used.Store(n)
			}
			t.byHash[e.hash] = lt
			continue
		}
		lt := &liveToken{info: e.TokenInfo, role: role}
		if !e.LastUsed.IsZero() {
			lt.used.Store(e.LastUsed.UnixNano())
		}
		lt.ctx, lt.cancel = context.WithCancel(context.Background())
		t.byHash[e.hash] = lt
	}
	for h, lt := range old {
		if t.byHash[h] != lt {
			lt.cancel()
			if k := lt.info.User + ":" + lt.info.Name; t.logged[k] {
				delete(t.logged, k)
			} else {
				t.log.Info("token revoked", "user", lt.info.User, "token", lt.info.Name, "by", "-", "method", "file", "addr", "local")
			}
		}
	}
}

// check returns the live token of secret, marked used at now, and the
// context its requests end with; nil when there is none or it expired.
func (t *Tokens) check(secret string, now time.Time) (*liveToken, context.Context) {
	t.Refresh(false)
	h := sha256.Sum256([]byte(secret))
	t.mu.RLock()
	lt := t.byHash[h]
	var ctx context.Context
	if lt != nil {
		ctx = lt.ctx
	}
	t.mu.RUnlock()
	if lt == nil || (!lt.info.Expires.IsZero() && !now.Before(lt.info.Expires)) {
		return nil, nil
	}
	// Seconds are all the file keeps: a store per second at most, and
	// the batch flag set only then.
	n := now.UnixNano()
	if prev := lt.used.Load(); n-prev >= int64(time.Second) && lt.used.CompareAndSwap(prev, n) {
		t.dirty.Store(true)
	}
	return lt, ctx
}

// EndUser ends the open requests that user's tokens let in, and returns
// how many tokens the user has. The tokens stay valid (a role change, not
// a revocation): the next request is checked afresh.
func (t *Tokens) EndUser(user string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, lt := range t.byHash {
		if lt.info.User == user {
			lt.cancel()
			lt.ctx, lt.cancel = context.WithCancel(context.Background())
			n++
		}
	}
	return n
}

// List returns the tokens of user (everyone's for ""), with their
// last-used times as the daemon knows them.
func (t *Tokens) List(user string) []TokenInfo {
	t.Refresh(false)
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []TokenInfo
	for _, lt := range t.byHash {
		if user == "" || lt.info.User == user {
			ti := lt.info
			if n := lt.used.Load(); n != 0 {
				ti.LastUsed = time.Unix(0, n).UTC().Truncate(time.Second)
			}
			out = append(out, ti)
		}
	}
	slices.SortFunc(out, func(a, b TokenInfo) int {
		return cmpStrings(a.User+":"+a.Name, b.User+":"+b.Name)
	})
	return out
}

func cmpStrings(a, b string) int { return strings.Compare(a, b) }

// Add makes a token (TokensFile.Add) and writes it to the file.
func (t *Tokens) Add(user, name string, role Role, expires, now time.Time, by Actor) (string, error) {
	var secret string
	err := UpdateTokens(t.path, func(f *TokensFile) error {
		var err error
		secret, err = f.Add(user, name, role, expires, now)
		return err
	})
	t.Refresh(true)
	if err == nil {
		t.log.Info("token created", "user", user, "token", name, "role", role.String(), "by", by.User,
			"method", string(by.Method), "addr", addrString(by.Addr))
	}
	return secret, err
}

// Delete revokes user's token name: from the file, and its open requests
// end, before it returns.
func (t *Tokens) Delete(user, name string, by Actor) error {
	t.mu.Lock()
	if t.logged == nil {
		t.logged = map[string]bool{}
	}
	t.logged[user+":"+name] = true
	t.mu.Unlock()
	err := UpdateTokens(t.path, func(f *TokensFile) error { return f.Delete(user, name) })
	t.Refresh(true)
	t.mu.Lock()
	delete(t.logged, user+":"+name)
	t.mu.Unlock()
	if err == nil {
		t.log.Info("token revoked", "user", user, "token", name, "by", by.User,
			"method", string(by.Method), "addr", addrString(by.Addr))
	}
	return err
}

// DeleteUser revokes every token of user.
func (t *Tokens) DeleteUser(user string) error {
	err := UpdateTokens(t.path, func(f *TokensFile) error {
		if f.DeleteUser(user) == 0 {
			return errNothing
		}
		return nil
	})
	if errors.Is(err, errNothing) {
		return nil
	}
	t.Refresh(true)
	return err
}

var errNothing = errors.New("nothing to do")

// Flush writes the last-used times that changed since the last Flush. It
// is the only write a token's use causes, so a busy script costs the SD
// card one small write per FlushEvery, not one per request.
func (t *Tokens) Flush() error {
	if !t.dirty.Swap(false) {
		return nil
	}
	t.mu.RLock()
	used := make(map[[32]byte]int64, len(t.byHash))
	for h, lt := range t.byHash {
		used[h] = lt.used.Load()
	}
	t.mu.RUnlock()
	err := UpdateTokens(t.path, func(f *TokensFile) error {
		changed := false
		for _, e := range f.entries {
			if e == nil {
				continue
			}
			if n := used[e.hash]; n != 0 {
				lu := time.Unix(0, n).UTC().Truncate(time.Second)
				if lu.After(e.LastUsed) {
					e.LastUsed, changed = lu, true
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
	t.Refresh(true)
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
