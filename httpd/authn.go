package httpd

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/netip"
	mimeheader "net/textproto" // (the package's tests have a type textproto)
	"os"
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
	// Authenticate checks user's password (a 2FA code at its end when
	// 2FA is on), sent by method m from addr, and returns who it lets
	// in: the role, and the context its requests end with.
	Authenticate(ctx context.Context, user, passwd string, m auth.Method, addr netip.Addr) (auth.Principal, error)
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

// Header names spelled as net/http keys them (textproto's canonical form):
// a lookup by another spelling (X-KVMD-User) makes the canonical one
// anew, an allocation on every request.
const (
	hdrUser   = "X-Kvmd-User"   // X-KVMD-User
	hdrPasswd = "X-Kvmd-Passwd" // X-KVMD-Passwd
	hdrRealIP = "X-Real-Ip"     // X-Real-IP
	// hdrAuthToken is Redfish's session header, X-Auth-Token.
	hdrAuthToken = "X-Auth-Token"
)

// authenticate finds the request's credentials in the order of the API
// contract. The first credential present decides; there is no fall-through.
// Unix-socket peer credentials count only when peerOK.
func (s *Server) authenticate(r *http.Request, peerOK bool) (Identity, error) {
	a := s.cfg.Auth
	addr := s.clientAddr(r)
	ctx := r.Context()

	if user := r.Header.Get(hdrUser); user != "" {
		user, err := checkUser("X-KVMD-User", user)
		if err != nil {
			return Identity{}, err
		}
		passwd := r.Header.Get(hdrPasswd)
		if err := checkPasswd("X-KVMD-Passwd", passwd); err != nil {
			return Identity{}, err
		}
		return s.password(ctx, user, passwd, auth.MethodHeader, addr)
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

	if token := r.Header.Get(hdrAuthToken); token != "" {
		// A session's token as Redfish clients send it (its session
		// service, redfish.go): the same sessions as the cookie's. A
		// header no browser attaches by itself, so no cross-origin check.
		if auth.ValidToken(token) != nil {
			return Identity{}, BadParam("X-Auth-Token", "not a session token")
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
		return s.password(ctx, user, passwd, auth.MethodBasic, addr)
	}

	if ci := connInfoFrom(ctx); peerOK && ci != nil && ci.peerOK && !proxied(r.Header) {
		a.Peer()
		// A local process of root or the socket's group is trusted
		// with everything, as before roles.
		return Identity{User: ci.peerName, Method: auth.MethodPeer, Role: auth.RoleAdmin}, nil
	}
	return Identity{}, errUnauthorized
}

// password is the identity of a password sent with the request (X-KVMD
// headers, Basic): its requests end when the user's entry or role changes
// (Principal.Done), and a long one of an external backend's user asks
// again whether the password still holds (holdStream).
func (s *Server) password(ctx context.Context, user, passwd string, m auth.Method, addr netip.Addr) (Identity, error) {
	p, err := s.cfg.Auth.Authenticate(ctx, user, passwd, m, addr)
	if err != nil {
		return Identity{User: user, Method: m}, authError(err)
	}
	return Identity{User: user, Method: m, Role: p.Role, done: p.Done, recheck: p.Recheck, recheckEvery: p.RecheckEvery}, nil
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
	return h.Get(hdrRealIP) != "" || h.Get("X-Forwarded-For") != "" || h.Get("Forwarded") != ""
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
	v, ok, valid := authCookie(r)
	if !ok || v == "" {
		return "", false, nil
	}
	if !valid {
		return "", true, BadParam("auth_token", "not a session token")
	}
	return v, true, nil
}

// authCookie returns the value of the auth_token cookie as
// r.Cookie("auth_token") does (the first valid one, its quotes taken
// off), without making a Cookie of every cookie the request has, as
// r.Cookie does on each request. More cookies than a browser sends, or a
// GODEBUG that changes net/http's limit on them, go to r.Cookie
// (FuzzSessionToken compares the two). valid tells whether the value is
// a session token (auth.ValidToken).
func authCookie(r *http.Request) (value string, ok, valid bool) {
	lines := r.Header["Cookie"]
	n := 0
	for _, line := range lines {
		n += strings.Count(line, ";") + 1
	}
	if n > maxCookiesScanned || cookieLimitSet {
		c, err := r.Cookie("auth_token")
		if err != nil {
			return "", false, false
		}
		return c.Value, true, auth.ValidToken(c.Value) == nil
	}
	for _, line := range lines {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			name, val, _ := strings.Cut(mimeheader.TrimString(part), "=")
			if mimeheader.TrimString(name) != "auth_token" {
				continue
			}
			if len(val) > 1 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			// A session token is a valid value: one pass over it
			// tells both.
			if auth.ValidToken(val) == nil {
				return val, true, true
			}
			if validCookieValue(val) {
				return val, true, false
			}
		}
	}
	return "", false, false
}

// maxCookiesScanned is more cookies than a browser sends to a KVM, and
// less than net/http's limit (3000; none are read beyond it).
const maxCookiesScanned = 64

// cookieLimitSet tells a GODEBUG setting of net/http's limit on cookies.
var cookieLimitSet = strings.Contains(os.Getenv("GODEBUG"), "httpcookiemaxnum")

// validCookieValue is net/http's test of a cookie's value (RFC 6265's
// cookie-octet, and a space or comma, which browsers send).
func validCookieValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b >= 0x7f || b == '"' || b == ';' || b == '\\' {
			return false
		}
	}
	return true
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
