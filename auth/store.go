package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/internal/atomicfile"
)

// UsersPerm is the mode of a new users file: hashes stay away from other
// local users. The files kept beside it take its mode and owner (see
// atomicfile.WriteLike); an existing file keeps its own.
const UsersPerm = 0o600

// PendingPath is where a change that spans the users file and the files
// beside it is written before any of them (pending.go).
func PendingPath(usersPath string) string { return usersPath + ".pending" }

// StoreConfig is how OpenStore opens a Store.
type StoreConfig struct {
	// Log gets what the store has to say: files re-read, lines that do
	// not parse, roles changed, tokens revoked. nil: nothing.
	Log *slog.Logger
	// Warn, when set, gets each line of the files that does not parse
	// instead of Log (the commands print them).
	Warn func(path string, err error)
	// Clock is the time the store's deadlines (token expiries) run on;
	// nil: the real one.
	Clock clockwork.Clock
	// Watch makes the store follow the files, as the daemon does:
	// inotify on their directory, or a poll every PollEvery where that is
	// missing. The commands, which read once and write, leave it off.
	Watch bool
	// Poll makes the store poll even where inotify works (a network
	// file system that does not report another machine's changes).
	Poll bool
	// PollEvery is the poll's interval; 0: 100 ms.
	PollEvery time.Duration
}

// Store is the one reader and writer of the users file (htpasswd) and the
// two files kept beside it, FILE.roles and FILE.tokens: the daemon, kvmd
// user, kvmd token and kvmd firstboot all go through it. It publishes what
// the files hold as an immutable Snapshot, which the request path reads
// without touching a file; with Watch it follows the files as they change
// (from the commands, or an editor) and publishes each new state, and
// calls OnChange's functions with what changed, so that sessions, tokens
// and the requests they let in end at once.
//
// A change is made under one lock of the files' directory, and one that
// spans files is first written whole to FILE.pending and then applied, so
// that no crash leaves half of it: see pending.go, and docs/credentials.md
// for the argument.
type Store struct {
	users, roles, tokens, pending string
	cfg                           StoreConfig
	clock                         clockwork.Clock
	log                           *slog.Logger

	snap atomic.Pointer[Snapshot]

	// mu orders this process's changes and re-reads (the directory's
	// lock orders processes), and the calls of the OnChange functions.
	mu     sync.Mutex
	stamps [4]stamp // of the files as last read or written
	subs   []func(Change)
	raw    rawFiles // what the files held when last read or written
	read   bool     // raw holds what the files held once

	stop, done chan struct{}
	closing    sync.Once

	// crash, in tests, is called at each step of a change that spans
	// files (step), to kill the process there or fail the step.
	crash func(step string) error
}

// rawFiles is the content of the three files; nil is a file that does not
// exist.
type rawFiles struct {
	users, roles, tokens []byte
	// usersErr and rolesErr say why a file that exists cannot be read
	// (tokensErr likewise); broken why a pending change cannot be.
	usersErr, rolesErr, tokensErr, broken error
}

// OpenStore reads the users file at usersPath and the files beside it. A
// users file that is missing or unreadable is no error here: the
// Snapshot's Err says so (the daemon refuses to start on it, kvmd user add
// creates it).
func OpenStore(usersPath string, cfg StoreConfig) (*Store, error) {
	s := &Store{
		users: usersPath, roles: RolesPath(usersPath), tokens: TokensPath(usersPath), pending: PendingPath(usersPath),
		cfg: cfg, clock: cfg.Clock, log: cfg.Log,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.snap.Store(&Snapshot{users: map[string]*userEntry{}, roles: map[string]Role{}, tokens: map[[32]byte]*liveToken{},
		err: errors.New("auth: users file not read yet")})
	// The watch first, then the read: no change between the two is
	// missed.
	var w *dirWatch
	if cfg.Watch {
		w = s.startWatch()
	}
	if err := s.Reload(); err != nil {
		if w != nil && w.stop != nil {
			w.stop()
		}
		return nil, err
	}
	if w != nil {
		go s.watch(w)
	} else {
		close(s.done)
	}
	return s, nil
}

// Clock returns the clock the store runs on.
func (s *Store) Clock() clockwork.Clock { return s.clock }

// Path returns the users file's path.
func (s *Store) Path() string { return s.users }

// Snapshot returns the credentials as they are now.
func (s *Store) Snapshot() *Snapshot { return s.snap.Load() }

// OnChange adds f to the functions called, in order and one change at a
// time, after each new Snapshot is published. f must not change the store.
func (s *Store) OnChange(f func(Change)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, f)
}

