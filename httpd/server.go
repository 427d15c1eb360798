package httpd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"kvmd/auth"
)

// Config is what New needs. Zero durations and sizes take the defaults.
type Config struct {
	// Auth decides who each request is.
	Auth Authenticator
	// Tokens, when set, serves /api/auth/tokens: API tokens made and
	// revoked through the API.
	Tokens TokenStore
	// Users, when set, serves /api/auth/users (admin): the users file
	// edited from the web UI.
	Users UserStore
	// TwoFactor, when set, serves /api/auth/totp (admin): 2FA turned on
	// from the browser, and off; TwoFactorOn says whether it is on.
	TwoFactor   TwoFactorEnroller
	TwoFactorOn func() bool
	// Log receives server errors; AccessLog, when set, one line a request.
	Log       *slog.Logger
	AccessLog *slog.Logger
	// PeerAuth decides, for a request over a unix socket, whether the
	// connecting process may act without a password, and as whom.
	PeerAuth func(uid, gid uint32) (name string, ok bool)
	// TrustedProxies are the networks of reverse proxies whose forwarded
	// client address (X-Real-IP, X-Forwarded-For, Forwarded) is believed
	// over TCP; over the unix socket it always is (clientaddr.go).
	TrustedProxies []netip.Prefix

	// MaxConns bounds the connections open at once over every listener;
	// MaxConnsPerAddr those from one TCP client address (IPv6 by /64;
	// the unix socket and trusted proxies are exempt). 0: the defaults
	// (connlimit.go).
	MaxConns        int
	MaxConnsPerAddr int
	// Info, when set, serves GET /api/info.
	Info InfoSource
	// LogSource, when set, serves GET /api/log; without it the endpoint
	// answers LogReaderDisabledError, as kvmd does.
	LogSource LogSource
	// UI, when set, is the web UI's files (package web): its pages at /,
	// /logs and /login, its other files under /static/.
	UI fs.FS
	// Metrics, when set, serves GET /api/export/prometheus/metrics;
	// MetricsOpen serves it without authentication.
	Metrics     MetricsSource
	MetricsOpen bool
	// Devices, when set, serves kvmd's device endpoints: /api/ws, /atx,
	// /gpio, /hid, /msd, /streamer (devices.go).
	Devices *Devices
	// Diagnostics, when set, serves GET /api/diagnostics, the support
	// bundle (package diag), to administrators.
	Diagnostics DiagSource

	MaxBody           int64         // default 4 KiB
	ReadHeaderTimeout time.Duration // default 10 s
	BodyTimeout       time.Duration // default 10 s
	IdleTimeout       time.Duration // default 2 min
	ShutdownTimeout   time.Duration // default 10 s
}

// HandlerFunc is a handler that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

type route struct {
	methods map[string]HandlerFunc
	// roles is the least role each method needs; auth.RoleNone: public.
	roles map[string]auth.Role
	allow string
	// noPeer refuses unix-socket peer credentials: /auth/check, which
	// nginx's auth_request calls as the proxy's own user.
	noPeer bool
	// rawBody routes read their own request body, after authentication,
	// without the MaxBody limit and the BodyTimeout: an image upload
	// (HandleRaw).
	rawBody bool
}

// Server is kvmd's HTTP handler. Create it with New.
type Server struct {
	cfg      Config
	conns    *connTable
	routes   map[string]*route
	ui       map[string]*uiFile
	diagBusy chan struct{}
	done     chan struct{}
	doneOnce sync.Once
}

