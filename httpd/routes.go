package httpd

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kvmd/auth"
)

// routeTable is every API endpoint: its method and path (without /api), the
// least role it needs, which credentials besides a password or a session
// may call it, the part of Config it exists under, and its handler. It is
// the one place a route is added or its privilege changed, read as a whole
// in review, as tailscale's ipn/localapi keeps its handlers in one literal
// map and bmcweb its privileges in privilege_registry.hpp.
//
// New refuses a table with two rows for one method and path under any one
// Config (ErrDuplicateRoute); testdata/routes.golden pins the role, token
// and peer permission of every row (TestRouteTableGolden), and the role
// tables of docs/security.md are generated from it
// (TestDocsRouteTables). GET rows answer HEAD too.
var routeTable = []route{
	// Sessions and passwords.
	{"POST", "/auth/login", auth.RoleNone, 0, always, (*Server).login},
	{"GET", "/auth/check", auth.RoleViewer, noPeer, always, (*Server).check},
	{"POST", "/auth/logout", auth.RoleViewer, anyCred, always, (*Server).logout},
	{"GET", "/auth/sessions", auth.RoleViewer, anyCred, always, (*Server).listSessions},
	{"DELETE", "/auth/sessions", auth.RoleViewer, anyCred, always, (*Server).endSessions},

	// Credentials: a token reads them, as its role allows, and never
	// writes them (see noToken).
	{"GET", "/auth/tokens", auth.RoleViewer, anyCred, withTokens, (*Server).listTokens},
	{"POST", "/auth/tokens", auth.RoleViewer, noToken, withTokens, (*Server).addToken},
	{"DELETE", "/auth/tokens", auth.RoleViewer, noToken, withTokens, (*Server).delToken},
	{"GET", "/auth/users", auth.RoleAdmin, anyCred, withUsers, (*Server).listUsers},
	{"POST", "/auth/users", auth.RoleAdmin, noToken, withUsers, (*Server).addUser},
	{"PATCH", "/auth/users", auth.RoleAdmin, noToken, withUsers, (*Server).setUser},
	{"DELETE", "/auth/users", auth.RoleAdmin, noToken, withUsers, (*Server).delUser},
	// 2FA: without --totp-secret they say what to configure (twofactor.go).
	{"GET", "/auth/totp", auth.RoleAdmin, anyCred, always, (*Server).totpState},
	{"POST", "/auth/totp/begin", auth.RoleAdmin, noToken, always, (*Server).totpBegin},
	{"POST", "/auth/totp/confirm", auth.RoleAdmin, noToken, always, (*Server).totpConfirm},
	{"DELETE", "/auth/totp", auth.RoleAdmin, noToken, always, (*Server).totpDisable},

	// The daemon itself.
	{"GET", "/info", auth.RoleViewer, anyCred, withInfo, (*Server).info},
	{"GET", "/log", auth.RoleViewer, anyCred, always, (*Server).log},
	{"GET", "/export/prometheus/metrics", auth.RoleViewer, anyCred, withMetricsAuth, (*Server).metrics},
	{"GET", "/export/prometheus/metrics", auth.RoleNone, 0, withMetricsOpen, (*Server).metrics},
	{"GET", "/diagnostics", auth.RoleAdmin, anyCred, withDiagnostics, (*Server).diagnostics},

	// The devices (devices.go): reading is a viewer's, changing the
	// target an operator's.
	{"GET", "/ws", auth.RoleViewer, anyCred, withDevices, (*Server).ws},
	{"GET", "/atx", auth.RoleViewer, anyCred, withDevices, (*Server).atxState},
	{"POST", "/atx/power", auth.RoleOperator, anyCred, withDevices, (*Server).atxPower},
	{"POST", "/atx/click", auth.RoleOperator, anyCred, withDevices, (*Server).atxClick},
	{"GET", "/gpio", auth.RoleViewer, anyCred, withDevices, deviceState("gpio")},
	{"POST", "/gpio/switch", auth.RoleOperator, anyCred, withDevices, gpioAction("switch")},
	{"POST", "/gpio/pulse", auth.RoleOperator, anyCred, withDevices, gpioAction("pulse")},
	{"GET", "/hid", auth.RoleViewer, anyCred, withDevices, deviceState("hid")},
	// The keyboard and mouse (hid.go): their settings and input are an
	// operator's.
	{"GET", "/hid/keymaps", auth.RoleViewer, anyCred, withHID, (*Server).hidKeymaps},
	{"GET", "/hid/inactivity", auth.RoleViewer, anyCred, withHID, (*Server).hidInactivity},
	{"POST", "/hid/set_params", auth.RoleOperator, anyCred, withHID, (*Server).hidSetParams},
	{"POST", "/hid/set_connected", auth.RoleOperator, anyCred, withHID, (*Server).hidSetConnected},
	{"POST", "/hid/reset", auth.RoleOperator, anyCred, withHID, (*Server).hidReset},
	{"POST", "/hid/print", auth.RoleOperator, anyCred, withHID, (*Server).hidPrint},
	{"POST", "/hid/events/send_key", auth.RoleOperator, anyCred, withHID, (*Server).hidSendKey},
	{"POST", "/hid/events/send_shortcut", auth.RoleOperator, anyCred, withHID, (*Server).hidSendShortcut},
	{"POST", "/hid/events/send_mouse_button", auth.RoleOperator, anyCred, withHID, (*Server).hidSendMouseButton},
	{"POST", "/hid/events/send_mouse_move", auth.RoleOperator, anyCred, withHID, (*Server).hidSendMouseMove},
	{"POST", "/hid/events/send_mouse_relative", auth.RoleOperator, anyCred, withHID, (*Server).hidSendMouseRelative},
	{"POST", "/hid/events/send_mouse_wheel", auth.RoleOperator, anyCred, withHID, (*Server).hidSendMouseWheel},

	// Virtual media (msd.go): reading an image's bytes is an operator's
	// too, as a flash image may hold what the host wrote on it.
	{"GET", "/msd", auth.RoleViewer, anyCred, withDevices, deviceState("msd")},
	{"POST", "/msd/set_params", auth.RoleOperator, anyCred, withDevices, (*Server).msdSetParams},
	{"POST", "/msd/set_connected", auth.RoleOperator, anyCred, withDevices, (*Server).msdSetConnected},
	{"POST", "/msd/write", auth.RoleOperator, anyCred, withDevices, (*Server).msdWrite},
	{"POST", "/msd/write_remote", auth.RoleOperator, anyCred, withDevices, (*Server).msdWriteRemote},
	{"POST", "/msd/remove", auth.RoleOperator, anyCred, withDevices, (*Server).msdRemove},
	{"POST", "/msd/reset", auth.RoleOperator, anyCred, withDevices, (*Server).msdReset},
	{"GET", "/msd/read", auth.RoleOperator, anyCred, withDevices, (*Server).msdRead},

	// The video streamer (streamer.go): kvmd's API of the ustreamer the
	// daemon runs.
	{"GET", "/streamer", auth.RoleViewer, anyCred, withDevices, (*Server).streamerState},
	{"POST", "/streamer/set_params", auth.RoleOperator, anyCred, withDevices, (*Server).streamerSetParams},
	{"POST", "/streamer/reset", auth.RoleOperator, anyCred, withDevices, (*Server).streamerReset},
	{"GET", "/streamer/snapshot", auth.RoleViewer, anyCred, withDevices, (*Server).streamerSnapshot},
	{"DELETE", "/streamer/snapshot", auth.RoleOperator, anyCred, withDevices, (*Server).streamerDeleteSnapshot},
	{"GET", "/streamer/ocr", auth.RoleViewer, anyCred, withDevices, ocrUnavailable},
	// The picture in H.264 (media.go): PiKVM's Direct H.264 (kvmd-media's
	// API) and WebRTC signalled by WHEP; watching is a viewer's.
	{"GET", "/media", auth.RoleViewer, anyCred, withH264, (*Server).mediaInfo},
	{"GET", "/media/ws", auth.RoleViewer, anyCred, withH264, (*Server).mediaWS},
	{"POST", "/media/whep", auth.RoleViewer, anyCred, withWebRTC, (*Server).whepOffer},
	{"DELETE", "/media/whep", auth.RoleViewer, anyCred, withWebRTC, (*Server).whepDelete},
}