// Close stops following the files.
func (s *Store) Close() error {
	s.closing.Do(func() { close(s.stop) })
	<-s.done
	return nil
}

func (s *Store) statAll() [4]stamp {
	return [4]stamp{statStamp(s.users), statStamp(s.roles), statStamp(s.tokens), statStamp(s.pending)}
}

// Reload reads the files now and publishes what they hold, if that
// changed. With Watch the store does it by itself on every change.
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

// reloadIfChanged is Reload when a file's stamp (inode, size, mtime)
// changed since the files were last read or written: for the polls, which
// must not read the files ten times a second for nothing.
func (s *Store) reloadIfChanged() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statAll() == s.stamps && s.snap.Load().err == nil {
		return nil
	}
	return s.reloadLocked()
}

func (s *Store) reloadLocked() error {
	raw, _, err := s.readLocked(false)
	if err != nil {
		return err
	}
	s.publish(raw, nil, false)
	return nil
}

// readLocked reads the files under the directory's lock, so that it sees
// them between changes, never inside one; a change found pending (its
// writer died) is finished first, or read as finished where the files
// cannot be written. With forEdit the lock is kept and returned for the
// caller to release. s.mu must be held.
func (s *Store) readLocked(forEdit bool) (rawFiles, *atomicfile.Lock, error) {
	l, err := atomicfile.LockDir(s.users)
	if err != nil {
		if forEdit || !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return rawFiles{}, nil, fmt.Errorf("auth: %w", err)
		}
		// No directory to lock (no users file either), or one this
		// process may not open: read what can be read.
		l = nil
	}
	if l != nil && !forEdit {
		defer l.Unlock()
	}
	if l != nil {
		l.RemoveStale(s.users)
		l.RemoveStale(s.roles)
		l.RemoveStale(s.tokens)
		l.RemoveStale(s.pending)
	}
	raw := rawFiles{}
	stamps := s.statAll()
	raw.users, raw.usersErr = readUsers(s.users)
	raw.roles, raw.rolesErr = readOptional(s.roles)
	raw.tokens, raw.tokensErr = readOptional(s.tokens)
	if p, err := readOptional(s.pending); err != nil || p != nil {
		raw = s.finishPending(l, p, err, raw)
		stamps = s.statAll()
	}
	s.stamps = stamps
	if forEdit && raw.broken != nil {
		l.Unlock()
		return raw, nil, fmt.Errorf("auth: %s: %w", s.pending, raw.broken)
	}
	return raw, l, nil
}

// readUsers reads the users file, which must exist.
func readUsers(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: reading users file: %w", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// readOptional reads a file: nil and no error when it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// warn reports a line that does not parse.
func (s *Store) warn(path string, err error) {
	if s.cfg.Warn != nil {
		s.cfg.Warn(path, err)
		return
	}
	s.log.Warn("credentials file", "path", path, "err", err)
}

// same reports whether r and o hold the same: the same bytes, and the
// same errors.
func (r rawFiles) same(o rawFiles) bool {
	return bytes.Equal(r.users, o.users) && bytes.Equal(r.roles, o.roles) && bytes.Equal(r.tokens, o.tokens) &&
		(r.users == nil) == (o.users == nil) && (r.roles == nil) == (o.roles == nil) && (r.tokens == nil) == (o.tokens == nil) &&
		sameError(r.usersErr, o.usersErr) && sameError(r.rolesErr, o.rolesErr) &&
		sameError(r.tokensErr, o.tokensErr) && sameError(r.broken, o.broken)
}

// sameError reports whether a and b are the same failure to read the
// files: none, the same file error (operation, path, errno: a re-read
// that fails as before is no news), or the same damage of a pending
// change. Any other pair differs, and is published again.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	var pa, pb *fs.PathError
	if errors.As(a, &pa) && errors.As(b, &pb) {
		return pa.Op == pb.Op && pa.Path == pb.Path && errors.Is(pa.Err, pb.Err)
	}
	var da, db *pendingError
	if errors.As(a, &da) && errors.As(b, &db) {
		return *da == *db
	}
	return false
}

