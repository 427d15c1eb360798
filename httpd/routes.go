package httpd

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kvmd/auth"
	"kvmd/redfish"
	"kvmd/subsystem"
)

// routeTable is every route and every policy of the daemon's HTTP server:
// its method and path, where it is served (at), the least role it needs,
// which credentials besides a password or a session may call it, the
// largest body it takes (0: Config.MaxBody; rawBody: its handler reads
// the body as a stream, under bounds of its own), the part of Config it
// exists under, and its handler. The API's routes, ustreamer's paths, the
// web UI's pages and the kinds of message a WebSocket client sends are
// all rows of it. It is the one place a route is added or its privilege
// changed, read as a whole in review, as tailscale's ipn/localapi keeps
// its handlers in one literal map and bmcweb its privileges in
// privilege_registry.hpp. A subsystem's own routes are rows too, whose
// handler the subsystem gives (the condition sub(name), a nil handler).
//
// New refuses a table with two rows for one method and served path under
// any one Config (ErrDuplicateRoute); testdata/routes.golden pins every
// column but the handler of every row (TestRouteTableGolden), and the
// role tables of docs/security.md are generated from it
// (TestDocsRouteTables). GET rows answer HEAD too.
var routeTable = []route{
	// Sessions and passwords.
	{"POST", "/auth/login", api, auth.RoleNone, 0, 0, always, (*Server).login},
	{"GET", "/auth/check", api, auth.RoleViewer, noPeer, 0, always, (*Server).check},
	{"POST", "/auth/logout", api, auth.RoleViewer, anyCred, 0, always, (*Server).logout},
	{"GET", "/auth/sessions", api, auth.RoleViewer, anyCred, 0, always, (*Server).listSessions},
	{"DELETE", "/auth/sessions", api, auth.RoleViewer, anyCred, 0, always, (*Server).endSessions},

	// Credentials: a token reads them, as its role allows, and never
	// writes them (see noToken).
	{"GET", "/auth/tokens", api, auth.RoleViewer, anyCred, 0, withTokens, (*Server).listTokens},
	{"POST", "/auth/tokens", api, auth.RoleViewer, noToken, 0, withTokens, (*Server).addToken},
	{"DELETE", "/auth/tokens", api, auth.RoleViewer, noToken, 0, withTokens, (*Server).delToken},
	{"GET", "/auth/users", api, auth.RoleAdmin, anyCred, 0, withUsers, (*Server).listUsers},
	{"POST", "/auth/users", api, auth.RoleAdmin, noToken, 0, withUsers, (*Server).addUser},
	{"PATCH", "/auth/users", api, auth.RoleAdmin, noToken, 0, withUsers, (*Server).setUser},
	{"DELETE", "/auth/users", api, auth.RoleAdmin, noToken, 0, withUsers, (*Server).delUser},
	// 2FA: without --totp-secret they say what to configure (twofactor.go).
	{"GET", "/auth/totp", api, auth.RoleAdmin, anyCred, 0, always, (*Server).totpState},
	{"POST", "/auth/totp/begin", api, auth.RoleAdmin, noToken, 0, always, (*Server).totpBegin},
	{"POST", "/auth/totp/confirm", api, auth.RoleAdmin, noToken, 0, always, (*Server).totpConfirm},
	{"DELETE", "/auth/totp", api, auth.RoleAdmin, noToken, 0, always, (*Server).totpDisable},

	// The daemon itself.
	{"GET", "/info", api, auth.RoleViewer, anyCred, 0, withInfo, (*Server).info},
	{"GET", "/log", api, auth.RoleViewer, anyCred, 0, always, (*Server).log},
	{"GET", "/export/prometheus/metrics", api, auth.RoleViewer, anyCred, 0, withMetricsAuth, (*Server).metrics},
	{"GET", "/export/prometheus/metrics", api, auth.RoleNone, 0, 0, withMetricsOpen, (*Server).metrics},
	{"GET", "/diagnostics", api, auth.RoleAdmin, anyCred, 0, withDiagnostics, (*Server).diagnostics},

	// The devices (devices.go): reading is a viewer's, changing the
	// target an operator's.
	{"GET", "/ws", api, auth.RoleViewer, anyCred, 0, withDevices, (*Server).ws},
	{"GET", "/atx", api, auth.RoleViewer, anyCred, 0, withDevices, deviceState("atx")},
	{"POST", "/atx/power", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).atxPower},
	{"POST", "/atx/click", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).atxClick},
	{"GET", "/gpio", api, auth.RoleViewer, anyCred, 0, withDevices, deviceState("gpio")},
	{"POST", "/gpio/switch", api, auth.RoleOperator, anyCred, 0, withDevices, gpioAction("switch")},
	{"POST", "/gpio/pulse", api, auth.RoleOperator, anyCred, 0, withDevices, gpioAction("pulse")},
	{"GET", "/hid", api, auth.RoleViewer, anyCred, 0, withDevices, deviceState("hid")},
	// The keyboard and mouse (hid.go): their settings and input are an
	// operator's.
	{"GET", "/hid/keymaps", api, auth.RoleViewer, anyCred, 0, withHID, (*Server).hidKeymaps},
	{"GET", "/hid/inactivity", api, auth.RoleViewer, anyCred, 0, withHID, (*Server).hidInactivity},
	{"POST", "/hid/set_params", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSetParams},
	{"POST", "/hid/set_connected", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSetConnected},
	{"POST", "/hid/reset", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidReset},
	{"POST", "/hid/print", api, auth.RoleOperator, anyCred, printMaxBody, withHID, (*Server).hidPrint},
	{"POST", "/hid/events/send_key", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendKey},
	{"POST", "/hid/events/send_shortcut", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendShortcut},
	{"POST", "/hid/events/send_mouse_button", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendMouseButton},
	{"POST", "/hid/events/send_mouse_move", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendMouseMove},
	{"POST", "/hid/events/send_mouse_relative", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendMouseRelative},
	{"POST", "/hid/events/send_mouse_wheel", api, auth.RoleOperator, anyCred, 0, withHID, (*Server).hidSendMouseWheel},

	// Virtual media (msd.go): reading an image's bytes is an operator's
	// too, as a flash image may hold what the host wrote on it.
	{"GET", "/msd", api, auth.RoleViewer, anyCred, 0, withDevices, deviceState("msd")},
	{"POST", "/msd/set_params", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdSetParams},
	{"POST", "/msd/set_connected", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdSetConnected},
	{"POST", "/msd/write", api, auth.RoleOperator, anyCred, rawBody, withDevices, (*Server).msdWrite},
	{"POST", "/msd/write_remote", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdWriteRemote},
	{"POST", "/msd/remove", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdRemove},
	{"POST", "/msd/reset", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdReset},
	{"GET", "/msd/read", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).msdRead},

	// The video streamer (streamer.go): kvmd's API of the ustreamer the
	// daemon runs.
	{"GET", "/streamer", api, auth.RoleViewer, anyCred, 0, withDevices, deviceState("streamer")},
	{"POST", "/streamer/set_params", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).streamerSetParams},
	{"POST", "/streamer/reset", api, auth.RoleOperator, anyCred, 0, withDevices, (*Server).streamerReset},
	{"GET", "/streamer/snapshot", apiOnly, auth.RoleViewer, anyCred, 0, withDevices, (*Server).streamerSnapshot},
	{"DELETE", "/streamer/snapshot", apiOnly, auth.RoleOperator, anyCred, 0, withDevices, (*Server).streamerDeleteSnapshot},
	{"GET", "/streamer/ocr", api, auth.RoleViewer, anyCred, 0, withDevices, ocrUnavailable},
	// The picture in H.264 (media.go): PiKVM's Direct H.264 (kvmd-media's
	// API) and WebRTC signalled by WHEP; watching is a viewer's.
	{"GET", "/media", api, auth.RoleViewer, anyCred, 0, withH264, (*Server).mediaInfo},
	{"GET", "/media/ws", api, auth.RoleViewer, anyCred, 0, withH264, (*Server).mediaWS},
	{"POST", "/media/whep", api, auth.RoleViewer, anyCred, whepMaxBody, withWebRTC, (*Server).whepOffer},
	{"DELETE", "/media/whep", api, auth.RoleViewer, anyCred, 0, withWebRTC, (*Server).whepDelete},

	// ustreamer's own paths, outside /api, where PiKVM's nginx sends
	// /streamer/ to ustreamer (configs/nginx/kvmd.ctx-server.conf), so
	// that its web page and <img> tags find the stream there; with the
	// API's authentication.
	{"GET", "/streamer/stream", bare, auth.RoleViewer, anyCred, 0, withDevices, (*Server).streamerStream},
	{"GET", "/streamer/snapshot", bare, auth.RoleViewer, anyCred, 0, withDevices, (*Server).streamerRawSnapshot},

	// DMTF Redfish (redfish.go, package redfish), at /redfish, where
	// PiKVM's nginx sends it to kvmd: the roles of the matching API
	// routes.
	{"GET", "/redfish", bare, auth.RoleNone, 0, 0, withRedfish, redfishRoute((*redfish.Service).Versions)},
	{"GET", redfish.Root, bare, auth.RoleNone, 0, 0, withRedfish, redfishRoute((*redfish.Service).Root)},
	{"GET", redfish.SystemsPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Systems)},
	{"GET", redfish.SystemPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).System)},
	{"PATCH", redfish.SystemPath, bare, auth.RoleOperator, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).PatchSystem)},
	{"POST", redfish.ResetPath, bare, auth.RoleOperator, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Reset)},
	{"POST", redfish.BootOrderPath, bare, auth.RoleOperator, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).SetDefaultBootOrder)},
	{"GET", redfish.ManagersPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Managers)},
	{"GET", redfish.ManagerPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Manager)},
	{"GET", redfish.VirtualMediaPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).VirtualMediaCollection)},
	{"GET", redfish.MediaPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).VirtualMedia)},
	{"POST", redfish.InsertPath, bare, auth.RoleOperator, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).InsertMedia)},
	{"POST", redfish.EjectPath, bare, auth.RoleOperator, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).EjectMedia)},
	{"GET", redfish.SessionService, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).SessionServiceRes)},
	{"GET", redfish.SessionsPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Sessions)},
	// A login: the body's credentials, counted against the address's
	// failures as /auth/login is.
	{"POST", redfish.SessionsPath, bare, auth.RoleNone, 0, 0, withRedfish, redfishRoute((*redfish.Service).CreateSession)},
	{"GET", redfish.SessionMemberPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).Session)},
	{"DELETE", redfish.SessionMemberPath, bare, auth.RoleViewer, anyCred, 0, withRedfish, redfishRoute((*redfish.Service).DeleteSession)},

	// The web UI's pages (ui.go), each the file of its name in Config.UI
	// (/ is index.html): a session's (a browser without one is sent to
	// the login page), but the login page; their scripts and styles,
	// public (the login page needs them, and they hold nothing secret);
	// PiKVM's page paths that kvmd's login may redirect to, sent to the
	// console, this daemon's KVM page.
	{"GET", "/", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/console", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/logs", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/sessions", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/tokens", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/users", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/twofactor", page, auth.RoleViewer, anyCred, 0, withUI, (*Server).uiPage},
	{"GET", "/login", page, auth.RoleNone, 0, 0, withUI, (*Server).uiPage},
	{"GET", "/static/", below, auth.RoleNone, 0, 0, withUI, (*Server).uiStatic},
	{"GET", "/kvm", page, auth.RoleNone, 0, 0, withUI, redirectTo("/console")},
	{"GET", "/kvm/", page, auth.RoleNone, 0, 0, withUI, redirectTo("/console")},

	// The messages a /api/ws client sends (ws.go), by kvmd's event type
	// (a binary message's first byte: 0 ping, 1 key, 2 mouse_button, 3
	// mouse_move, 4 mouse_relative, 5 mouse_wheel), on the connection
	// /api/ws let in: a message of a kind the client's role is below is
	// dropped, and counted.
	{"WS", "ping", ws, auth.RoleViewer, anyCred, 0, withDevices, (*Server).ws},
	{"WS", "key", ws, auth.RoleOperator, anyCred, 0, withHID, (*Server).ws},
	{"WS", "mouse_button", ws, auth.RoleOperator, anyCred, 0, withHID, (*Server).ws},
	{"WS", "mouse_move", ws, auth.RoleOperator, anyCred, 0, withHID, (*Server).ws},
	{"WS", "mouse_relative", ws, auth.RoleOperator, anyCred, 0, withHID, (*Server).ws},
	{"WS", "mouse_wheel", ws, auth.RoleOperator, anyCred, 0, withHID, (*Server).ws},
}

