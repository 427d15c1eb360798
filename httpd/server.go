package httpd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"kvmd/auth"
	"kvmd/events"
	"kvmd/internal/slogtext"
	"kvmd/redfish"
	"kvmd/subsystem"
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
	// MaxWSPerUser bounds the WebSockets (/api/ws) one user holds at
	// once; LogFollowers is --log-followers, the log follows the
	// LogSource serves at once, of which one user may hold a quarter.
	// Ordinary users together keep a share of MaxConns and of
	// LogFollowers free for admins and logins (shares.go). 0: the
	// defaults.
	MaxWSPerUser int
	LogFollowers int
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
	// Redfish, when set, serves DMTF Redfish at /redfish (redfish.go):
	// its power, virtual media and the rest; its sessions and callers
	// are the server's.
	Redfish *redfish.Config

	MaxBody int64 // default 4 KiB
	// MaxBodies bounds the bytes held at once in request bodies larger
	// than MaxBody (a print's text), of which users below admin hold
	// three quarters (bodies.go); default DefaultMaxBodies.
	MaxBodies         int64
	ReadHeaderTimeout time.Duration // default 10 s
	BodyTimeout       time.Duration // default 10 s
	IdleTimeout       time.Duration // default 2 min
	ShutdownTimeout   time.Duration // default 10 s
}

// HandlerFunc is a handler that returns its error instead of writing it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Server is kvmd's HTTP handler. Create it with New.
type Server struct {
	cfg   Config
	conns *connTable
	// routes are the rows of the route table (routes.go) this Server
	// serves.
	routes routeSet
	ui     map[string]*uiFile
	// pages are the web UI's pages (uiPages) and pageFiles their files,
	// held here rather than read from the package's variables, which are
	// made from the route table whose rows name the pages' handlers.
	pages     map[string]uiPageFile
	pageFiles map[string]bool
	diagBusy  chan struct{}
	// redfish is the Redfish service of Config.Redfish.
	redfish  *redfish.Service
	refusals refusals
	done     chan struct{}
	// streams shares out the requests that hold a connection for long
	// (shares.go): WebSockets, log follows, video streams, snapshots,
	// VNC connections, WebRTC peers.
	streams                                                    *streams
	wsKind, logKind, videoKind, snapshotKind, vncKind, rtcKind streamKind
	// bodies is the budget of the bytes held in large request bodies.
	bodies *bodies
	// base is every request's parent context (http.Server.BaseContext):
	// shutdown cancels it right after closing done, which ends the
	// streams (log follows, WebSockets, bundles) without a goroutine per
	// request watching done.
	base       context.Context
	cancelBase context.CancelFunc
	doneOnce   sync.Once
}

// New returns a Server serving the routes of the route table (routes.go)
// that cfg turns on. Its error is for a route table that cannot be served
// (ErrDuplicateRoute) and a Config.UI that cannot be read or lacks a page.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 10
	}
	if cfg.MaxBodies <= 0 {
		cfg.MaxBodies = DefaultMaxBodies
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
	if cfg.Devices != nil && cfg.Devices.Events == nil {
		cfg.Devices.Events = &events.Hub{}
	}
	if cfg.MaxWSPerUser <= 0 {
		cfg.MaxWSPerUser = DefaultMaxWSPerUser
	}
	if cfg.LogFollowers <= 0 {
		cfg.LogFollowers = DefaultLogFollowers
	}
	s := &Server{cfg: cfg, routes: newRouteSet(), done: make(chan struct{}), diagBusy: make(chan struct{}, 1)}
	s.conns = newConnTable(cfg.MaxConns, cfg.MaxConnsPerAddr, s.trustedProxy, cfg.Log)
	s.streams = newStreams(s.conns.max, cfg.Log)
	s.bodies = &bodies{max: cfg.MaxBodies}
	s.wsKind = streamKind{name: "WebSockets", perUser: cfg.MaxWSPerUser}
	s.videoKind = streamKind{name: "video streams", perUser: DefaultVideoPerUser}
	s.snapshotKind = streamKind{name: "snapshots", perUser: DefaultSnapshotsPerUser}
	s.logKind = streamKind{name: "log follows", perUser: max(cfg.LogFollowers/4, 1), max: cfg.LogFollowers}
	s.vncKind = streamKind{name: "VNC connections", perUser: DefaultVNCPerUser}
	if cfg.LogFollowers >= 2 {
		s.logKind.reserve = max(cfg.LogFollowers/5, 1)
	}
	if cfg.Devices != nil && cfg.Devices.WebRTC != nil {
		// WebRTC peers: half the peers for one user, a fifth kept for
		// admins (the manager's own bound refuses beyond MaxPeers).
		n := cfg.Devices.WebRTC.MaxPeers()
		s.rtcKind = streamKind{name: "WebRTC peers", perUser: max(n/2, 1), max: n}
		if n >= 2 {
			s.rtcKind.reserve = max(n/5, 1)
		}
	}
	s.refusals = refusals{log: cfg.Log, now: time.Now}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	if cfg.Redfish != nil {
		s.redfish = s.newRedfish(*cfg.Redfish)
	}
	var subs []subsystem.Subsystem
	if cfg.Devices != nil {
		subs = cfg.Devices.Subsystems
	}
	if err := s.addRoutes(routeTable, cfg.features(), subs); err != nil {
		return nil, err
	}
	if cfg.UI != nil {
		ui, skipped, err := loadUI(cfg.UI)
		if err != nil {
			return nil, err
		}
		for page, err := range skipped {
			cfg.Log.Warn("web UI page served with its scripts as they are", "page", page, "err", err)
		}
		s.ui, s.pages, s.pageFiles = ui, uiPages, pageFiles
	}
	return s, nil
}

