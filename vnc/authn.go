package vnc

import (
	"context"
	"net/netip"
	"time"

	"kvmd/auth"
)

// Sessions is the Authenticator of the daemon's own users: the password
// is checked as the HTTP API checks it (the users file or the external
// backend, 2FA, the brute-force limiter of the client's address), logged
// and counted as method "vnc"; the connection then holds a session of the
// user, so that it ends as a web session does: when the user's password
// or role changes, the user is deleted, an admin ends the session (it is
// in the session list, method vnc), or the session's lifetime is over.
// While the connection lasts, the session is kept from going idle.
//
// Issue 42 gives every password its own end (auth.Principal.Done of a
// password); then this can take that instead of a session.
type Sessions struct {
	Auth *auth.Authenticator
	// Touch is how often the session is marked used (default a minute).
	Touch time.Duration
}

// Authenticate checks user's password and starts the connection's
// session; Identity.Close ends it.
func (s Sessions) Authenticate(ctx context.Context, user, passwd string, addr netip.Addr) (Identity, error) {
	a := s.Auth
	if err := a.Password(ctx, user, passwd, auth.MethodVNC, addr); err != nil {
		return Identity{}, err
	}
	token, _, err := a.Sessions.Start(user, addr, auth.MethodVNC, 0, time.Now())
	if err != nil {
		return Identity{}, err
	}
	done := a.Sessions.Context(token, time.Now())
	if done == nil { // ended already (the user changed in between)
		return Identity{}, auth.ErrForbidden
	}
	every := s.Touch
	if every <= 0 {
		every = time.Minute
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-done.Done():
				return
			case <-t.C:
				a.Sessions.Check(token, time.Now())
			}
		}
	}()
	return Identity{User: user, Role: a.Role(user), Done: done, Close: func() {
		stop()
		a.Sessions.End(token)
	}}, nil
}
