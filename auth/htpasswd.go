package auth

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/GehirnInc/crypt"
	"github.com/GehirnInc/crypt/apr1_crypt"
	"github.com/GehirnInc/crypt/sha256_crypt"
	"github.com/GehirnInc/crypt/sha512_crypt"
	"golang.org/x/crypto/bcrypt"
)

// Limits on the cost a users file may ask for. A hash is checked on every
// login attempt, including an attacker's, so a line asking for minutes of
// CPU per check would let anyone stall the daemon. The bcrypt limit is the
// highest cost Apache's htpasswd writes; sha-crypt allows up to 999999999
// rounds, 200000 times its default.
const (
	maxBcryptCost  = 17
	maxCryptRounds = 10_000_000
)

// Hash is a password hash read from a users file.
type Hash interface {
	// Verify reports whether passwd is the password the hash was made of.
	Verify(passwd string) bool
}

var (
	errHashUnsupported = errors.New("auth: unsupported password hash scheme")
	errHashMalformed   = errors.New("auth: malformed password hash")
)

// ParseHash parses a hash as found after the colon of a users file line. It
// accepts what an existing PiKVM users file may hold: {SSHA512} (kvmd's
// default), {SSHA256}, {SSHA}, {SHA}, $apr1$, $5$ and $6$ (sha-crypt, with
// rounds=), and bcrypt's $2a$, $2b$ and $2y$. Anything else, plaintext
// included, is an error, and a hash that does not parse never matches. The
// errors never quote the hash.
func ParseHash(s string) (Hash, error) {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return nil, fmt.Errorf("%w: white space or control characters", errHashMalformed)
		}
	}
	if s != "" && s[0] == '{' {
		return parseDigest(s)
	}
	switch {
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		return parseBcrypt(s)
	case strings.HasPrefix(s, apr1_crypt.MagicPrefix):
		return parseCrypt(s, apr1_crypt.New(), apr1_crypt.MagicPrefix, 8, 22, false)
	case strings.HasPrefix(s, sha256_crypt.MagicPrefix):
		return parseCrypt(s, sha256_crypt.New(), sha256_crypt.MagicPrefix, 16, 43, true)
	case strings.HasPrefix(s, sha512_crypt.MagicPrefix):
		return parseCrypt(s, sha512_crypt.New(), sha512_crypt.MagicPrefix, 16, 86, true)
	}
	return nil, errHashUnsupported
}

// saltedDigest is an LDAP-style hash: base64 of digest(passwd+salt)
// followed by the salt; {SHA} has no salt.
type saltedDigest struct {
	newHash func() hash.Hash
	digest  []byte
	salt    []byte
}

func (h *saltedDigest) Verify(passwd string) bool {
	d := h.newHash()
	d.Write([]byte(passwd))
	d.Write(h.salt)
	return subtle.ConstantTimeCompare(d.Sum(nil), h.digest) == 1
}

func parseDigest(s string) (Hash, error) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return nil, errHashUnsupported
	}
	var (
		newHash func() hash.Hash
		salted  bool
	)
	// LDAP scheme names are case-insensitive (slappasswd, Dovecot).
	switch strings.ToUpper(s[:end+1]) {
	case "{SHA}":
		newHash = sha1.New
	case "{SSHA}":
		newHash, salted = sha1.New, true
	case "{SSHA256}":
		newHash, salted = sha256.New, true
	case "{SSHA512}":
		newHash, salted = sha512.New, true
	default:
		return nil, errHashUnsupported
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s[end+1:])
	if err != nil {
		return nil, fmt.Errorf("%w: bad base64", errHashMalformed)
	}
	size := newHash().Size()
	switch {
	case !salted && len(raw) != size:
		return nil, fmt.Errorf("%w: digest of %d bytes, want %d", errHashMalformed, len(raw), size)
	case salted && len(raw) <= size:
		return nil, fmt.Errorf("%w: %d bytes, want a %d-byte digest and a salt", errHashMalformed, len(raw), size)
	}
	return &saltedDigest{newHash: newHash, digest: raw[:size], salt: raw[size:]}, nil
}