// Done is closed when the server begins to shut down; handlers that stream
// for a long time stop when it is.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ci := connInfoFrom(r.Context())
	viaConn := ci != nil && ci.conn != nil
	setSecurityHeaders(w.Header(), viaConn)
	if viaConn {
		ci.conn.busy()
		defer ci.conn.done()
	}
	q := &request{Context: r.Context(), rec: recorder{ResponseWriter: w}}
	q.addr = s.findClientAddr(r, ci)
	if ci != nil && q.addr == ci.peer && ci.peerText != "" {
		q.addrText = ci.peerText
	}
	r = r.WithContext(q)
	rec := &q.rec
	if err := s.serve(rec, r, q); err != nil {
		var e *Error
		var re *redfish.Error
		if errors.As(err, &re) {
			e = redfishAsError(re)
		} else {
			e = asError(err)
		}
		switch {
		case e.logged:
		case errors.Is(err, context.Canceled) && s.base.Err() != nil:
			// Cut by the shutdown, which is logged once.
		case expected(e):
			s.refusals.note(r, e)
		default:
			s.cfg.Log.Error("request failed", "method", r.Method, "path", logPath(r.URL.Path), "err", err)
		}
		if rec.status == 0 && isRedfish(r.URL.Path) {
			writeRedfishError(rec, err)
		} else if rec.status == 0 {
			writeError(rec, e)
		} else if e.Status >= 500 || e.Err != nil {
			s.cfg.Log.Warn("error after the reply began", "path", logPath(r.URL.Path), "err", err)
		}
	}
	q.release()
	if s.cfg.AccessLog != nil {
		s.accessLine(q, r, start)
	}
}

