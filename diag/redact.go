package diag

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Redacted replaces every secret in a bundle.
const Redacted = "[REDACTED]"

// minSecret is the shortest known secret replaced wherever it appears: a
// shorter one would blank out ordinary words and numbers across the whole
// bundle, and the patterns below still catch it where it is labelled.
const minSecret = 4

// Secrets says where the secrets of this device live, so that their values
// can be removed wherever they turn up (a log line, a command line, a
// configuration echoed back).
type Secrets struct {
	// Users is the htpasswd users file: its hashes are secret, its names
	// are identities.
	Users string
	// Files hold a secret each, whole: the TOTP secret, the TLS private
	// key, the RADIUS and HTTP-backend secrets.
	Files []string
	// Values are more secrets known by value.
	Values []string
	// Names are more user names (the configured local users).
	Names []string
}

// Redactor removes secrets, and on request identities, from text. It is
// safe for concurrent use.
type Redactor struct {
	secrets    [][]byte // longest first
	identities bool

	mu     sync.Mutex
	names  map[string]string // identity → placeholder
	counts map[string]int    // placeholder kind → how many so far
	nameRE *regexp.Regexp    // the known names as words; nil when none
}

// NewRedactor reads the secrets' files. A file that does not exist holds
// no secret; one that cannot be read is an error, since its secret could
// then not be removed.
func NewRedactor(s Secrets, identities bool, host string) (*Redactor, error) {
	r := &Redactor{identities: identities, names: map[string]string{}, counts: map[string]int{}}
	var secrets []string
	var names []string
	if s.Users != "" {
		b, err := readSecretFile(s.Users)
		if err != nil {
			return nil, err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, hash, ok := strings.Cut(line, ":")
			if !ok {
				secrets = append(secrets, line) // not a user line: all of it
				continue
			}
			names = append(names, name)
			secrets = append(secrets, hash)
		}
	}
	for _, f := range s.Files {
		if f == "" {
			continue
		}
		b, err := readSecretFile(f)
		if err != nil {
			return nil, err
		}
		secrets = append(secrets, secretParts(string(b))...)
	}
	secrets = append(secrets, s.Values...)
	names = append(names, s.Names...)
	for _, v := range secrets {
		if v = strings.TrimSpace(v); len(v) >= minSecret {
			r.secrets = append(r.secrets, []byte(v))
		}
	}
	slices.SortFunc(r.secrets, func(a, b []byte) int { return len(b) - len(a) })
	r.secrets = slices.CompactFunc(r.secrets, bytes.Equal)
	if identities {
		if host != "" {
			r.placeholder("host", host)
		}
		for _, n := range names {
			r.addName(n)
		}
	}
	return r, nil
}

func readSecretFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("diag: reading %s for its secrets: %w", path, err)
	}
	return b, nil
}

// secretParts returns a secret file's content whole, and each of its
// lines: a PEM key's base64 lines appear alone when a log quotes a piece.
func secretParts(s string) []string {
	out := []string{s}
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

var (
	// pemKey is a PEM private key block, whatever its kind.
	pemKey = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)`)
	// header is a credential header, as an HTTP dump or a curl command
	// line shows it: its value, up to the end of the line or a quote.
	header = regexp.MustCompile(`(?i)\b(x-kvmd-passwd|authorization|proxy-authorization|cookie|set-cookie)(\s*[:=]\s*)[^\r\n"']*`)
	// labelled is a secret given by name: passwd=x, "password": "x",
	// --ldap-secret x. A value that is a path names where the secret is
	// kept, which is worth seeing; the rest is the secret.
	labelled = regexp.MustCompile(`(?i)([a-z0-9_-]*(?:passw(?:or)?d|secret|token|api[_-]?key|private[_-]?key|credential)[a-z0-9_-]*["']?)([ \t]*[:=][ \t]*|[ \t]+)("[^"\r\n]*"|'[^'\r\n]*'|[^\s,;&"'}]+)`)
	// hashes are password hashes in the forms htpasswd and crypt(3) write.
	hashes = regexp.MustCompile(`\$(?:2[abxy]|apr1|1|5|6|y|gy|7|argon2i|argon2id|argon2d)\$[./A-Za-z0-9$=,+-]{8,}|\{SHA\}[A-Za-z0-9+/]{27}=`)
	// otpURI is a TOTP provisioning URI, which carries the secret.
	otpURI = regexp.MustCompile(`otpauth://[^\s"']+`)
	// userinfo is the user:password@ of a URL.
	userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@"']+:[^/\s@"']*@`)
	// bearer is a Basic or Bearer credential outside a header.
	bearer = regexp.MustCompile(`\b(Basic|Bearer|BASIC|BEARER)\s+[A-Za-z0-9+/._~-]{8,}=*`)
	// apiToken is an API token (auth.TokenPrefix and 64 hex digits), or
	// its first part: wherever it turned up (a URL in the access log, a
	// user name typed into the wrong field), by its form, since the
	// tokens file keeps only hashes. 16 digits tell it from names such as
	// kvmd_cpu_temperature_celsius.
	apiToken = regexp.MustCompile(`kvmd_[0-9A-Fa-f]{16,}`)
	// hexSecret is a run of 64 hex digits or more: a session token (and
	// an API token without its prefix). Nothing a bundle needs is that
	// long and hex; a SHA-256 digest goes with it.
	hexSecret = regexp.MustCompile(`[0-9A-Fa-f]{64,}`)
)

var (
	ipv4    = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b`)
	ipv6    = regexp.MustCompile(`(?i)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%[a-z0-9_.-]+)?`)
	mac     = regexp.MustCompile(`(?i)\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b`)
	userKey = regexp.MustCompile(`(?i)\b(user|username|x-kvmd-user)(=|:[ \t]*)("[^"\r\n]*"|[A-Za-z0-9_.@-]+)`)
)

