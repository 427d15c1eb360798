package redfish

import (
	"errors"
	"net/http"
	"strings"

	"kvmd/auth"
)

// SessionServiceRes answers GET /redfish/v1/SessionService.
func (s *Service) SessionServiceRes(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Sessions == nil {
		return notFound("SessionService", "SessionService")
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"@odata.id": SessionService, "@odata.type": "#SessionService.v1_1_8.SessionService",
		"Id": "SessionService", "Name": "Session Service", "ServiceEnabled": true,
		"SessionTimeout": s.cfg.SessionTimeout, "Sessions": odata{SessionsPath},
	})
}

type sessionRes struct {
	ID          string `json:"@odata.id"`
	Type        string `json:"@odata.type"`
	Identity    string `json:"Id"`
	Name        string `json:"Name"`
	UserName    string `json:"UserName"`
	CreatedTime string `json:"CreatedTime,omitempty"`
}

func sessionPath(id string) string { return SessionsPath + "/" + id }

func newSessionRes(id, user string, created string) sessionRes {
	return sessionRes{ID: sessionPath(id), Type: "#Session.v1_3_0.Session", Identity: id,
		Name: "User Session", UserName: user, CreatedTime: created}
}

// whose is the user whose sessions the caller sees: its own; everyone's
// ("") for an admin, as GET /api/auth/sessions shows them.
func whose(c Caller) string {
	if c.Role >= auth.RoleAdmin {
		return ""
	}
	return c.User
}

// Sessions answers GET /redfish/v1/SessionService/Sessions.
func (s *Service) Sessions(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Sessions == nil {
		return notFound("SessionService", "SessionService")
	}
	var ids []string
	for _, si := range s.cfg.Sessions.List(whose(s.cfg.Caller(r.Context()))) {
		ids = append(ids, sessionPath(si.ID))
	}
	return writeJSON(w, http.StatusOK, newCollection(SessionsPath, "#SessionCollection.SessionCollection", "Session Collection", ids...))
}

// Session answers GET /redfish/v1/SessionService/Sessions/{id}: one's own
// session, anyone's for an admin; any other is not found.
func (s *Service) Session(w http.ResponseWriter, r *http.Request) error {
	si, err := s.findSession(r)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, newSessionRes(si.ID, si.User, si.Created.UTC().Format("2006-01-02T15:04:05Z")))
}

func (s *Service) findSession(r *http.Request) (auth.SessionInfo, error) {
	id := r.PathValue("id")
	if s.cfg.Sessions == nil {
		return auth.SessionInfo{}, notFound("SessionService", "SessionService")
	}
	for _, si := range s.cfg.Sessions.List(whose(s.cfg.Caller(r.Context()))) {
		if si.ID == id {
			return si, nil
		}
	}
	return auth.SessionInfo{}, notFound("Session", id)
}

// DeleteSession answers DELETE /redfish/v1/SessionService/Sessions/{id}:
// the session ends, and every request it has open with it.
func (s *Service) DeleteSession(w http.ResponseWriter, r *http.Request) error {
	c := s.cfg.Caller(r.Context())
	id := r.PathValue("id")
	if s.cfg.Sessions == nil || !s.cfg.Sessions.End(id, whose(c), c) {
		return notFound("Session", id)
	}
	return noContent(w)
}

// CreateSession answers POST /redfish/v1/SessionService/Sessions
// {"UserName", "Password"}: a login, as POST /api/auth/login is, whose
// session token is the X-Auth-Token header of the answer and whose
// resource is its Location. It needs no credential but the body's.
func (s *Service) CreateSession(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Sessions == nil {
		return notFound("SessionService", "SessionService")
	}
	obj, err := readObject(r)
	if err != nil {
		return err
	}
	var user, passwd string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"UserName", &user}, {"Password", &passwd}} {
		v, ok, err := stringParam(obj, "Session creation", f.name)
		if err != nil {
			// Never the value: it may be the password.
			return &Error{Status: http.StatusBadRequest, ID: "PropertyValueTypeError", Args: []string{"", f.name},
				Msg: "The property " + f.name + " must be a string."}
		}
		if !ok {
			return &Error{Status: http.StatusBadRequest, ID: "CreateFailedMissingReqProperties", Args: []string{f.name},
				Msg: "A session needs the property " + f.name + "."}
		}
		*f.dst = v
	}
	user = strings.TrimSpace(user)
	if auth.ValidUser(user) != nil || auth.ValidPasswd(passwd) != nil {
		return loginRefused(nil)
	}
	c := s.cfg.Caller(r.Context())
	token, id, err := s.cfg.Sessions.Login(r.Context(), user, passwd, c.Addr)
	if err != nil {
		return loginError(err)
	}
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", sessionPath(id))
	return writeJSON(w, http.StatusCreated, newSessionRes(id, user, ""))
}

func loginRefused(cause error) *Error {
	return &Error{Status: http.StatusUnauthorized, ID: "NoValidSession", Err: cause,
		Msg: "Wrong user name, password or 2FA code.", Resolution: "Check the credentials and try again."}
}

// loginError maps the authenticator's refusals of a login.
func loginError(err error) *Error {
	var rl *auth.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return &Error{Status: http.StatusTooManyRequests, ID: "ServiceTemporarilyUnavailable", Args: []string{""},
			Msg: "Too many failed logins from this address; wait before trying again.", RetryAfter: rl.Wait, Err: err}
	case errors.Is(err, auth.ErrTooManySessions):
		return &Error{Status: http.StatusServiceUnavailable, ID: "SessionLimitExceeded", Err: err,
			Msg: "Too many sessions are open; end one or try again later."}
	case errors.Is(err, auth.ErrUnavailable):
		return &Error{Status: http.StatusServiceUnavailable, ID: "ServiceTemporarilyUnavailable", Args: []string{""}, Err: err,
			Msg: "The password could not be checked now; try again later."}
	}
	return loginRefused(err)
}
