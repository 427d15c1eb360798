package httpd

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"kvmd/auth"
)

// Authenticator decides who a request is: package auth's *Authenticator.
// Its errors are auth's: auth.ErrForbidden, auth.ErrUnavailable (wrapping
// auth.ErrServiceUnavailable when the service behind it is down), and
// *auth.RateLimitedError; authError turns them into HTTP answers.
type Authenticator interface {
	// Password checks user's password (a 2FA code at its end when 2FA
	// is on), sent by method m from addr.
	Password(ctx context.Context, user, passwd string, m auth.Method, addr netip.Addr) error
	// Login checks the password and starts a session, its lifetime
	// shortened to expire when positive. It returns the session's token
	// and lifetime (0: none).
	Login(ctx context.Context, user, passwd string, expire time.Duration, addr netip.Addr) (token string, life time.Duration, err error)
	// Session returns who a session token that passed auth.ValidToken
	// lets in.
	Session(token string, addr netip.Addr) (auth.Principal, error)
	// Token returns who an API token that passed auth.ValidAPIToken
	// lets in.
	Token(secret string, addr netip.Addr) (auth.Principal, error)
	// Role returns the role of a user whose password was checked.
	Role(user string) auth.Role
	// SessionList lists the live sessions of user (everyone's for "").
	SessionList(user string) []auth.SessionInfo
	// EndSession ends session id if it is user's (anyone's for ""); by,
	// m and addr say who asked, for the log.
	EndSession(id, user, by string, m auth.Method, addr netip.Addr) bool
	// EndSessions ends every session of user.
	EndSessions(user, by string, m auth.Method, addr netip.Addr) int
	// Logout ends the session of token, if there is one.
	Logout(token, user string, addr netip.Addr)
	// Peer counts a request let in by its unix-socket peer credentials.
	Peer()
}

// authenticate finds the request's credentials in the order of the API
// contract. The first credential present decides; there is no fall-through.
// Unix-socket peer credentials count only when peerOK.
func (s *Server) authenticate(r *http.Request, peerOK bool) (Identity, error) {
	a := s.cfg.Auth
	addr := s.clientAddr(r)
	ctx := r.Context()

	if user := r.Header.Get("X-KVMD-User"); user != "" {
		user, err := checkUser("X-KVMD-User", user)
		if err != nil {
			return Identity{}, err
		}
		passwd := r.Header.Get("X-KVMD-Passwd")
		if err := checkPasswd("X-KVMD-Passwd", passwd); err != nil {
			return Identity{}, err
		}
		id := Identity{User: user, Method: auth.MethodHeader}
		if err := a.Password(ctx, user, passwd, auth.MethodHeader, addr); err != nil {
			return id, authError(err)
		}
		id.Role = a.Role(user)
		return id, nil
	}

	if token, present, err := sessionToken(r); present {
		if err != nil {
			return Identity{}, err
		}
		if err := crossOrigin.Check(r); err != nil {
			return Identity{}, errCrossOrigin
		}
		p, err := a.Session(token, addr)
		return Identity{User: p.User, Method: auth.MethodCookie, Role: p.Role, Token: token, Session: p.Session, done: p.Done}, authError(err)
	}

	h := r.Header.Get("Authorization")
	if len(h) >= 7 && strings.EqualFold(h[:7], "bearer ") {
		// Only kvmd's own API tokens: any other bearer credential is
		// no credential, as before tokens existed.
		if secret := strings.TrimSpace(h[7:]); auth.ValidAPIToken(secret) == nil {
			p, err := a.Token(secret, addr)
			return Identity{User: p.User, Method: auth.MethodToken, Role: p.Role, APIToken: p.Token, done: p.Done}, authError(err)
		}
		return Identity{}, errUnauthorized
	}
	if len(h) >= 6 && strings.EqualFold(h[:6], "basic ") {
		user, passwd, ok := parseBasic(h[6:])
		if !ok {
			return Identity{}, errUnauthorized
		}
		user, err := checkUser("user", user)
		if err != nil {
			return Identity{}, err
		}
		if err := checkPasswd("password", passwd); err != nil {
			return Identity{}, err
		}
		id := Identity{User: user, Method: auth.MethodBasic}
		if err := a.Password(ctx, user, passwd, auth.MethodBasic, addr); err != nil {
			return id, authError(err)
		}
		id.Role = a.Role(user)
		return id, nil
	}

	if ci := connInfoFrom(ctx); peerOK && ci != nil && ci.peerOK && !proxied(r.Header) {
		a.Peer()
		// A local process of root or the socket's group is trusted
		// with everything, as before roles.
		return Identity{User: ci.peerName, Method: auth.MethodPeer, Role: auth.RoleAdmin}, nil
	}
	return Identity{}, errUnauthorized
}

// crossOrigin refuses a state-changing request (any method but GET, HEAD
// and OPTIONS) that a browser says comes from another origin:
// Sec-Fetch-Site other than same-origin or none, or, from browsers that
// do not send it, an Origin whose host is not the request's Host. It
// guards the cookie only: a browser attaches the cookie to a request a
// page on another site makes, never header or Basic credentials (the
// latter only after the user typed them for this site, and the web UI
// does not use them). The login itself is public and takes no cookie: a
// form on another site may post to it (kvmd's documented recipe, see
// handlers.go).
var crossOrigin = http.NewCrossOriginProtection()

var errCrossOrigin = &Error{Status: http.StatusForbidden, Name: "ForbiddenError",
	Msg: "Cross-origin request refused: a session cookie works only from this device's own pages (origin)"}

// proxied tells a request forwarded by a local reverse proxy: peer
// credentials then belong to the proxy, not to the client.
func proxied(h http.Header) bool {
	return h.Get("X-Real-IP") != "" || h.Get("X-Forwarded-For") != "" || h.Get("Forwarded") != ""
}

// authError maps the authenticator's answers to HTTP errors.
func authError(err error) error {
	if err == nil {
		return nil
	}
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return tooManyRequests(rl.Wait)
	case errors.Is(err, auth.ErrForbidden):
		return errForbidden
	case errors.Is(err, auth.ErrTooManySessions):
		return NotNow("Too many sessions are open; try again later", err)
	case errors.Is(err, auth.ErrUnavailable):
		// The authenticator logs these itself, a line per burst.
		e := Unavailable("The request ended before its password could be checked", err)
		if errors.Is(err, auth.ErrServiceUnavailable) {
			e.Msg = "The authentication service is unavailable; try again later"
		}
		e.logged = true
		return e
	}
	return internalError(err)
}

// parseBasic decodes the credentials of a Basic Authorization header. The
// password is everything after the first colon, so it may hold colons.
func parseBasic(v string) (user, passwd string, ok bool) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || !utf8.Valid(raw) {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// sessionToken returns the auth_token cookie: present tells whether a
// non-empty one was sent, err whether it is malformed.
func sessionToken(r *http.Request) (token string, present bool, err error) {
	c, cerr := r.Cookie("auth_token")
	if cerr != nil || c.Value == "" {
		return "", false, nil
	}
	if auth.ValidToken(c.Value) != nil {
		return "", true, BadParam("auth_token", "not a session token")
	}
	return c.Value, true, nil
}

// checkUser validates a user name as kvmd does, surrounding blanks ignored.
func checkUser(param, user string) (string, error) {
	user = strings.TrimSpace(user)
	if err := auth.ValidUser(user); err != nil {
		return "", BadParam(param, err.Error())
	}
	return user, nil
}

func checkPasswd(param, passwd string) error {
	if err := auth.ValidPasswd(passwd); err != nil {
		return BadParam(param, err.Error())
	}
	return nil
}