// rawRouteTable are the routes outside /api, answered at their paths only,
// with the same authentication as the API's: where PiKVM's nginx sends
// /streamer/ to ustreamer itself (configs/nginx/kvmd.ctx-server.conf), so
// that its web page and <img> tags find the stream there.
var rawRouteTable = []route{
	{"GET", "/streamer/stream", auth.RoleViewer, anyCred, withDevices, (*Server).streamerStream},
	{"GET", "/streamer/snapshot", auth.RoleViewer, anyCred, withDevices, (*Server).streamerRawSnapshot},
}

// rawBodyRoutes are the routes whose handler reads the request body
// itself, as a stream, once the request is authenticated and allowed:
// no MaxBody, no BodyTimeout, which the handler replaces with its own
// bounds (an image upload, msd.go). Each is a row of routeTable. (serve
// reads every other route's body: bodyRuleOf, bodies.go.)
var rawBodyRoutes = [][2]string{{"POST", "/msd/write"}}

// printMaxBody bounds the text of /api/hid/print: aiohttp's default body
// limit, under which kvmd takes any text (limit=0 types it all).
const printMaxBody = 1 << 20

// routeMaxBody are the routes whose body may be larger than
// Config.MaxBody (bodyRuleOf).
var routeMaxBody = map[string]int64{"/hid/print": printMaxBody, "/media/whep": whepMaxBody}