// cryptHash is a crypt(3)-style hash verified by recomputing it with the
// salt and rounds it names.
type cryptHash struct {
	crypter crypt.Crypter
	hash    string
	rounds  int // 0 for schemes with a fixed cost
}

func (h *cryptHash) Verify(passwd string) bool {
	// The crypter compares the recomputed hash in constant time.
	return h.crypter.Verify(h.hash, []byte(passwd)) == nil
}

// cryptAlphabet is the base64 variant of crypt(3) salts and digests.
const cryptAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func inAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(cryptAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// parseCrypt checks the layout $id$[rounds=N$]salt$digest before handing
// the hash to the crypter, whose own parsing is lenient: it truncates long
// salts and clamps rounds, which would turn a mangled line into one that can
// never match instead of an error worth reporting.
func parseCrypt(s string, c crypt.Crypter, prefix string, maxSalt, digestLen int, hasRounds bool) (Hash, error) {
	rest := s[len(prefix):]
	h := &cryptHash{crypter: c, hash: s}
	if hasRounds && strings.HasPrefix(rest, "rounds=") {
		num, after, ok := strings.Cut(rest[len("rounds="):], "$")
		if !ok {
			return nil, fmt.Errorf("%w: no salt", errHashMalformed)
		}
		n, err := strconv.Atoi(num)
		// glibc writes the rounds it used, clamped to 1000..999999999, in
		// plain decimal: anything else cannot have come from it.
		if err != nil || strconv.Itoa(n) != num || n < 1000 || n > 999_999_999 {
			return nil, fmt.Errorf("%w: bad rounds", errHashMalformed)
		}
		if n > maxCryptRounds {
			return nil, fmt.Errorf("auth: password hash asks for %d rounds, more than the %d this daemon allows", n, maxCryptRounds)
		}
		h.rounds = n
		rest = after
	}
	salt, digest, ok := strings.Cut(rest, "$")
	if !ok {
		return nil, fmt.Errorf("%w: no digest", errHashMalformed)
	}
	if len(salt) > maxSalt {
		return nil, fmt.Errorf("%w: salt longer than %d characters", errHashMalformed, maxSalt)
	}
	if strings.IndexByte(salt, '$') >= 0 || len(digest) != digestLen || !inAlphabet(digest) {
		return nil, fmt.Errorf("%w: bad digest", errHashMalformed)
	}
	return h, nil
}

type bcryptHash struct {
	hash []byte
	cost int
}

func (h *bcryptHash) Verify(passwd string) bool {
	return bcrypt.CompareHashAndPassword(h.hash, []byte(passwd)) == nil
}

// parseBcrypt checks $2x$NN$ followed by 22 characters of salt and 31 of
// digest, the only layout bcrypt writes.
func parseBcrypt(s string) (Hash, error) {
	const bcryptAlphabet = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	if len(s) != 60 || s[6] != '$' {
		return nil, fmt.Errorf("%w: bcrypt hash of unexpected length", errHashMalformed)
	}
	cost, err := strconv.Atoi(s[4:6])
	if err != nil || s[4] < '0' || s[4] > '9' || cost < bcrypt.MinCost {
		return nil, fmt.Errorf("%w: bad bcrypt cost", errHashMalformed)
	}
	if cost > maxBcryptCost {
		return nil, fmt.Errorf("auth: bcrypt cost %d is more than the %d this daemon allows", cost, maxBcryptCost)
	}
	for i := 7; i < len(s); i++ {
		if strings.IndexByte(bcryptAlphabet, s[i]) < 0 {
			return nil, fmt.Errorf("%w: bad bcrypt digest", errHashMalformed)
		}
	}
	return &bcryptHash{hash: []byte(s), cost: cost}, nil
}

// NewHash hashes passwd for a users file, with bcrypt at its default cost.
// bcrypt reads only the first 72 bytes of a password; rather than silently
// accept longer ones, NewHash refuses them (ErrPasswdTooLong).
func NewHash(passwd string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(passwd), bcrypt.DefaultCost)
	if errors.Is(err, bcrypt.ErrPasswordTooLong) {
		return "", ErrPasswdTooLong
	}
	if err != nil {
		return "", fmt.Errorf("hashing password: %w", err)
	}
	return string(h), nil
}

