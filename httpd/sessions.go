package httpd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"kvmd/auth"
)

// TokenStore makes, lists and revokes API tokens: package auth's *Tokens.
type TokenStore interface {
	List(user string) []auth.TokenInfo
	Add(user, name string, role auth.Role, expires, now time.Time, by auth.Actor) (string, error)
	Delete(user, name string, by auth.Actor) error
}

// sessionView is a session as GET /api/auth/sessions shows it: Current
// marks the one the request came with.
type sessionView struct {
	auth.SessionInfo
	Current bool `json:"current"`
}

// whose returns the user whose sessions or tokens a request is about: the
// user= parameter for an admin (every user when absent and all is set),
// the caller itself for everyone else. A non-admin naming another user is
// refused. The name is canonical, as everywhere (checkUser).
func whose(r *http.Request, id Identity, all bool) (string, error) {
	q := query(r)
	user, named := q.Get("user"), q.Has("user")
	if named {
		var err error
		if user, err = checkUser("user", user); err != nil {
			return "", err
		}
	}
	if id.Role >= auth.RoleAdmin {
		if !named && all {
			return "", nil
		}
		if !named {
			return id.User, nil
		}
		return user, nil
	}
	if named && user != id.User {
		return "", roleError(id.Role, auth.RoleAdmin)
	}
	return id.User, nil
}

func (s *Server) actor(r *http.Request, id Identity) auth.Actor {
	return auth.Actor{User: id.User, Method: id.Method, Addr: s.clientAddr(r)}
}

// listSessions answers GET /api/auth/sessions: the caller's own sessions,
// everyone's for an admin (or one user's with user=).
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	user, err := whose(r, id, true)
	if err != nil {
		return err
	}
	list := s.cfg.Auth.SessionList(user)
	out := make([]sessionView, len(list))
	for i, si := range list {
		out[i] = sessionView{SessionInfo: si, Current: id.Session != "" && si.ID == id.Session}
	}
	return WriteJSON(w, map[string]any{"sessions": out})
}

// endSessions answers DELETE /api/auth/sessions?id=ID (one session) or
// ?user=NAME (all of a user's): one's own, anyone's for an admin. Ending a
// session ends its open requests too (log follows, WebSockets).
func (s *Server) endSessions(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	q := query(r)
	addr := s.clientAddr(r)
	if sid := q.Get("id"); sid != "" {
		owner := id.User
		if id.Role >= auth.RoleAdmin {
			owner = ""
		}
		if !s.cfg.Auth.EndSession(sid, owner, id.User, id.Method, addr) {
			return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such session"}
		}
		return WriteJSON(w, map[string]int{"ended": 1})
	}
	if !q.Has("user") {
		return BadParam("id", "give id=SESSION, or user=NAME to end all of a user's sessions")
	}
	user, err := whose(r, id, false)
	if err != nil {
		return err
	}
	n := s.cfg.Auth.EndSessions(user, id.User, id.Method, addr)
	return WriteJSON(w, map[string]int{"ended": n})
}

// listTokens answers GET /api/auth/tokens: the caller's API tokens,
// everyone's for an admin. Never a secret.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	user, err := whose(r, id, true)
	if err != nil {
		return err
	}
	list := s.cfg.Tokens.List(user)
	if list == nil {
		list = []auth.TokenInfo{}
	}
	return WriteJSON(w, map[string]any{"tokens": list})
}

// addToken answers POST /api/auth/tokens with a JSON body
// {"name": "ha", "role": "viewer", "expires": 86400, "user": "..."}: role
// defaults to the caller's and may not be above it, expires (seconds from
// now) to never, user (admin only) to the caller. The reply holds the
// token: the only time it is shown.
func (s *Server) addToken(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	body, err := requestBody(r) // no API token gets here: the route table refuses them
	if err != nil {
		return BadRequest("Request body could not be read", err)
	}
	var req struct {
		Name    string `json:"name"`
		Role    string `json:"role"`
		Expires uint64 `json:"expires"`
		User    string `json:"user"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return BadRequest("Malformed JSON body: an object with name, and optionally role, expires and user, is expected", err)
	}
	if err := auth.ValidTokenName(req.Name); err != nil {
		return BadParam("name", err.Error())
	}
	user := id.User
	if req.User != "" {
		if user, err = checkUser("user", req.User); err != nil {
			return err
		}
		if user != id.User && id.Role < auth.RoleAdmin {
			return roleError(id.Role, auth.RoleAdmin)
		}
	}
	// The token's role is at most the caller's, and at most its user's.
	ceiling := min(id.Role, s.cfg.Auth.Role(user))
	role := ceiling
	if req.Role != "" {
		if role, err = auth.ParseRole(req.Role); err != nil {
			return BadParam("role", "not admin, operator or viewer")
		}
		if role > ceiling {
			return roleError(ceiling, role)
		}
	}
	if req.Expires > maxExpire {
		return BadParam("expires", "more than "+strconv.FormatInt(maxExpire, 10)+" seconds")
	}
	now := time.Now()
	var expires time.Time
	if req.Expires > 0 {
		expires = now.Add(time.Duration(req.Expires) * time.Second)
	}
	secret, err := s.cfg.Tokens.Add(user, req.Name, role, expires, now, s.actor(r, id))
	if errors.Is(err, auth.ErrTokenExists) {
		return &Error{Status: http.StatusBadRequest, Name: "ValidatorError", Msg: "Invalid name: this user already has a token of that name"}
	}
	if errors.Is(err, auth.ErrTooManyTokens) {
		return &Error{Status: http.StatusBadRequest, Name: "TooManyTokensError",
			Msg: fmt.Sprintf("This user has %d API tokens, the most a user may have: revoke one first", auth.MaxTokensPerUser)}
	}
	if errors.Is(err, auth.ErrNoUser) && user != id.User {
		return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such user"}
	}
	if errors.Is(err, auth.ErrNoUser) || errors.Is(err, auth.ErrRoleTooHigh) {
		// The caller went, or the user lost the role, while the request
		// ran: the store checks both under its lock.
		return &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Msg: "Forbidden: the token's user is gone or has a lower role now"}
	}
	if err != nil {
		return tokensFileError(err)
	}
	reply := map[string]any{"user": user, "name": req.Name, "role": role.String(), "token": secret}
	if !expires.IsZero() {
		reply["expires"] = expires.UTC().Truncate(time.Second)
	}
	return WriteJSON(w, reply)
}

// delToken answers DELETE /api/auth/tokens?name=NAME[&user=USER]: the
// token is refused from the next request on, and the requests it has open
// end now.
func (s *Server) delToken(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	user, err := whose(r, id, false)
	if err != nil {
		return err
	}
	name := query(r).Get("name")
	if err := auth.ValidTokenName(name); err != nil {
		return BadParam("name", err.Error())
	}
	err = s.cfg.Tokens.Delete(user, name, s.actor(r, id))
	if errors.Is(err, auth.ErrNoToken) {
		return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such token"}
	}
	if err != nil {
		return tokensFileError(err)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// tokensFileError answers a tokens file the daemon may not write (the
// packaged service sees /etc read-only) with a 503 that says so: tokens
// are then made with kvmd token add.
func tokensFileError(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return NotNow("The tokens file cannot be written here; use kvmd token add|del", err)
	}
	return internalError(err)
}