// New returns a Server with the authentication endpoints registered. Its
// error is for a Config.UI that cannot be read or lacks a page.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 10
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 2 * time.Minute
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, routes: map[string]*route{}, done: make(chan struct{}), diagBusy: make(chan struct{}, 1)}
	s.conns = newConnTable(cfg.MaxConns, cfg.MaxConnsPerAddr, s.trustedProxy)
	// The route table: every endpoint and the least role it needs
	// (auth.RoleNone: public). Routes added later by other files go
	// through Handle too, so TestRoleTable walks them all.
	s.Handle("POST", "/auth/login", auth.RoleNone, s.login)
	s.Handle("GET", "/auth/check", auth.RoleViewer, s.check)
	s.routes["/auth/check"].noPeer = true
	s.Handle("POST", "/auth/logout", auth.RoleViewer, s.logout)
	s.Handle("GET", "/auth/sessions", auth.RoleViewer, s.listSessions)
	s.Handle("DELETE", "/auth/sessions", auth.RoleViewer, s.endSessions)
	if cfg.Tokens != nil {
		s.Handle("GET", "/auth/tokens", auth.RoleViewer, s.listTokens)
		s.Handle("POST", "/auth/tokens", auth.RoleViewer, s.addToken)
		s.Handle("DELETE", "/auth/tokens", auth.RoleViewer, s.delToken)
	}
	if cfg.Users != nil {
		s.Handle("GET", "/auth/users", auth.RoleAdmin, s.listUsers)
		s.Handle("POST", "/auth/users", auth.RoleAdmin, s.addUser)
		s.Handle("PATCH", "/auth/users", auth.RoleAdmin, s.setUser)
		s.Handle("DELETE", "/auth/users", auth.RoleAdmin, s.delUser)
	}
	if cfg.TwoFactor != nil {
		s.Handle("GET", "/auth/totp", auth.RoleAdmin, s.totpState)
		s.Handle("POST", "/auth/totp/begin", auth.RoleAdmin, s.totpBegin)
		s.Handle("POST", "/auth/totp/confirm", auth.RoleAdmin, s.totpConfirm)
		s.Handle("DELETE", "/auth/totp", auth.RoleAdmin, s.totpDisable)
	}
	if cfg.Info != nil {
		s.Handle("GET", "/info", auth.RoleViewer, s.info)
	}
	s.Handle("GET", "/log", auth.RoleViewer, s.log)
	if cfg.Metrics != nil {
		role := auth.RoleViewer
		if cfg.MetricsOpen {
			role = auth.RoleNone
		}
		s.Handle("GET", "/export/prometheus/metrics", role, s.metrics)
	}
	s.registerDevices()
	if cfg.Diagnostics != nil {
		s.Handle("GET", "/diagnostics", auth.RoleAdmin, s.diagnostics)
	}
	if cfg.UI != nil {
		ui, err := loadUI(cfg.UI)
		if err != nil {
			return nil, err
		}
		s.ui = ui
	}
	return s, nil
}

// Handle registers h for method and path, for users of role and above
// (auth.RoleNone: anyone, unauthenticated). A user below role gets 403
// ForbiddenError before h runs. path is given without the /api prefix;
// the route answers both with and without it. GET routes answer HEAD
// too, for the same role.
func (s *Server) Handle(method, path string, role auth.Role, h HandlerFunc) {
	rt := s.routes[path]
	if rt == nil {
		rt = &route{methods: map[string]HandlerFunc{}, roles: map[string]auth.Role{}}
		s.routes[path] = rt
	}
	rt.methods[method] = h
	rt.roles[method] = role
	if method == http.MethodGet {
		rt.methods[http.MethodHead] = h
		rt.roles[http.MethodHead] = role
	}
	var allow []string
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		if rt.methods[m] != nil {
			allow = append(allow, m)
		}
	}
	rt.allow = strings.Join(allow, ", ")
}

// HandleRaw registers h as Handle does, for a route whose handler reads
// the request body itself, as a stream, once the request is authenticated
// and allowed: no MaxBody, no BodyTimeout, which the handler replaces
// with its own bounds.
func (s *Server) HandleRaw(method, path string, role auth.Role, h HandlerFunc) {
	s.Handle(method, path, role, h)
	s.routes[path].rawBody = true
}

// Done is closed when the server begins to shut down; handlers that stream
// for a long time stop when it is.
func (s *Server) Done() <-chan struct{} { return s.done }