// isPath tells a value that names a file from a secret.
func isPath(v []byte) bool {
	v = bytes.Trim(v, `"'`)
	return len(v) > 1 && v[0] == '/' && !bytes.ContainsAny(v, " \t")
}

// Bytes returns b with every secret replaced by Redacted and, when the
// Redactor removes identities, every user name, address and host name by
// a placeholder that stays the same within the bundle (user-1, addr-2).
func (r *Redactor) Bytes(b []byte) []byte {
	for _, s := range r.secrets {
		b = bytes.ReplaceAll(b, s, []byte(Redacted))
	}
	b = pemKey.ReplaceAll(b, []byte(Redacted))
	b = header.ReplaceAll(b, []byte("${1}${2}"+Redacted))
	b = labelled.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := labelled.FindSubmatch(m)
		v := bytes.Trim(sub[3], `"'`)
		if isPath(sub[3]) || len(v) == 0 || bytes.Equal(v, []byte(Redacted)) ||
			bytes.Equal(sub[3], []byte("true")) || bytes.Equal(sub[3], []byte("false")) {
			return m
		}
		if bytes.TrimSpace(sub[2]) == nil && !bytes.HasPrefix(sub[1], []byte("-")) {
			return m // "password" followed by a word is prose, not a value
		}
		red := []byte(Redacted)
		if q := sub[3][0]; q == '"' || q == '\'' {
			red = slices.Concat([]byte{q}, red, []byte{q})
		}
		return slices.Concat(sub[1], sub[2], red)
	})
	b = hashes.ReplaceAll(b, []byte(Redacted))
	b = otpURI.ReplaceAll(b, []byte("otpauth://"+Redacted))
	b = userinfo.ReplaceAll(b, []byte("${1}"+Redacted+"@"))
	b = bearer.ReplaceAll(b, []byte("${1} "+Redacted))
	b = apiToken.ReplaceAll(b, []byte(Redacted))
	b = hexSecret.ReplaceAll(b, []byte(Redacted))
	if r.identities {
		b = r.identitiesOf(b)
	}
	return b
}

// String is Bytes for a string.
func (r *Redactor) String(s string) string { return string(r.Bytes([]byte(s))) }

func (r *Redactor) identitiesOf(b []byte) []byte {
	// Names given as user=NAME join the known ones first, so that the same
	// name elsewhere in the bundle gets the same placeholder.
	for _, m := range userKey.FindAllSubmatch(b, -1) {
		if n := string(bytes.Trim(m[3], `"`)); n != "" && !strings.HasPrefix(n, "user-") {
			r.addName(n)
		}
	}
	r.mu.Lock()
	re := r.nameRE
	r.mu.Unlock()
	if re != nil {
		b = re.ReplaceAllFunc(b, func(m []byte) []byte { return []byte(r.placeholder("user", string(m))) })
	}
	b = mac.ReplaceAllFunc(b, func(m []byte) []byte { return []byte(r.placeholder("mac", strings.ToLower(string(m)))) })
	b = ipv6.ReplaceAllFunc(b, func(m []byte) []byte { return r.addr(m) })
	b = ipv4.ReplaceAllFunc(b, func(m []byte) []byte { return r.addr(m) })
	return b
}

// addr replaces an address a person or network could be traced by; a
// loopback, unspecified or link-local multicast one is kept, and so is
// what does not parse as an address (a version number, a time).
func (r *Redactor) addr(m []byte) []byte {
	s := string(m)
	zone := ""
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s, zone = s[:i], s[i:]
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() {
		return m
	}
	return []byte(r.placeholder("addr", a.Unmap().String()) + zone)
}

func (r *Redactor) addName(n string) {
	// A name that is not text cannot be a word of the pattern; the users
	// file and the user= of the log hold none (auth.ValidUser).
	if strings.TrimSpace(n) == "" || !utf8.ValidString(n) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.names[n]; !ok {
		r.placeholderLocked("user", n)
	}
}

// placeholder returns the stand-in for an identity of a kind.
func (r *Redactor) placeholder(kind, id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.placeholderLocked(kind, id)
}

// wordsLocked is a pattern of the user and host names as words, longest
// first, rebuilt when one is added.
func (r *Redactor) wordsLocked() {
	var alts []string
	for id, p := range r.names {
		if (strings.HasPrefix(p, "user-") || strings.HasPrefix(p, "host-")) && utf8.ValidString(id) {
			alts = append(alts, regexp.QuoteMeta(id))
		}
	}
	slices.SortFunc(alts, func(a, b string) int { return len(b) - len(a) })
	r.nameRE = regexp.MustCompile(`\b(?:` + strings.Join(alts, "|") + `)\b`)
}

func (r *Redactor) placeholderLocked(kind, id string) string {
	if p, ok := r.names[id]; ok {
		return p
	}
	r.counts[kind]++
	p := fmt.Sprintf("%s-%d", kind, r.counts[kind])
	r.names[id] = p
	if (kind == "user" || kind == "host") && utf8.ValidString(id) {
		r.wordsLocked()
	}
	return p
}

// Identities reports whether identities are removed.
func (r *Redactor) Identities() bool { return r.identities }
