package msd

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"kvmd/auth"
)

// MaxNameLen is the longest image name, in bytes: NAME_MAX of ext4, vfat
// and exFAT.
const MaxNameLen = 255

// CheckName returns nil when name may name an image in the storage
// directory, else a *NameError (ErrBadName) that says why. A name is
// one file name, never a path: no slash, no NUL, not "." or "..", not
// hidden (a leading dot: the storage's own temporary files start with
// one), not lost+found, printable characters only (no control, format or
// invisible characters, which could hide the real name in a listing or a
// log), no leading or trailing space, valid UTF-8, at most MaxNameLen
// bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return badName("empty")
	case len(name) > MaxNameLen:
		return badName("longer than 255 bytes")
	case !utf8.ValidString(name):
		return badName("not UTF-8")
	case strings.HasPrefix(name, "."):
		return badName("starts with a dot (hidden files, . and .. are not images)")
	case name == "lost+found":
		return badName("lost+found is the file system's own")
	case strings.TrimSpace(name) != name:
		return badName("starts or ends with a space")
	}
	for _, r := range name {
		switch {
		case r == '/' || r == '\\':
			return badName("a path (a slash or backslash): images are single files in the storage")
		case !unicode.IsPrint(r):
			return badName("holds a control or invisible character")
		}
	}
	return nil
}

// LogName is an image name as the log shows it: "[token]" when it looks
// like a session or API token (auth.LooksLikeToken), which someone may
// have pasted as a name; the journal and the support bundle keep no
// token.
func LogName(name string) string {
	if auth.LooksLikeToken(name) {
		return "[token]"
	}
	return name
}

func badName(why string) error {
	return &NameError{Why: why}
}

// NameError is CheckName's answer: Why says what is wrong with the name,
// for the person who gave it. It is ErrBadName (errors.Is).
type NameError struct{ Why string }

func (e *NameError) Error() string        { return "msd: bad image name: " + e.Why }
func (e *NameError) Is(target error) bool { return target == ErrBadName }
