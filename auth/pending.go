package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"kvmd/internal/atomicfile"
)

// A change that spans more than one of the users, roles and tokens files
// (a user removed with its role and tokens; a user added with a role) is
// made in three steps, under the directory's lock:
//
//  1. FILE.pending is written (atomicfile: a temporary file, fsync,
//     rename, fsync of the directory) with the new content of every file
//     the change touches, and a SHA-256 of it all;
//  2. each of those files is written the same way;
//  3. FILE.pending is removed, and the directory flushed.
//
// Whoever takes the lock next (the daemon's watcher, the next command, the
// daemon when it starts) and finds FILE.pending finishes the change: it
// writes the files again from it and removes it. A crash before step 1
// leaves the old files and no FILE.pending; any crash after it leaves a
// FILE.pending that is read as the change done. So every reader sees the
// files before the change or after it, never between: no order of the
// writes is ever seen, and no crash point can give a role, keep a token
// of a removed user, or leave a role line behind. A change of one file is
// a single rename and needs none of this.
//
// A FILE.pending that does not parse or whose checksum is wrong (a
// damaged disk: atomicfile never leaves one half-written) cannot be
// finished: the files may be halfway. Until it is removed, every user is
// a viewer and every API token refused (fail closed), and no change is
// made.

const pendingMagic = "kvmd pending change 1\n"

// pendingFiles are the names a FILE.pending may hold, in the order the
// files are written.
var pendingFiles = []string{"roles", "tokens", "users"}

// errPendingDamaged is a FILE.pending that cannot be read.
var errPendingDamaged = errors.New("auth: pending change damaged")

// pendingError is decodePending's answer, errPendingDamaged for why.
type pendingError struct{ why string }

func (e *pendingError) Error() string        { return errPendingDamaged.Error() + ": " + e.why }
func (e *pendingError) Is(target error) bool { return target == errPendingDamaged }

// encodePending makes FILE.pending's content: the header, then each file
// as "name length\n", its bytes and "\n", then "sha256 hex\n" of all that
// comes before it.
func encodePending(files map[string][]byte) []byte {
	var b bytes.Buffer
	b.WriteString(pendingMagic)
	for _, name := range pendingFiles {
		data, ok := files[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "%s %d\n", name, len(data))
		b.Write(data)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sha256 %s\n", hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// decodePending parses FILE.pending; any flaw is errPendingDamaged.
func decodePending(data []byte) (map[string][]byte, error) {
	damaged := func(why string) error { return &pendingError{why} }
	i := bytes.LastIndex(data, []byte("sha256 "))
	if i < 0 || !bytes.HasPrefix(data, []byte(pendingMagic)) {
		return nil, damaged("no header or no checksum")
	}
	sum := sha256.Sum256(data[:i])
	if string(data[i:]) != "sha256 "+hex.EncodeToString(sum[:])+"\n" {
		return nil, damaged("checksum does not match")
	}
	rest := data[len(pendingMagic):i]
	files := map[string][]byte{}
	for len(rest) > 0 {
		head, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, damaged("truncated")
		}
		name, size, ok := strings.Cut(string(head), " ")
		n, err := strconv.Atoi(size)
		if !ok || err != nil || n < 0 || n+1 > len(after) || after[n] != '\n' {
			return nil, damaged("bad file header")
		}
		if _, dup := files[name]; dup || !contains(pendingFiles, name) {
			return nil, damaged("unknown or repeated file")
		}
		files[name] = bytes.Clone(after[:n])
		rest = after[n+1:]
	}
	return files, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// pathOf returns the path of a file FILE.pending names.
func (s *Store) pathOf(name string) string {
	switch name {
	case "users":
		return s.users
	case "roles":
		return s.roles
	}
	return s.tokens
}

// writeFile writes one of the store's files: the users file with its own
// mode (UsersPerm when new), the others with the users file's mode and
// owner when new.
func (s *Store) writeFile(path string, data []byte) error {
	if path == s.users {
		return atomicfile.Write(path, data, UsersPerm)
	}
	return atomicfile.WriteLike(path, data, UsersPerm, s.users)
}

// applyPending writes the files a pending change holds and removes it.
// The lock must be held.
func (s *Store) applyPending(files map[string][]byte) error {
	for _, name := range pendingFiles {
		data, ok := files[name]
		if !ok {
			continue
		}
		if err := s.writeFile(s.pathOf(name), data); err != nil {
			return err
		}
		if err := s.step("wrote " + name); err != nil {
			return err
		}
	}
	if err := s.step("wrote all"); err != nil {
		return err
	}
	if err := atomicfile.Remove(s.pending); err != nil {
		return fmt.Errorf("removing %s: %w", s.pending, err)
	}
	return nil
}

// finishPending finishes the change a FILE.pending found by a reader holds
// (data, or the error reading it): it writes the files from it and
// removes it, or, where the files cannot be written (a read-only
// /etc/kvmd), takes its content as the files' until a writer can. l is
// the directory's lock, nil when it could not be taken (then the change
// is only read). It returns the files as they are once it is finished.
func (s *Store) finishPending(l *atomicfile.Lock, data []byte, readErr error, raw rawFiles) rawFiles {
	var files map[string][]byte
	err := readErr
	if err == nil {
		files, err = decodePending(data)
	}
	if err != nil {
		raw.broken = err
		return raw
	}
	if l != nil {
		err = s.applyPending(files)
		if err == nil {
			s.log.Info("finished a change of the credential files that was cut short", "path", s.pending)
		}
	}
	if l == nil || err != nil {
		if err != nil && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) {
			s.log.Warn("a change of the credential files cut short cannot be written; read as done", "path", s.pending, "err", err)
		}
	}
	for name, b := range files {
		switch name {
		case "users":
			raw.users, raw.usersErr = b, nil
		case "roles":
			raw.roles, raw.rolesErr = b, nil
		case "tokens":
			raw.tokens, raw.tokensErr = b, nil
		}
	}
	return raw
}

// step marks a point of a change, for the crash tests: they kill the
// process there, or make the step fail.
func (s *Store) step(name string) error {
	if s.crash != nil {
		return s.crash(name)
	}
	return nil
}
