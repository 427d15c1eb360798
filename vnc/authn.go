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
// user, so that an admin sees it in the session list (method vnc) and can
// end it, and it ends when the session's lifetime is over. It also ends
// with the password (auth.Principal): when the user's password or role
// changes or the user is deleted, and, for a user of an external backend,
// when the backend no longer takes the password or gives another role
// (asked every Principal.RecheckEvery, as a long HTTP request asks).
// While the connection lasts, the session is kept from going idle.
type Sessions struct {
	Auth *auth.Authenticator
	// Touch is how often the session is marked used (default a minute).
	Touch time.Duration
}

// Authenticate checks user's password and starts the connection's
// session; Identity.Close ends it.
func (s Sessions) Authenticate(ctx context.Context, user, passwd string, addr netip.Addr) (Identity, error) {
	a := s.Auth
	p, err := a.Authenticate(ctx, user, passwd, auth.MethodVNC, addr)
	if err != nil {
		return Identity{}, err
	}
	token, _, err := a.Sessions.Start(user, addr, auth.MethodVNC, 0, time.Now())
	if err != nil {
		return Identity{}, err
	}
	session := a.Sessions.Context(token, time.Now())
	if session == nil { // ended already (the user changed in between)
		return Identity{}, auth.ErrForbidden
	}
	done, end := context.WithCancel(session)
	stopDone := context.AfterFunc(p.Done, end)
	every := s.Touch
	if every <= 0 {
		every = time.Minute
	}
	go func() {
		touch := time.NewTicker(every)
		defer touch.Stop()
		var recheck <-chan time.Time
		if p.Recheck != nil && p.RecheckEvery > 0 {
			t := time.NewTicker(p.RecheckEvery)
			defer t.Stop()
			recheck = t.C
		}
		for {
			select {
			case <-done.Done():
				return
			case <-touch.C:
				a.Sessions.Check(token, time.Now())
			case <-recheck:
				if role, err := p.Recheck(done); err != nil || role != p.Role {
					end()
					return
				}
			}
		}
	}()
	return Identity{User: user, Role: p.Role, Done: done, Close: func() {
		stopDone()
		end()
		a.Sessions.End(token)
	}}, nil
}