// accessLine logs the request's line. A handler that takes its
// attributes as text (slogtext's, the daemon's outside systemd) gets them
// so: the keys are the same on every line and are written as they are,
// the values as slogtext writes them. Any other gets a record made here,
// as slog's documentation shows for wrappers, rather than through
// Logger.Info, which would also look up its caller (unused) and box each
// value.
func (s *Server) accessLine(q *request, r *http.Request, start time.Time) {
	h := s.cfg.AccessLog.Handler()
	if !h.Enabled(q.Context, slog.LevelInfo) {
		return
	}
	now := time.Now()
	addr := q.addrText
	if addr == "" {
		addr = addrString(q.addr)
	}
	path := r.URL.Path
	if !q.routed {
		path = logPath(path)
	}
	user, method, dur := auth.LogName(q.id.User), string(q.id.Method), now.Sub(start).Round(time.Microsecond)
	if th, ok := h.(slogtext.TextHandler); ok {
		bp := lineBufs.Get().(*[]byte)
		b := slogtext.AppendString(append((*bp)[:0], " addr="...), addr)
		b = slogtext.AppendString(append(b, " method="...), r.Method)
		b = slogtext.AppendString(append(b, " path="...), path)
		b = strconv.AppendInt(append(b, " status="...), int64(q.rec.status), 10)
		b = strconv.AppendInt(append(b, " bytes="...), q.rec.bytes, 10)
		b = slogtext.AppendString(append(b, " user="...), user)
		b = slogtext.AppendString(append(b, " auth="...), method)
		b = append(append(b, " dur="...), dur.String()...) // unquoted, as slog writes a duration
		done, _ := th.HandleText(now, slog.LevelInfo, "http", b)
		if cap(b) <= 4<<10 {
			*bp = b
			lineBufs.Put(bp)
		}
		if done {
			return
		}
	}
	rec := slog.NewRecord(now, slog.LevelInfo, "http", 0)
	rec.AddAttrs(slog.String("addr", addr), slog.String("method", r.Method), slog.String("path", path),
		slog.Int("status", q.rec.status), slog.Int64("bytes", q.rec.bytes), slog.String("user", user),
		slog.String("auth", method), slog.Duration("dur", dur))
	_ = h.Handle(q.Context, rec)
}

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, q *request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = internalError(fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}
	}()
	p, prefix := s.routes.find(r.URL.Path)
	if p == nil && isRedfish(r.URL.Path) {
		p = s.findRedfish(r)
	}
	if p == nil {
		return errNotFound
	}
	// The access log shows a row's path as it is; a path below a prefix
	// row is the client's own (logPath).
	q.routed = !prefix
	rt := p.methods[r.Method]
	if rt == nil {
		return methodNotAllowed(p.allow)
	}
	if rt.at == page || rt.at == below {
		return s.servePage(w, r, q, rt)
	}
	rule := s.bodyRuleOf(rt)
	hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if hasBody && !rule.raw && r.ContentLength > rule.limit {
		return errTooLarge
	}
	read := false
	if hasBody || rule.raw {
		// A body is read only once the request is let in (bodies.go); one
		// answered before it is read (refused, or an error of a handler
		// that reads its own) is not drained: the connection closes.
		defer func() {
			if err != nil && !read {
				w.Header().Set("Connection", "close")
				_ = http.NewResponseController(w).SetReadDeadline(time.Now())
			}
		}()
	}
	if rt.role != auth.RoleNone {
		who, err := s.authenticate(r, rt.creds&viaPeer != 0)
		q.id = who
		if err != nil {
			return err
		}
		if who.Method == auth.MethodToken && rt.creds&viaToken == 0 {
			return errTokenRefused
		}
		if who.Role < rt.role {
			return roleError(who.Role, rt.role)
		}
		// The request ends when its session, token or the user's
		// password does (request.Done).
		q.end = who.done
	}
	if err := checkQuery(r, q); err != nil {
		return err
	}
	if hasBody && !rule.raw {
		// Read whole now, under the size limit, the budget and the body
		// deadline, whether or not the handler wants it: net/http would
		// otherwise drain an unread one after the handler, with none.
		body, release, err := s.takeBody(w, r, q.id, rule)
		read = true // or refused, and the connection closes (takeBody)
		if err != nil {
			return err
		}
		defer release()
		q.body = body
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return rt.handler(s, w, r)
}

// servePage answers a row of the web UI (page, below): one that needs a
// session, asked for by a browser without one, sends it to the login page
// (toLogin) rather than answering an error. A page takes no parameters
// and no body.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request, q *request, rt *route) error {
	if rt.role != auth.RoleNone {
		who, err := s.authenticate(r, rt.creds&viaPeer != 0)
		q.id = who
		if err != nil {
			return s.toLogin(w, r)
		}
		if who.Role < rt.role {
			return roleError(who.Role, rt.role)
		}
	}
	return rt.handler(s, w, r)
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
	// done ends when the session or API token does, or for a password
	// when the user's entry or role changes.
	done context.Context
	// recheck, for a password of an external backend's user, asks again
	// whether it holds, every recheckEvery (auth.Principal.Recheck).
	recheck      func(context.Context) (auth.Role, error)
	recheckEvery time.Duration
}

// IdentityFrom returns the identity of an authenticated request's context.
func IdentityFrom(ctx context.Context) Identity {
	if q := requestFrom(ctx); q != nil {
		return q.id
	}
	return Identity{}
}

// setIdentity records who a public request turned out to be (a login), for
// the access log.
func setIdentity(ctx context.Context, who Identity) {
	if q := requestFrom(ctx); q != nil {
		q.id = who
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
		sealSecurityHeaders(r.Header())
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		sealSecurityHeaders(r.Header())
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers flush through the recorder.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
		sealSecurityHeaders(r.Header())
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

var errBodyTimeout = errors.New("request body not received in time")