// route is a row of the route table.
type route struct {
	method string
	path   string
	// role is the least role; auth.RoleNone: public, no credential
	// looked at.
	role auth.Role
	// creds is which credentials besides a password or session may
	// call the route (0 for a public one).
	creds creds
	// when is the part of Config the route exists under.
	when    feature
	handler routeHandler
}

// routeHandler is a handler of the route table: a method expression such
// as (*Server).login, so that the table is data, built before any Server.
type routeHandler func(s *Server, w http.ResponseWriter, r *http.Request) error

// creds is which credentials, besides a user's password (X-KVMD-User,
// Basic) or its session cookie, a route takes.
type creds uint8

const (
	// viaToken: an API token (Authorization: Bearer), as its role allows.
	viaToken creds = 1 << iota
	// viaPeer: a process on the unix socket that PeerAuth trusts (root,
	// --unix-group), which is an admin.
	viaPeer

	anyCred = viaToken | viaPeer
	// noToken is every write to users, passwords, tokens and 2FA. A
	// token is for automation: a leaked one must not outlive its
	// revocation through heirs (a new token, a new admin who makes
	// one) nor lock its owners out (a password, 2FA).
	noToken = viaPeer
	// noPeer is /auth/check, which nginx's auth_request calls as the
	// proxy's own user: the proxy's peer credentials are not the
	// client's.
	noPeer = viaToken
)

// feature is a part of Config that routes exist under.
type feature uint16

// always is a route every Server has.
const always feature = 0

const (
	withTokens      feature = 1 << iota // Config.Tokens
	withUsers                           // Config.Users
	withInfo                            // Config.Info
	withMetricsAuth                     // Config.Metrics, MetricsOpen false
	withMetricsOpen                     // Config.Metrics, MetricsOpen true
	withDevices                         // Config.Devices
	withDiagnostics                     // Config.Diagnostics
	withHID                             // Config.Devices.HID
	withH264                            // Config.Devices.H264
	withWebRTC                          // Config.Devices.WebRTC
)

// features are the names of the features for the golden file and the
// docs, with what turns each on in kvmd serve.
var features = []struct {
	f           feature
	name, serve string
}{
	{always, "always", "always"},
	{withTokens, "Tokens", "always"},
	{withUsers, "Users", "always"},
	{withInfo, "Info", "always"},
	{withMetricsAuth, "Metrics&&!MetricsOpen", "with `metrics-auth: true`, the default"},
	{withMetricsOpen, "Metrics&&MetricsOpen", "with `metrics-auth: false`"},
	{withDevices, "Devices", "always"},
	{withDiagnostics, "Diagnostics", "always"},
	{withHID, "Devices.HID", "always"},
	{withH264, "Devices.H264", "with an H.264 encoder (`h264-encoder` not `off`)"},
	{withWebRTC, "Devices.WebRTC", "with an H.264 encoder and `webrtc-max-peers` above 0"},
}

func (f feature) String() string {
	for _, n := range features {
		if n.f == f {
			return n.name
		}
	}
	return fmt.Sprintf("feature(%#x)", uint16(f))
}

// features returns what c turns on.
func (c *Config) features() feature {
	var f feature
	set := func(on bool, g feature) {
		if on {
			f |= g
		}
	}
	set(c.Tokens != nil, withTokens)
	set(c.Users != nil, withUsers)
	set(c.Info != nil, withInfo)
	set(c.Metrics != nil && !c.MetricsOpen, withMetricsAuth)
	set(c.Metrics != nil && c.MetricsOpen, withMetricsOpen)
	set(c.Devices != nil, withDevices)
	set(c.Diagnostics != nil, withDiagnostics)
	set(c.Devices != nil && c.Devices.HID != nil, withHID)
	set(c.Devices != nil && c.Devices.H264 != nil, withH264)
	set(c.Devices != nil && c.Devices.WebRTC != nil, withWebRTC)
	return f
}

// pathRoutes are the rows of one path, by method; HEAD is the GET row.
type pathRoutes struct {
	methods map[string]*route
	allow   string
	// rawBody is the methods of rawBodyRoutes.
	rawBody map[string]bool
}