// securityHeaders go on every reply: an API answer is never to be sniffed,
// framed, cached or given a referrer.
var securityHeaders = map[string][]string{
	"X-Content-Type-Options":       {"nosniff"},
	"X-Frame-Options":              {"DENY"},
	"Referrer-Policy":              {"no-referrer"},
	"Cache-Control":                {"no-store"},
	"Content-Security-Policy":      {"default-src 'none'; frame-ancestors 'none'"},
	"Cross-Origin-Resource-Policy": {"same-origin"},
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	for k, v := range securityHeaders {
		h[k] = v
	}
	if ci := connInfoFrom(r.Context()); ci != nil && ci.conn != nil {
		ci.conn.slot.busy()
		defer ci.conn.slot.done(ci.conn)
	}
	rec := &recorder{ResponseWriter: w}
	r = withClientAddr(r, s.findClientAddr(r))
	var id Identity
	if err := s.serve(rec, r, &id); err != nil {
		e := asError(err)
		if e.Status >= 500 && !e.logged {
			s.cfg.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		if rec.status == 0 {
			writeError(rec, e)
		} else if e.Status >= 500 || e.Err != nil {
			s.cfg.Log.Warn("error after the reply began", "path", r.URL.Path, "err", err)
		}
	}
	if s.cfg.AccessLog != nil {
		s.cfg.AccessLog.Info("http", "addr", addrString(s.clientAddr(r)), "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "bytes", rec.bytes, "user", id.User, "auth", string(id.Method),
			"dur", time.Since(start).Round(time.Microsecond))
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, id *Identity) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = internalError(fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	path := r.URL.Path
	if path == "/api" || strings.HasPrefix(path, "/api/") {
		path = path[len("/api"):]
	} else if f, public := s.uiRoute(path); f != nil {
		return s.serveUI(w, r, f, public, id)
	}
	rt := s.routes[path]
	if rt == nil {
		return errNotFound
	}
	h := rt.methods[r.Method]
	if h == nil {
		return methodNotAllowed(rt.allow)
	}
	if rt.rawBody {
		// The body is the handler's; one it leaves unread (an error,
		// authentication first) is not drained: the connection closes.
		defer func() {
			if err != nil {
				w.Header().Set("Connection", "close")
				_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			}
		}()
	} else if r.ContentLength > s.cfg.MaxBody {
		return errTooLarge
	}
	// Any body is read whole now, under the size limit and the body
	// deadline, whether or not the handler wants it: net/http would
	// otherwise drain an unread one after the handler, with neither.
	if !rt.rawBody && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		body, err := s.readBody(w, r)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
	if need := rt.roles[r.Method]; need != auth.RoleNone {
		who, err := s.authenticate(r, !rt.noPeer)
		*id = who
		if err != nil {
			return err
		}
		if who.Role < need {
			return roleError(who.Role, need)
		}
		if who.done != nil {
			// The request ends when its session or token does.
			ctx, cancel := context.WithCancel(r.Context())
			stop := context.AfterFunc(who.done, cancel)
			defer cancel()
			defer stop()
			r = r.WithContext(ctx)
		}
	}
	if err := checkQuery(r); err != nil {
		return err
	}
	return h(w, r)
}

// RouteRole is one row of the route table: a method and path (without
// /api) and the least role it needs.
type RouteRole struct {
	Method, Path string
	Role         auth.Role
}

// Routes returns the route table, sorted, HEAD rows left out.
func (s *Server) Routes() []RouteRole {
	var out []RouteRole
	for p, rt := range s.routes {
		for m, role := range rt.roles {
			if m != http.MethodHead {
				out = append(out, RouteRole{m, p, role})
			}
		}
	}
	slices.SortFunc(out, func(a, b RouteRole) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out
}

func roleError(have, need auth.Role) *Error {
	return &Error{Status: http.StatusForbidden, Name: "ForbiddenError",
		Msg: "Forbidden: this needs the " + need.String() + " role; yours is " + have.String()}
}

// Identity is who a request was authenticated as, and how.
type Identity struct {
	User   string
	Method auth.Method
	Role   auth.Role
	// Token is the session token when Method is auth.MethodCookie.
	Token string
	// Session is the session's id (cookie), APIToken the API token's
	// name (bearer).
	Session, APIToken string
	// done ends when the session or API token does.
	done context.Context
}

type identityKey struct{}

// IdentityFrom returns the identity of an authenticated request's context.
func IdentityFrom(ctx context.Context) Identity {
	if id, _ := ctx.Value(identityKey{}).(*Identity); id != nil {
		return *id
	}
	return Identity{}
}

// setIdentity records who a public request turned out to be (a login), for
// the access log.
func setIdentity(ctx context.Context, who Identity) {
	if id, _ := ctx.Value(identityKey{}).(*Identity); id != nil {
		*id = who
	}
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return "local"
	}
	return a.String()
}

// recorder notes the status and size of a reply for the access log and for
// knowing whether an error can still be written.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers flush through the recorder.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

var errBodyTimeout = errors.New("request body not received in time")