// printMaxBody bounds the text of /api/hid/print: aiohttp's default body
// limit, under which kvmd takes any text (limit=0 types it all).
const printMaxBody = 1 << 20

// route is a row of the route table.
type route struct {
	method string
	// path is the path without /api, the prefix of a row whose path
	// ends in / (the UI's /static/), or a WebSocket message's kind.
	path string
	// at is where the row is served.
	at at
	// role is the least role; auth.RoleNone: public, no credential
	// looked at.
	role auth.Role
	// creds is which credentials besides a password or session may
	// call the route (0 for a public one).
	creds creds
	// body is the largest request body: 0 is Config.MaxBody, rawBody
	// the handler's to read.
	body int64
	// when is the part of Config the route exists under.
	when    when
	handler routeHandler
}

// rawBody is route.body of a route whose handler reads the request body
// itself, as a stream, once the request is let in: no limit, no body
// deadline, which it replaces with bounds of its own (an image upload,
// msd.go). serve reads every other route's body (bodies.go).
const rawBody = -1

// at is where a row is served.
type at uint8

const (
	// api: at /api/PATH, and at PATH, as PiKVM's nginx forwards the API
	// with /api stripped.
	api at = iota
	// apiOnly: at /api/PATH only (PATH is another row's).
	apiOnly
	// bare: at PATH only.
	bare
	// page: a web page at PATH only: a refused request is sent to the
	// login page (a 302), not answered with an error.
	page
	// below: web pages at every path below PATH, which ends in / (the
	// UI's static files), as page.
	below
	// ws: a kind of message a /api/ws client sends (PATH is its event
	// type), allowed by its role on the connection /api/ws let in.
	ws
)

