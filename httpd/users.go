package httpd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"kvmd/auth"
)

// UserStore edits the users file for /api/auth/users: package auth's
// *Store.
type UserStore interface {
	List() ([]auth.UserInfo, error)
	Set(user string, c auth.UserChange) (revoked int, err error)
	Delete(user string) error
}

// listUsers answers GET /api/auth/users (admin): every user of the users
// file and its role. Never a hash.
func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Users.List()
	if err != nil {
		return internalError(err)
	}
	if list == nil {
		list = []auth.UserInfo{}
	}
	return WriteJSON(w, map[string]any{"users": list})
}

// userBody is the JSON body of POST and PATCH /api/auth/users.
type userBody struct {
	Name   string `json:"name"`
	Passwd string `json:"passwd"`
	Role   string `json:"role"`
	// RevokeTokens, with a new passwd (PATCH), revokes every API token
	// of the user too: after a compromise the password alone is not
	// enough, and tokens are meant to survive a routine change.
	RevokeTokens bool `json:"revoke_tokens"`
}

// checkNewPasswd validates a password about to be set (not empty, at most
// bcrypt's 72 bytes), naming the limit.
func checkNewPasswd(param, passwd string) error {
	err := auth.ValidNewPasswd(passwd)
	if errors.Is(err, auth.ErrPasswdTooLong) {
		return passwdTooLong(param)
	}
	if err != nil {
		return BadParam(param, err.Error())
	}
	return nil
}

func passwdTooLong(param string) *Error {
	return BadParam(param, fmt.Sprintf("longer than %d bytes, the most a bcrypt hash keeps", auth.MaxNewPasswdLen))
}

func readUserBody(r *http.Request) (userBody, auth.Role, error) {
	var b userBody
	data, err := requestBody(r)
	if err != nil {
		return b, 0, BadRequest("Request body could not be read", err)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, 0, BadRequest("Malformed JSON body: an object with name, and passwd and/or role, is expected", err)
	}
	name, err := checkUser("name", b.Name)
	if err != nil {
		return b, 0, err
	}
	b.Name = name
	if b.Passwd != "" {
		if err := checkNewPasswd("passwd", b.Passwd); err != nil {
			return b, 0, err
		}
	}
	var role auth.Role
	if b.Role != "" {
		if role, err = auth.ParseRole(b.Role); err != nil {
			return b, 0, BadParam("role", "not admin, operator or viewer")
		}
	}
	return b, role, nil
}

// addUser answers POST /api/auth/users (admin): a new user with a
// password and a role (default viewer: the least, for a user made in a
// browser).
func (s *Server) addUser(w http.ResponseWriter, r *http.Request) error {
	b, role, err := readUserBody(r)
	if err != nil {
		return err
	}
	if b.Passwd == "" {
		return BadParam("passwd", "a new user needs a password")
	}
	if b.RevokeTokens {
		return BadParam("revoke_tokens", "a new user has no tokens")
	}
	if role == auth.RoleNone {
		role = auth.RoleViewer
	}
	by := s.actor(r, IdentityFrom(r.Context()))
	_, err = s.cfg.Users.Set(b.Name, auth.UserChange{Passwd: b.Passwd, Role: role, Create: true, By: &by})
	if errors.Is(err, auth.ErrUserExists) {
		return BadParam("name", "the user exists")
	}
	if err != nil {
		return userStoreError(err)
	}
	s.auditUser(r, "user added", b.Name, "role", role.String())
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// setUser answers PATCH /api/auth/users (admin): a new password (its
// sessions end; with revoke_tokens its API tokens are revoked too), a new
// role, or both. An admin cannot change its own role: the last admin must
// not lock everyone out by a slip.
func (s *Server) setUser(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	b, role, err := readUserBody(r)
	if err != nil {
		return err
	}
	if b.Passwd == "" && role == auth.RoleNone {
		return BadParam("passwd", "give a new passwd, a role, or both")
	}
	if b.RevokeTokens && b.Passwd == "" {
		return BadParam("revoke_tokens", "goes with a new passwd; revoke tokens one by one with DELETE /api/auth/tokens")
	}
	if b.RevokeTokens && s.cfg.Tokens == nil {
		return BadParam("revoke_tokens", "this server does not manage API tokens; use kvmd user set --revoke-tokens")
	}
	if role != auth.RoleNone && b.Name == id.User && role != auth.RoleAdmin {
		return BadParam("role", "you cannot take the admin role from yourself")
	}
	// The password and the revocation are one change of the credential
	// files: no crash leaves the old tokens under a new password.
	by := s.actor(r, id)
	revoked, err := s.cfg.Users.Set(b.Name, auth.UserChange{Passwd: b.Passwd, Role: role, RevokeTokens: b.RevokeTokens, By: &by})
	if errors.Is(err, auth.ErrNoUser) {
		return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such user"}
	}
	if err != nil {
		return userStoreError(err)
	}
	if b.Passwd == "" {
		writeBody(w, http.StatusOK, okEmpty)
		return nil
	}
	if b.RevokeTokens {
		s.auditUser(r, "tokens revoked", b.Name, "count", revoked)
	}
	s.auditUser(r, "password reset", b.Name)
	return WriteJSON(w, map[string]int{"tokens_revoked": revoked})
}

// delUser answers DELETE /api/auth/users?name=NAME (admin): the user, its
// role and tokens go; its sessions and open requests end.
func (s *Server) delUser(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	name, err := checkUser("name", query(r).Get("name"))
	if err != nil {
		return err
	}
	if name == id.User {
		return BadParam("name", "you cannot remove yourself")
	}
	err = s.cfg.Users.Delete(name)
	if errors.Is(err, auth.ErrNoUser) {
		return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such user"}
	}
	if err != nil {
		return userStoreError(err)
	}
	s.auditUser(r, "user removed", name)
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// userStoreError answers a failed change of a user: a password that
// cannot be hashed is the caller's (400, naming the limit); the last admin
// kept (the change is checked under the
// credential store's lock, so two admins demoting each other at once
// cannot both succeed), or a file the daemon may not write.
func userStoreError(err error) error {
	if errors.Is(err, auth.ErrPasswdTooLong) {
		return passwdTooLong("passwd")
	}
	if errors.Is(err, auth.ErrLastAdmin) {
		return &Error{Status: http.StatusBadRequest, Name: "LastAdminError",
			Msg: "That would leave no admin: give another user the admin role first"}
	}
	return tokensFileError(err)
}

// auditUser logs a user management event: who, from where, how.
func (s *Server) auditUser(r *http.Request, msg, user string, extra ...any) {
	id := IdentityFrom(r.Context())
	args := append([]any{"user", user, "by", id.User, "method", string(id.Method), "addr", addrString(s.clientAddr(r))}, extra...)
	s.cfg.Log.Info(msg, args...)
}