// ErrDuplicateRoute is two rows of the route table for one method and path
// under one Config: New refuses it rather than let one overwrite the
// other, whose role might be the one that was reviewed.
var ErrDuplicateRoute = errors.New("httpd: duplicate route")

// errBadRoute is a row of the route table that cannot be served.
var errBadRoute = errors.New("httpd: malformed route")

// addRoutes adds the rows of table whose feature is in have.
func (s *Server) addRoutes(table []route, have feature) error {
	return addRows(s.routes, table, have)
}

// addRawRoutes adds the rows of table whose feature is in have as routes
// outside /api.
func (s *Server) addRawRoutes(table []route, have feature) error {
	if s.raw == nil {
		s.raw = map[string]*pathRoutes{}
	}
	return addRows(s.raw, table, have)
}

func addRows(dst map[string]*pathRoutes, table []route, have feature) error {
	for i := range table {
		if rt := &table[i]; rt.when == always || have&rt.when != 0 {
			if err := addRow(dst, rt); err != nil {
				return err
			}
		}
	}
	return nil
}

var routeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// add adds one row, refusing a duplicate and a row that cannot be right.
func (s *Server) add(rt *route) error { return addRow(s.routes, rt) }

func addRow(routes map[string]*pathRoutes, rt *route) error {
	switch {
	case rt.method == http.MethodHead || !slices.Contains(routeMethods, rt.method):
		return fmt.Errorf("%w: %s %s: method not one of GET, POST, PUT, PATCH, DELETE", errBadRoute, rt.method, rt.path)
	case !strings.HasPrefix(rt.path, "/") || strings.HasPrefix(rt.path, "/api/"):
		return fmt.Errorf("%w: %s %s: a path starts with / and has no /api prefix", errBadRoute, rt.method, rt.path)
	case rt.role > auth.RoleAdmin:
		return fmt.Errorf("%w: %s %s: no such role", errBadRoute, rt.method, rt.path)
	case rt.role == auth.RoleNone && rt.creds != 0:
		return fmt.Errorf("%w: %s %s: a public route looks at no credential", errBadRoute, rt.method, rt.path)
	case rt.handler == nil:
		return fmt.Errorf("%w: %s %s: no handler", errBadRoute, rt.method, rt.path)
	}
	p := routes[rt.path]
	if p == nil {
		p = &pathRoutes{methods: map[string]*route{}, rawBody: map[string]bool{}}
		routes[rt.path] = p
	}
	if slices.Contains(rawBodyRoutes, [2]string{rt.method, rt.path}) {
		p.rawBody[rt.method] = true
	}
	if p.methods[rt.method] != nil {
		return fmt.Errorf("%w: %s %s", ErrDuplicateRoute, rt.method, rt.path)
	}
	p.methods[rt.method] = rt
	if rt.method == http.MethodGet {
		p.methods[http.MethodHead] = rt
	}
	var allow []string
	for _, m := range routeMethods {
		if p.methods[m] != nil {
			allow = append(allow, m)
		}
	}
	p.allow = strings.Join(allow, ", ")
	return nil
}

// RouteInfo is one route as the Server serves it: method and path (without
// /api), the least role it needs, and whether an API token and a unix
// socket peer may call it.
type RouteInfo struct {
	Method, Path string
	Role         auth.Role
	Token, Peer  bool
}

// Routes returns the routes the Server serves, sorted, HEAD rows left out.
func (s *Server) Routes() []RouteInfo { return routeInfos(s.routes) }

// RawRoutes returns the routes outside /api (rawRouteTable) as Routes
// does, their paths whole.
func (s *Server) RawRoutes() []RouteInfo { return routeInfos(s.raw) }

func routeInfos(routes map[string]*pathRoutes) []RouteInfo {
	var out []RouteInfo
	for _, p := range routes {
		for m, rt := range p.methods {
			if m != http.MethodHead {
				out = append(out, rt.info())
			}
		}
	}
	slices.SortFunc(out, compareRoutes)
	return out
}

func (rt *route) info() RouteInfo {
	return RouteInfo{Method: rt.method, Path: rt.path, Role: rt.role,
		Token: rt.creds&viaToken != 0, Peer: rt.creds&viaPeer != 0}
}

func compareRoutes(a, b RouteInfo) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
}

// errTokenRefused answers an API token on a route that takes none.
var errTokenRefused = &Error{Status: http.StatusForbidden, Name: "ForbiddenError",
	Msg: "Forbidden: an API token cannot change users, passwords, API tokens or 2FA; sign in with a password"}
