// Package backend is what external password checkers (LDAP, RADIUS, an
// HTTP service) implement for package auth, which keeps the users file as
// the default and adds 2FA, sessions, rate limiting, caching and the
// audit log around whichever checker a user's password goes to.
package backend

import (
	"context"
	"errors"
)

// A Backend checks a user's password against an external service.
type Backend interface {
	// Name is the backend's kind for logs and metrics: "ldap",
	// "radius", "http".
	Name() string
	// Verify returns nil when the service accepts user and passwd. It
	// returns an error wrapping ErrRejected when the service says no
	// (wrong password, unknown user, not in the required group), and one
	// wrapping ErrUnavailable when it cannot say (down, slow past its
	// timeout, misconfigured, an answer that does not parse). It returns
	// by ctx's deadline at the latest and is safe for concurrent use.
	Verify(ctx context.Context, user, passwd string) error
}

var (
	// ErrRejected means the service refused the credentials.
	ErrRejected = errors.New("rejected by the authentication service")
	// ErrUnavailable means the service could not be asked or did not
	// answer in time.
	ErrUnavailable = errors.New("authentication service unavailable")
)

// Roler is a Backend that also tells the role (admin, operator, viewer)
// of the users it accepted, from what its service says of them (LDAP
// groups, a RADIUS attribute): the role its last Verify found, and false
// when it found none (the roles file then decides).
type Roler interface {
	Role(user string) (role string, ok bool)
}