// publish builds the Snapshot of raw, publishes it and tells the OnChange
// functions what changed. edited says the change is one of this store's
// Edits, which logs the tokens it revoked itself. s.mu must be held.
func (s *Store) publish(raw rawFiles, by *Actor, edited bool) {
	if s.read && raw.same(s.raw) {
		return
	}
	old := s.snap.Load()
	first := !s.read
	prev := s.raw
	s.raw, s.read = raw, true
	n := s.build(raw, prev, old)
	s.snap.Store(n)
	if !first {
		s.logReread(raw, old, n)
	}
	c := n.diff(old)
	c.By = by
	c.Others = n.endLive(old) && !first
	for _, lt := range old.tokens {
		if n.tokens[lt.hash] != lt {
			lt.end()
		}
		if _, ok := n.tokens[lt.hash]; !ok && !edited && !first && n.broken == nil && raw.tokensErr == nil {
			s.log.Info("token revoked", append([]any{"user", lt.info.User, "token", lt.info.Name}, by.logArgs()...)...)
		}
	}
	if !first {
		for _, rc := range c.Roles {
			if !old.Has(rc.User) && n.Has(rc.User) {
				// A new user: its role was no other before (the
				// default role of a name the files lacked is not one).
				continue
			}
			s.log.Info("role changed", append([]any{"user", rc.User, "old", rc.Old.String(), "new", rc.New.String()}, by.logArgs()...)...)
		}
	}
	if !c.empty() {
		for _, f := range s.subs {
			f(c)
		}
	}
}

// errClass is what kind of failure err is, so that a re-read failing the
// same way as the last one is not logged again.
func errClass(err error) error {
	for _, c := range []error{fs.ErrNotExist, fs.ErrPermission} {
		if errors.Is(err, c) {
			return c
		}
	}
	return err
}

// logReread logs a re-read of the files that changed what they hold.
func (s *Store) logReread(raw rawFiles, old, n *Snapshot) {
	switch {
	case n.err != nil && (old.err == nil || errClass(n.err) != errClass(old.err)):
		s.log.Error("users file unusable, every password check fails", "path", s.users, "err", n.err)
	case n.err == nil && old.err != nil:
		s.log.Info("users file re-read", "path", s.users, "users", len(n.order))
	case n.err == nil && n.usersGen != old.usersGen:
		s.log.Info("users file re-read", "path", s.users, "users", len(n.order))
	}
	if n.rolesBroken && !old.rolesBroken {
		s.log.Error("roles file unreadable: every user is a viewer until it is", "path", s.roles, "err", raw.rolesErr)
	}
	if raw.tokensErr != nil {
		s.log.Error("tokens file unreadable: every API token is refused until it is", "path", s.tokens, "err", raw.tokensErr)
	}
	if n.broken != nil && old.broken == nil {
		s.log.Error("a change of the credential files cannot be finished: every user is a viewer and every API token refused until it is removed",
			"path", s.pending, "err", n.broken)
	}
}