func (a at) String() string {
	if a > ws {
		return fmt.Sprintf("at(%d)", uint8(a))
	}
	return [...]string{"/api /", "/api", "/", "page", "page/*", "ws"}[a]
}

// paths are where a row is served, as request paths.
func (rt *route) paths() []string {
	switch rt.at {
	case api:
		return []string{"/api" + rt.path, rt.path}
	case apiOnly:
		return []string{"/api" + rt.path}
	case bare, page, below:
		return []string{rt.path}
	}
	return nil
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

const (
	fTokens      feature = 1 << iota // Config.Tokens
	fUsers                           // Config.Users
	fInfo                            // Config.Info
	fMetricsAuth                     // Config.Metrics, MetricsOpen false
	fMetricsOpen                     // Config.Metrics, MetricsOpen true
	fDevices                         // Config.Devices
	fDiagnostics                     // Config.Diagnostics
	fHID                             // Config.Devices.HID
	fUI                              // Config.UI
	fH264                            // Config.Devices.H264
	fWebRTC                          // Config.Devices.WebRTC
	fRedfish                         // Config.Redfish
)

// when is what a row exists under: a part of Config (f; 0: always), or a
// subsystem of Config.Devices that gives its handler (sub).
type when struct {
	f   feature
	sub string
}

// The conditions of the rows.
var (
	always          = when{}
	withTokens      = when{f: fTokens}
	withUsers       = when{f: fUsers}
	withInfo        = when{f: fInfo}
	withMetricsAuth = when{f: fMetricsAuth}
	withMetricsOpen = when{f: fMetricsOpen}
	withDevices     = when{f: fDevices}
	withDiagnostics = when{f: fDiagnostics}
	withHID         = when{f: fHID}
	withUI          = when{f: fUI}
	withH264        = when{f: fH264}
	withWebRTC      = when{f: fWebRTC}
	withRedfish     = when{f: fRedfish}
)

// sub is the condition of a subsystem's own row: it exists when
// Config.Devices has the subsystem of that name, which gives its handler
// (subsystem.Router); the row's handler is nil.
func sub(name string) when { return when{sub: name} }

// features are the names of the features for the golden file and the
// docs, with what turns each on in kvmd serve.
var features = []struct {
	f           feature
	name, serve string
}{
	{0, "always", "always"},
	{fTokens, "Tokens", "always"},
	{fUsers, "Users", "always"},
	{fInfo, "Info", "always"},
	{fMetricsAuth, "Metrics&&!MetricsOpen", "with `metrics-auth: true`, the default"},
	{fMetricsOpen, "Metrics&&MetricsOpen", "with `metrics-auth: false`"},
	{fDevices, "Devices", "always"},
	{fDiagnostics, "Diagnostics", "always"},
	{fHID, "Devices.HID", "always"},
	{fUI, "UI", "always"},
	{fH264, "Devices.H264", "with an H.264 encoder (`h264-encoder` not `off`)"},
	{fWebRTC, "Devices.WebRTC", "with an H.264 encoder and `webrtc-max-peers` above 0"},
	{fRedfish, "Redfish", "always"},
}

func (w when) String() string {
	if w.sub != "" {
		return "subsystem " + w.sub
	}
	for _, n := range features {
		if n.f == w.f {
			return n.name
		}
	}
	return fmt.Sprintf("feature(%#x)", uint16(w.f))
}

// on reports whether the row exists with the features have (a
// subsystem's row: bindSubsystems decides).
func (w when) on(have feature) bool { return w.sub == "" && (w.f == 0 || have&w.f != 0) }

// features returns what c turns on.
func (c *Config) features() feature {
	var f feature
	set := func(on bool, g feature) {
		if on {
			f |= g
		}
	}
	set(c.Tokens != nil, fTokens)
	set(c.Users != nil, fUsers)
	set(c.Info != nil, fInfo)
	set(c.Metrics != nil && !c.MetricsOpen, fMetricsAuth)
	set(c.Metrics != nil && c.MetricsOpen, fMetricsOpen)
	set(c.Devices != nil, fDevices)
	set(c.Diagnostics != nil, fDiagnostics)
	set(c.Devices != nil && c.Devices.HID != nil, fHID)
	set(c.UI != nil, fUI)
	set(c.Devices != nil && c.Devices.H264 != nil, fH264)
	set(c.Devices != nil && c.Devices.WebRTC != nil, fWebRTC)
	set(c.Redfish != nil, fRedfish)
	return f
}

// bindSubsystems returns the rows of table that exist with the features
// have and the subsystems subs: a subsystem's row with its handler from
// the subsystem (subsystem.Router's, by the row's method and path). A
// subsystem's row whose subsystem gives no handler for it, and a
// handler a subsystem gives with no row, are errors: no route is served
// whose policy is not a row of the table.
func bindSubsystems(table []route, have feature, subs []subsystem.Subsystem) ([]*route, error) {
	byName := map[string]subsystem.Subsystem{}
	for _, s := range subs {
		byName[s.Name()] = s
	}
	bound := map[string]bool{}
	var rows []*route
	for i := range table {
		rt := &table[i]
		switch {
		case rt.when.sub == "":
			if rt.when.on(have) {
				rows = append(rows, rt)
			}
			continue
		case byName[rt.when.sub] == nil:
			continue
		}
		key := rt.method + " " + rt.path
		h := byName[rt.when.sub].Handlers()[key]
		if h == nil || rt.handler != nil {
			return nil, fmt.Errorf("%w: %s: the row's handler is subsystem %s's, which gives none", errBadRoute, key, rt.when.sub)
		}
		b := *rt
		b.handler = func(_ *Server, w http.ResponseWriter, r *http.Request) error { return h(w, r) }
		rows = append(rows, &b)
		bound[rt.when.sub+" "+key] = true
	}
	for _, s := range subs {
		for key := range s.Handlers() {
			if !bound[s.Name()+" "+key] {
				return nil, fmt.Errorf("%w: %s: subsystem %s's handler has no row of the table (its policy)", errBadRoute, key, s.Name())
			}
		}
	}
	return rows, nil
}

// pathRoutes are the rows of one served path, by method; HEAD is the GET
// row.
type pathRoutes struct {
	methods map[string]*route
	allow   string
}

// ErrDuplicateRoute is two rows of the route table for one method and path
// under one Config: New refuses it rather than let one overwrite the
// other, whose role might be the one that was reviewed.
var ErrDuplicateRoute = errors.New("httpd: duplicate route")

// errBadRoute is a row of the route table that cannot be served.
var errBadRoute = errors.New("httpd: malformed route")

// routeSet is the rows a Server serves: by request path, the prefix rows
// (their paths end in /), and the WebSocket messages' kinds.
type routeSet struct {
	paths    map[string]*pathRoutes
	prefixes map[string]*pathRoutes
	wsKinds  map[string]*route
}

func newRouteSet() routeSet {
	return routeSet{paths: map[string]*pathRoutes{}, prefixes: map[string]*pathRoutes{}, wsKinds: map[string]*route{}}
}

// find returns the rows of a request path: its own, else the longest
// prefix row's; prefix reports the latter.
func (rs *routeSet) find(path string) (p *pathRoutes, prefix bool) {
	if p := rs.paths[path]; p != nil {
		return p, false
	}
	var best string
	for pre, q := range rs.prefixes {
		if len(pre) > len(best) && strings.HasPrefix(path, pre) {
			best, p = pre, q
		}
	}
	return p, p != nil
}

// addRoutes adds the rows of table whose feature is in have, a
// subsystem's row with its handler from subs (bindSubsystems).
func (s *Server) addRoutes(table []route, have feature, subs []subsystem.Subsystem) error {
	rows, err := bindSubsystems(table, have, subs)
	if err != nil {
		return err
	}
	for _, rt := range rows {
		if err := s.routes.add(rt); err != nil {
			return err
		}
	}
	return nil
}

var routeMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}