// Limits from the API contract (kvmd's validators).
const (
	maxUserLen   = 128
	maxPasswdLen = 512
)

// MaxNewPasswdLen is the longest password that can be set: bcrypt reads
// 72 bytes. A sign-in still takes up to 512 (kvmd's limit), for a hash of
// another kind in an existing PiKVM users file, and a 2FA code after the
// password.
const MaxNewPasswdLen = 72

// ErrPasswdTooLong is a new password longer than MaxNewPasswdLen.
var ErrPasswdTooLong = fmt.Errorf("auth: password is longer than %d bytes (bcrypt's limit)", MaxNewPasswdLen)

// ValidUser checks a user name: a lower-case letter or underscore, then
// lower-case letters, digits, '@', '.', '_' and '-', not ending with '@' or
// '.', at most 128 bytes. The error never quotes the name.
func ValidUser(name string) error {
	switch {
	case name == "":
		return &NameError{Why: "is empty"}
	case len(name) > maxUserLen:
		return &NameError{Why: fmt.Sprintf("is longer than %d characters", maxUserLen)}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c == '_'
		if i > 0 {
			ok = ok || c >= '0' && c <= '9' || c == '-' || c == '@' || c == '.'
		}
		if !ok {
			return &NameError{Why: "may hold only lower-case letters, digits, '@', '.', '_' and '-', and must start with a letter or '_'"}
		}
	}
	if c := name[len(name)-1]; c == '@' || c == '.' {
		return &NameError{Why: "must not end with '@' or '.'"}
	}
	return nil
}

// NameError is ValidUser's answer: Why says what is wrong with the name
// ("is empty"), so that the rules of a user name can be told of another
// name that keeps them (a token's).
type NameError struct{ Why string }

func (e *NameError) Error() string { return "user name " + e.Why }

// ValidPasswd checks a password: printable ASCII (space to tilde), at most
// 512 bytes. An empty password is valid here; whether it may be set is the
// caller's decision. The error never quotes the password.
func ValidPasswd(p string) error {
	if len(p) > maxPasswdLen {
		return fmt.Errorf("password is longer than %d characters", maxPasswdLen)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] > 0x7e {
			return errors.New("password may hold only printable ASCII characters")
		}
	}
	return nil
}

// ValidNewPasswd checks a password about to be set: ValidPasswd's rules,
// not empty, and at most MaxNewPasswdLen bytes (ErrPasswdTooLong). The
// error never quotes the password.
func ValidNewPasswd(p string) error {
	switch {
	case p == "":
		return errors.New("password is empty")
	case len(p) > MaxNewPasswdLen:
		return ErrPasswdTooLong
	}
	return ValidPasswd(p)
}

// Htpasswd is a users file: lines of user:hash, with # comments. It keeps
// every line as written, comments, blank and malformed lines included, so
// that editing one entry rewrites only that line.
//
// The zero value is an empty file.
type Htpasswd struct {
	lines []htLine
}

type htLine struct {
	raw  string // as read, without the newline; "\r" kept
	user string // "" unless the line is a well-formed entry
	hash string
	dup  bool // an entry for a user that an earlier line already has
}