// build makes the Snapshot of raw, keeping old's live tokens where
// nothing that decides what they let in changed. The lines that do not
// parse are reported for the files whose content is not prev's.
func (s *Store) build(raw, prev rawFiles, old *Snapshot) *Snapshot {
	warn := func(path string, data, before []byte, errs []error) {
		if bytes.Equal(data, before) && before != nil {
			return
		}
		for _, e := range errs {
			s.warn(path, e)
		}
	}
	n := &Snapshot{users: map[string]*userEntry{}, roles: map[string]Role{}, tokens: map[[32]byte]*liveToken{},
		usersGen: old.usersGen, broken: raw.broken}
	if raw.usersErr != nil {
		n.err = raw.usersErr
		n.usersGen++
	} else {
		f, errs := ParseHtpasswd(raw.users)
		warn(s.users, raw.users, prev.users, errs)
		changed := old.err != nil || len(f.Users()) != len(old.order)
		for _, name := range f.Users() {
			text, _ := f.Lookup(name)
			h, _ := ParseHash(text) // reported by ParseHtpasswd
			n.users[name] = &userEntry{text: text, hash: h}
			n.order = append(n.order, name)
			if o := old.users[name]; o == nil || o.text != text {
				changed = true
			}
		}
		if changed {
			n.usersGen++
		}
	}
	switch {
	case raw.rolesErr != nil:
		n.rolesBroken = true
	case raw.roles != nil:
		f, errs := ParseRoles(raw.roles)
		warn(s.roles, raw.roles, prev.roles, errs)
		n.roles = f.Map()
	}
	if raw.tokensErr == nil {
		f, errs := ParseTokens(raw.tokens)
		warn(s.tokens, raw.tokens, prev.tokens, errs)
		now := s.clock.Now()
		for _, e := range f.entries {
			if e == nil {
				continue
			}
			if _, dup := n.tokens[e.hash]; dup {
				continue // the same secret twice: the first line decides
			}
			n.tokens[e.hash] = s.liveToken(e, old, n, now)
		}
	}
	n.buildLive(old)
	return n
}

// liveToken returns old's live token of e if nothing that decides what it
// lets in changed (the token's line but its last-used time, its user's
// entry and role), or a new one that takes its last use.
func (s *Store) liveToken(e *tokenEntry, old, n *Snapshot, now time.Time) *liveToken {
	role, _ := ParseRole(e.Role)
	u := e.User
	same := func(o *liveToken) bool {
		oi, ni := o.info, e.TokenInfo
		oi.LastUsed, ni.LastUsed = time.Time{}, time.Time{}
		return oi == ni && o.role == role && old.Role(u) == n.Role(u) &&
			(old.users[u] == nil) == (n.users[u] == nil) && (old.users[u] == nil || old.users[u].text == n.users[u].text)
	}
	o := old.tokens[e.hash]
	if o != nil && same(o) {
		if lu := e.LastUsed.UnixNano(); !e.LastUsed.IsZero() && lu > o.used.Load() {
			o.used.Store(lu)
		}
		return o
	}
	lt := &liveToken{hash: e.hash, info: e.TokenInfo, role: role, used: new(atomic.Int64)}
	if o != nil && o.info.User == e.User && o.info.Name == e.Name {
		lt.used = o.used
	}
	if !e.LastUsed.IsZero() && e.LastUsed.UnixNano() > lt.used.Load() {
		lt.used.Store(e.LastUsed.UnixNano())
	}
	lt.ctx, lt.cancel = context.WithCancel(context.Background())
	if !e.Expires.IsZero() {
		if d := e.Expires.Sub(now); d <= 0 {
			lt.cancel()
		} else {
			lt.timer = s.clock.AfterFunc(d, func() {
				if lt.ctx.Err() == nil {
					lt.cancel()
					s.log.Info("token expired", "user", lt.info.User, "token", lt.info.Name)
				}
			})
		}
	}
	return lt
}

// end ends the requests the token let in, and its timer.
func (lt *liveToken) end() {
	lt.cancel()
	if lt.timer != nil {
		lt.timer.Stop()
	}
}

// hashToken is the key of a token in the tokens file and in a Snapshot.
func hashToken(secret string) [32]byte {
	var buf [128]byte // the secret, copied here rather than to the heap
	return sha256.Sum256(append(buf[:0], secret...))
}