// add adds one row, refusing a duplicate and a row that cannot be right.
func (rs *routeSet) add(rt *route) error {
	switch {
	case rt.at > ws:
		return fmt.Errorf("%w: %s %s: served nowhere", errBadRoute, rt.method, rt.path)
	case rt.at == below && !strings.HasSuffix(rt.path, "/"):
		return fmt.Errorf("%w: %s %s: the paths below one end in /", errBadRoute, rt.method, rt.path)
	case rt.at == ws && (rt.method != "WS" || rt.path == "" || strings.Contains(rt.path, "/")):
		return fmt.Errorf("%w: %s %s: a WebSocket message's row is WS and its kind", errBadRoute, rt.method, rt.path)
	case rt.at != ws && (rt.method == http.MethodHead || !slices.Contains(routeMethods, rt.method)):
		return fmt.Errorf("%w: %s %s: method not one of GET, POST, PUT, PATCH, DELETE", errBadRoute, rt.method, rt.path)
	case rt.at != ws && (!strings.HasPrefix(rt.path, "/") || strings.HasPrefix(rt.path, "/api/")):
		return fmt.Errorf("%w: %s %s: a path starts with / and has no /api prefix", errBadRoute, rt.method, rt.path)
	case rt.role > auth.RoleAdmin:
		return fmt.Errorf("%w: %s %s: no such role", errBadRoute, rt.method, rt.path)
	case rt.role == auth.RoleNone && rt.creds != 0:
		return fmt.Errorf("%w: %s %s: a public route looks at no credential", errBadRoute, rt.method, rt.path)
	case rt.body < rawBody:
		return fmt.Errorf("%w: %s %s: no such body limit", errBadRoute, rt.method, rt.path)
	case rt.handler == nil:
		return fmt.Errorf("%w: %s %s: no handler", errBadRoute, rt.method, rt.path)
	}
	if rt.at == ws {
		if rs.wsKinds[rt.path] != nil {
			return fmt.Errorf("%w: %s %s", ErrDuplicateRoute, rt.method, rt.path)
		}
		rs.wsKinds[rt.path] = rt
		return nil
	}
	for _, path := range rt.paths() {
		dst := rs.paths
		if rt.at == below {
			dst = rs.prefixes
		}
		p := dst[path]
		if p == nil {
			p = &pathRoutes{methods: map[string]*route{}}
			dst[path] = p
		}
		if p.methods[rt.method] != nil {
			return fmt.Errorf("%w: %s %s", ErrDuplicateRoute, rt.method, path)
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
	}
	return nil
}

// RouteInfo is one route as the Server serves it: its method and request
// path, the least role it needs, whether an API token and a unix socket
// peer may call it, and whether it is a web page (a refusal is a redirect
// to the login page).
type RouteInfo struct {
	Method, Path string
	Role         auth.Role
	Token, Peer  bool
	Page         bool
}

// Routes returns the routes the Server serves, each at each of its paths,
// sorted, HEAD rows left out.
func (s *Server) Routes() []RouteInfo {
	var out []RouteInfo
	for _, m := range []map[string]*pathRoutes{s.routes.paths, s.routes.prefixes} {
		for path, p := range m {
			for meth, rt := range p.methods {
				if meth != http.MethodHead {
					out = append(out, RouteInfo{Method: rt.method, Path: path, Role: rt.role,
						Token: rt.creds&viaToken != 0, Peer: rt.creds&viaPeer != 0, Page: rt.at == page || rt.at == below})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b RouteInfo) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out
}

// errTokenRefused answers an API token on a route that takes none.
var errTokenRefused = &Error{Status: http.StatusForbidden, Name: "ForbiddenError",
	Msg: "Forbidden: an API token cannot change users, passwords, API tokens or 2FA; sign in with a password"}