// ParseHtpasswd reads a users file. It never fails: lines it cannot use
// are kept and ignored, and reported in the returned errors by line number
// only, since a malformed line may hold a password. A user listed twice is
// reported too, and the first entry wins. An entry whose hash ParseHash
// rejects is kept as an entry, and reported.
func ParseHtpasswd(data []byte) (*Htpasswd, []error) {
	h := &Htpasswd{}
	if len(data) == 0 {
		return h, nil
	}
	text := strings.TrimSuffix(string(data), "\n")
	var errs []error
	first := map[string]int{}
	for i, raw := range strings.Split(text, "\n") {
		n := i + 1
		l := htLine{raw: raw}
		user, hash, err := parseLine(raw)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
		case user == "":
			// Comment or blank.
		case first[user] != 0:
			l.user, l.hash, l.dup = user, hash, true
			errs = append(errs, fmt.Errorf("line %d: duplicate of the user on line %d, which is the one used", n, first[user]))
		default:
			l.user, l.hash = user, hash
			first[user] = n
			if _, err := ParseHash(hash); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			}
		}
		h.lines = append(h.lines, l)
	}
	return h, errs
}

// parseLine splits a users file line into user and hash. Comments and
// blank lines give two empty strings and no error. The error does not quote
// the line.
func parseLine(line string) (user, hash string, err error) {
	line = strings.TrimSuffix(line, "\r")
	if t := strings.TrimLeft(line, " \t"); t == "" || t[0] == '#' {
		return "", "", nil
	}
	user, hash, ok := strings.Cut(line, ":")
	if !ok {
		return "", "", errors.New("not a comment and no ':' between user and hash")
	}
	if err := ValidUser(user); err != nil {
		return "", "", fmt.Errorf("invalid user name: %w", err)
	}
	hash = strings.TrimRight(hash, " \t")
	if hash == "" {
		return "", "", errors.New("empty hash")
	}
	for i := 0; i < len(hash); i++ {
		if c := hash[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return "", "", errors.New("hash holds white space, control characters or ':'")
		}
	}
	return user, hash, nil
}

// find returns the index of the line that holds user's entry, or -1.
func (h *Htpasswd) find(user string) int {
	for i, l := range h.lines {
		if l.user == user && !l.dup {
			return i
		}
	}
	return -1
}

// Users returns the users of the file in file order.
func (h *Htpasswd) Users() []string {
	var users []string
	for _, l := range h.lines {
		if l.user != "" && !l.dup {
			users = append(users, l.user)
		}
	}
	return users
}

// Lookup returns the hash of user's entry.
func (h *Htpasswd) Lookup(user string) (hash string, ok bool) {
	if i := h.find(user); i >= 0 {
		return h.lines[i].hash, true
	}
	return "", false
}

// Set gives user the hash, replacing the line of the existing entry in
// place or appending a line. Set panics if user is not a valid user name or
// hash cannot stand on a users file line (white space, ':', control
// characters): the caller validates both, and a hash with a newline must
// never be able to add an entry.
func (h *Htpasswd) Set(user, hash string) {
	entry := user + ":" + hash
	if u, hh, err := parseLine(entry); err != nil || u != user || hh != hash {
		panic("auth: Htpasswd.Set: invalid user name or hash")
	}
	if i := h.find(user); i >= 0 {
		if strings.HasSuffix(h.lines[i].raw, "\r") {
			entry += "\r" // keep a CRLF file CRLF
		}
		h.lines[i] = htLine{raw: entry, user: user, hash: hash}
		return
	}
	h.lines = append(h.lines, htLine{raw: entry, user: user, hash: hash})
}

// Delete removes user's entry, and any duplicate entries of that user, so
// that a forgotten duplicate cannot take over with an old password. It
// reports whether the user had an entry.
func (h *Htpasswd) Delete(user string) bool {
	found := false
	kept := h.lines[:0]
	for _, l := range h.lines {
		if l.user == user {
			found = found || !l.dup
			continue
		}
		kept = append(kept, l)
	}
	clear(h.lines[len(kept):])
	h.lines = kept
	return found
}

// Bytes renders the file. Lines that were not changed are byte-identical to
// the ones read; the result ends with a newline unless it is empty.
func (h *Htpasswd) Bytes() []byte {
	var b strings.Builder
	for _, l := range h.lines {
		b.WriteString(l.raw)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
