package httpd

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"

	"kvmd/auth"
	"kvmd/redfish"
)

// The Redfish service (package redfish) is rows of the route table like
// every other route: its roles are those of the matching API routes
// (/api/atx/power, /api/msd/*, /api/auth/sessions), its authentication
// the API's, with a session's token also taken from X-Auth-Token
// (authn.go). What differs is the answer: every error on a /redfish path,
// the wrapper's own (authentication, roles, body limits, unknown paths)
// included, is Redfish's error object (writeRedfishError), and a path may
// end with a slash (DSP0266: /redfish/v1/ is the root).

// redfishRoute is a row's handler for a method of redfish.Service.
func redfishRoute(h redfish.Handler) routeHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		return h(s.redfish, w, r)
	}
}

// isRedfish says whether path (without /api) is the Redfish service's.
func isRedfish(path string) bool {
	return path == "/redfish" || strings.HasPrefix(path, "/redfish/")
}

// newRedfish makes the Redfish service of cfg, its sessions and callers
// the server's.
func (s *Server) newRedfish(cfg redfish.Config) *redfish.Service {
	cfg.Sessions = redfishSessions{s}
	cfg.Caller = func(ctx context.Context) redfish.Caller {
		id := IdentityFrom(ctx)
		c := redfish.Caller{User: id.User, Role: id.Role, Session: id.Session, Method: id.Method}
		if q := requestFrom(ctx); q != nil {
			c.Addr = q.addr
		}
		return c
	}
	if cfg.Log == nil {
		cfg.Log = s.cfg.Log
	}
	return redfish.New(cfg)
}

// redfishSessions are the daemon's sessions as the Redfish session
// service sees them.
type redfishSessions struct{ s *Server }

func (rs redfishSessions) Login(ctx context.Context, user, passwd string, addr netip.Addr) (string, string, error) {
	a := rs.s.cfg.Auth
	token, _, err := a.Login(ctx, user, passwd, 0, addr)
	if err != nil {
		return "", "", err
	}
	p, err := a.Session(token, addr)
	if err != nil {
		return "", "", err
	}
	return token, p.Session, nil
}

func (rs redfishSessions) List(user string) []auth.SessionInfo {
	return rs.s.cfg.Auth.SessionList(user)
}

func (rs redfishSessions) End(id, owner string, by redfish.Caller) bool {
	return rs.s.cfg.Auth.EndSession(id, owner, by.User, by.Method, by.Addr)
}

// writeRedfishError answers err on a Redfish path: a handler's
// *redfish.Error as it is, the wrapper's envelope errors as Redfish's. A
// wrong credential (403 ForbiddenError on the API) is Redfish's 401, which
// the spec gives to credentials that are missing or invalid; 403 is a
// role's.
func writeRedfishError(w http.ResponseWriter, err error) {
	var re *redfish.Error
	if !errors.As(err, &re) {
		e := asError(err)
		re = redfish.FromStatus(e.Status, e.Msg)
		switch {
		case errors.Is(err, errForbidden):
			re = redfish.FromStatus(http.StatusUnauthorized, e.Msg)
		case errors.Is(err, errNotFound):
			re.Msg = "There is no Redfish resource at this path."
		}
		re.RetryAfter, re.Allow = e.RetryAfter, e.Allow
	}
	redfish.WriteError(w, re)
}

// redfishAsError is a handler's Redfish error as the wrapper logs it:
// refusals (4xx) at info, at a bounded rate; faults as errors.
func redfishAsError(re *redfish.Error) *Error {
	return &Error{Status: re.Status, Name: "Redfish." + re.ID, Msg: re.Msg, Err: re.Err, Expected: re.Status < 500}
}

// findRedfish finds the rows of a Redfish path that no row names as it is
// (DSP0266): with a trailing slash, the same resource; with a last element
// that is a row's {id}, that row, the element its path value "id".
func (s *Server) findRedfish(r *http.Request) *pathRoutes {
	path := r.URL.Path
	if trimmed := strings.TrimSuffix(path, "/"); trimmed != path && trimmed != "" {
		if p := s.routes.paths[trimmed]; p != nil {
			return p
		}
		path = trimmed
	}
	i := strings.LastIndexByte(path, '/')
	if i <= 0 || i == len(path)-1 {
		return nil
	}
	p := s.routes.paths[path[:i]+"/{id}"]
	if p != nil {
		r.SetPathValue("id", path[i+1:])
	}
	return p
}
