package journal

import (
	"errors"
	"fmt"
)

// The kinds of *Error, for errors.Is.
var (
	ErrUnavailable      = errors.New("journal: not available")
	ErrTooManyFollowers = errors.New("journal: too many followers")
)

// Error is why the journal cannot be read now, returned by Open before
// any output: ErrTooManyFollowers, or ErrUnavailable with its reason
// (journalctl missing or failing at once, journal missing or unreadable).
// errors.Is matches it against those two.
//
// HTTPStatus and PublicMessage let a server answer with it, in the manner
// of tailscale's tsweb.HTTPError, without knowing this package.
type Error struct {
	kind   error  // ErrUnavailable or ErrTooManyFollowers
	reason string // why, for ErrUnavailable
	cause  error  // what the reason comes from, if anything
}

// unavailable is ErrUnavailable for the reason format makes of args,
// caused by cause (nil: nothing underneath).
func unavailable(cause error, format string, args ...any) *Error {
	return &Error{kind: ErrUnavailable, reason: fmt.Sprintf(format, args...), cause: cause}
}

var tooManyFollowers = &Error{kind: ErrTooManyFollowers}

func (e *Error) Error() string {
	if e.reason == "" {
		return e.kind.Error()
	}
	return e.kind.Error() + ": " + e.reason
}

// Is reports whether target is e's kind.
func (e *Error) Is(target error) bool { return target == e.kind }

func (e *Error) Unwrap() error { return e.cause }

// Reason says why the journal is not available, or is empty.
func (e *Error) Reason() string { return e.reason }

// HTTPStatus is 503 Service Unavailable: the journal may be readable
// later, and the request was fine.
func (e *Error) HTTPStatus() int { return 503 }

// PublicMessage is the sentence a client is shown: for ErrUnavailable
// with the reason, journalctl's complaint or the path that failed, which
// whoever reads the log needs to set it right.
func (e *Error) PublicMessage() string {
	if e.kind == ErrTooManyFollowers {
		return "Too many clients follow the log now; try again later"
	}
	return "The journal cannot be read: " + e.reason
}
