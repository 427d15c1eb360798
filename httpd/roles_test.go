package httpd

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"kvmd/auth"
)

// rawReq sends a request and returns the status and, for a JSON reply,
// the error name; a reply of another type must be a success.
func (e *env) rawReq(t *testing.T, method, path string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	return rawDo(t, http.DefaultTransport.(*http.Transport).Clone(), method, e.base+path, hdr, body)
}

func rawDo(t *testing.T, tr *http.Transport, method, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, _ := http.NewRequest(method, url, rd)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Result struct {
			Error string `json:"error"`
		} `json:"result"`
	}
	if resp.Header.Get("Content-Type") == "application/json" {
		json.Unmarshal(b, &env)
	}
	return resp.StatusCode, env.Result.Error
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func cookie(tok string) map[string]string { return map[string]string{"Cookie": "auth_token=" + tok} }

// mkToken makes an API token through the API, authenticated by hdr.
func (e *env) mkToken(t *testing.T, hdr map[string]string, body string) string {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	r := e.req("POST", "/api/auth/tokens", h, body)
	if r.status != 200 {
		t.Fatalf("POST /api/auth/tokens %s: %d %s", body, r.status, r.body)
	}
	var v struct {
		Result struct{ Token string } `json:"result"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || auth.ValidAPIToken(v.Result.Token) != nil {
		t.Fatalf("token reply %s: %v", r.body, err)
	}
	return v.Result.Token
}

// rawReqUnix is rawReq over the unix socket, where the env's peer policy
// trusts the test process.
func (e *env) rawReqUnix(t *testing.T, method, path string) (int, string) {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
	}}
	return rawDo(t, tr, method, "http://kvmd"+path, nil, "")
}

// TestRoleTable walks every route the server serves with a user of each
// role authenticated each way (headers, Basic, cookie, API token), a
// unix-socket peer and nobody: a role below the route's gets 403
// ForbiddenError before the handler runs, and so does an API token on a
// route that takes none; a peer on a route that takes none is no
// credential (401); nobody gets 401 except from a public route. A
// credential that may call the route gets the handler's own answer (never
// 401/403, never a 500; a 503 is the normal answer of what this daemon
// does not do).
func TestRoleTable(t *testing.T) {
	devices, _ := testDevices(t)
	devices.HID, _ = testHID(t)
	diag := func(bool) (DiagBundle, error) { return tinyBundle{}, nil }
	peer := func(uid, gid uint32) (string, bool) { return "root", true }
	e := newEnv(t, envOpts{log: &fakeLog{}, info: &fakeInfo{}, metrics: true, devices: devices, diag: diag, totpConfigured: true, peer: peer})
	if err := os.WriteFile(e.totpPath, nil, 0o600); err != nil { // 2FA off
		t.Fatal(err)
	}
	eventually(t, "the empty secret file read", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), "").status == 200
	})
	roleUsers := []struct {
		user, passwd string
		role         auth.Role
	}{
		{"viewer", "viewer pass", auth.RoleViewer},
		{"operator", "operator-pass", auth.RoleOperator},
		{"admin", "admin-pass", auth.RoleAdmin},
	}
	type cred struct {
		how   string
		role  auth.Role
		token bool
		hdr   func() map[string]string
	}
	var creds []cred
	for _, u := range roleUsers {
		tok := e.mkToken(t, xhdr(u.user, u.passwd), `{"name":"table"}`)
		creds = append(creds,
			cred{"basic " + u.user, u.role, false, func() map[string]string { return map[string]string{"Authorization": basic(u.user, u.passwd)} }},
			cred{"xhdr " + u.user, u.role, false, func() map[string]string { return xhdr(u.user, u.passwd) }},
			// A fresh session each time: the table holds logout.
			cred{"cookie " + u.user, u.role, false, func() map[string]string { return cookie(e.login(u.user, u.passwd)) }},
			cred{"token " + u.user, u.role, true, func() map[string]string { return bearer(tok) }},
		)
	}
	// An admin's token made with the viewer role is a viewer.
	adminViewer := e.mkToken(t, xhdr("admin", "admin-pass"), `{"name":"low","role":"viewer"}`)
	creds = append(creds, cred{"viewer token of admin", auth.RoleViewer, true, func() map[string]string { return bearer(adminViewer) }})

	// Every route at its /api path, and those served only outside /api at
	// theirs; the pages are the web UI's tests'. An API row's copy
	// without /api is checked below.
	bareOnly := map[string]bool{}
	for _, rt := range routeTable {
		if rt.at == bare {
			bareOnly[rt.method+" "+rt.path] = true
		}
	}
	var routes []RouteInfo
	for _, rt := range e.srv.Routes() {
		if !rt.Page && (strings.HasPrefix(rt.Path, "/api/") || bareOnly[rt.Method+" "+rt.Path]) {
			routes = append(routes, rt)
		}
	}
	for _, rt := range routes {
		for _, c := range creds {
			status, name := e.rawReq(t, rt.Method, rt.Path, c.hdr(), "")
			switch {
			case rt.Role == auth.RoleNone:
				if status == 401 || status == 403 || status == 500 {
					t.Errorf("public %s %s: %s got %d %s", rt.Method, rt.Path, c.how, status, name)
				}
			case c.token && !rt.Token:
				if status != 403 || name != "ForbiddenError" {
					t.Errorf("%s %s takes no API token; %s got %d %q, want 403 ForbiddenError", rt.Method, rt.Path, c.how, status, name)
				}
			case c.role >= rt.Role:
				if status == 401 || status == 403 || status == 500 {
					t.Errorf("%s %s needs %s; %s (%s) got %d %s, want its success", rt.Method, rt.Path, rt.Role, c.how, c.role, status, name)
				}
			default:
				if status != 403 || name != "ForbiddenError" {
					t.Errorf("%s %s needs %s; %s (%s) got %d %q, want 403 ForbiddenError", rt.Method, rt.Path, rt.Role, c.how, c.role, status, name)
				}
			}
		}
		// A unix-socket peer is an admin where the route takes peers, no
		// credential where it does not.
		status, name := e.rawReqUnix(t, rt.Method, rt.Path)
		switch {
		case rt.Role == auth.RoleNone || rt.Peer:
			if status == 401 || status == 403 || status == 500 {
				t.Errorf("%s %s as a unix-socket peer: %d %s, want its success", rt.Method, rt.Path, status, name)
			}
		case status != 401:
			t.Errorf("%s %s takes no peer; a unix-socket peer got %d %s, want 401", rt.Method, rt.Path, status, name)
		}
		// Nobody.
		status, name = e.rawReq(t, rt.Method, rt.Path, nil, "")
		switch {
		case rt.Role == auth.RoleNone:
			if status == 401 || status == 403 {
				t.Errorf("public %s %s: %d without credentials", rt.Method, rt.Path, status)
			}
		case status != 401:
			t.Errorf("%s %s without credentials: %d %s, want 401", rt.Method, rt.Path, status, name)
		}
		// An API row's copy without /api, as PiKVM's nginx sends it: the
		// same answer to nobody.
		if bare, ok := strings.CutPrefix(rt.Path, "/api"); ok && slices.ContainsFunc(e.srv.Routes(), func(o RouteInfo) bool { return o.Path == bare && o.Method == rt.Method }) {
			if s2, n2 := e.rawReq(t, rt.Method, bare, nil, ""); s2 != status || n2 != name {
				t.Errorf("%s %s without credentials: %d %s, but %d %s at %s", rt.Method, bare, s2, n2, status, name, rt.Path)
			}
		}
	}
	// Every row of the table was walked, at each of its paths: this env
	// turns on every feature but open metrics, whose row is walked below,
	// and the web UI.
	var want []RouteInfo
	for _, rt := range routeTable {
		if rt.at != page && rt.at != below && rt.when.on(allFeatures) {
			for _, p := range rt.paths() {
				want = append(want, RouteInfo{Method: rt.method, Path: p, Role: rt.role, Token: rt.creds&viaToken != 0, Peer: rt.creds&viaPeer != 0})
			}
		}
	}
	slices.SortFunc(want, func(a, b RouteInfo) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	if got := e.srv.Routes(); !slices.Equal(got, want) {
		t.Errorf("the server serves %d routes, the table has %d for its Config:\n%v\n%v", len(got), len(want), got, want)
	}
	if status, _ := e.rawReq(t, "GET", "/api/streamer/stream", xhdr("admin", "admin-pass"), ""); status != 404 {
		t.Errorf("GET /api/streamer/stream: %d, want 404: it is no API path", status)
	}
	for _, r := range []auth.Role{auth.RoleNone, auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		if !slices.ContainsFunc(routes, func(rt RouteInfo) bool { return rt.Role == r }) {
			t.Errorf("no route of role %s walked", r)
		}
	}
	// The known successes are exact.
	for _, p := range []string{"/api/auth/check", "/api/info", "/api/log", "/api/auth/sessions", "/api/auth/tokens"} {
		if status, _ := e.rawReq(t, "GET", p, bearer(adminViewer), ""); status != 200 {
			t.Errorf("viewer GET %s: %d, want 200", p, status)
		}
	}

	open := newEnv(t, envOpts{metrics: true, metricsOpen: true})
	if status, name := open.rawReq(t, "GET", "/api/export/prometheus/metrics", nil, ""); status != 200 {
		t.Errorf("open metrics without credentials: %d %s", status, name)
	}
}

// TestTokenLifecycle: made, shown once, used without a 2FA code, listed
// without its secret, capped at its user's role, and refused from the
// request after its revocation or its user's removal.
func TestTokenLifecycle(t *testing.T) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "kvmd", AccountName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	testSecret := key.Secret()
	e := newEnv(t, envOpts{totpSecret: testSecret, extraRoutes: func(s *Server) {
		s.handle("POST", "/test/atx", auth.RoleOperator, func(w http.ResponseWriter, r *http.Request) error {
			writeBody(w, 200, okEmpty)
			return nil
		})
	}})
	// The session login needs the code; the token made through it does not.
	sess := e.login("operator", "operator-pass"+code(t, testSecret))
	tok := e.mkToken(t, cookie(sess), `{"name":"ha","expires":3600}`)

	if r := e.req("POST", "/api/test/atx", bearer(tok), ""); r.status != 200 {
		t.Fatalf("operator token on an operator route: %d %s", r.status, r.body)
	}
	// A token cannot mint tokens: a leaked one would outlive its revocation.
	if r := e.req("POST", "/api/auth/tokens", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, `{"name":"heir"}`); r.status != 403 {
		t.Errorf("a token minting a token: %d %s", r.status, r.body)
	}
	// A viewer cannot mint an operator token, an operator not an admin one.
	h := cookie(e.login("viewer", "viewer pass"+code(t, testSecret)))
	h["Content-Type"] = "application/json"
	if r := e.req("POST", "/api/auth/tokens", h, `{"name":"x","role":"operator"}`); r.status != 403 || r.errName != "ForbiddenError" {
		t.Errorf("viewer minting an operator token: %d %s", r.status, r.body)
	}
	h = cookie(sess)
	h["Content-Type"] = "application/json"
	if r := e.req("POST", "/api/auth/tokens", h, `{"name":"y","role":"admin"}`); r.status != 403 {
		t.Errorf("operator minting an admin token: %d %s", r.status, r.body)
	}
	if r := e.req("POST", "/api/auth/tokens", h, `{"name":"z","user":"admin"}`); r.status != 403 {
		t.Errorf("operator minting a token for admin: %d %s", r.status, r.body)
	}
	// Listed without the secret or its hash.
	r := e.req("GET", "/api/auth/tokens", bearer(tok), "")
	if r.status != 200 || !strings.Contains(string(r.body), `"name":"ha"`) || strings.Contains(string(r.body), tok[len(auth.TokenPrefix):]) {
		t.Errorf("token list: %d %s", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), "token used") || strings.Contains(e.logs.String(), tok[len(auth.TokenPrefix):]) {
		t.Errorf("the log has no 'token used' line, or has the secret")
	}

	// Revoked: the very next request is refused.
	if r := e.req("DELETE", "/api/auth/tokens?name=ha", cookie(sess), ""); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 403 || r.errName != "ForbiddenError" {
		t.Errorf("revoked token: %d %s, want 403", r.status, r.body)
	}

	// Its user removed from the users file: refused as soon as the file
	// is seen (the users file is looked at every 200 ms at most).
	tok2 := e.mkToken(t, cookie(sess), `{"name":"ha2"}`)
	if r := e.req("GET", "/api/auth/check", bearer(tok2), ""); r.status != 200 {
		t.Fatalf("new token: %d", r.status)
	}
	users := map[string]string{}
	for u, p := range testUsers {
		if u != "operator" {
			users[u] = p
		}
	}
	writeUsers(t, e.users, users)
	eventually(t, "token of a removed user refused", func() bool {
		return e.req("GET", "/api/auth/check", bearer(tok2), "").status == 403
	})

	// Not a kvmd token: no credential, as before tokens existed.
	if r := e.req("GET", "/api/auth/check", bearer("abc"), ""); r.status != 401 {
		t.Errorf("foreign bearer: %d", r.status)
	}
}

// TestSessionsAPI: a viewer sees and ends its own sessions only; an admin
// sees and ends anyone's.
func TestSessionsAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	v1 := e.login("viewer", "viewer pass")
	v2 := e.login("viewer", "viewer pass")
	a1 := e.login("admin", "admin-pass")

	list := func(tok string, q string) []sessionView {
		t.Helper()
		r := e.req("GET", "/api/auth/sessions"+q, cookie(tok), "")
		if r.status != 200 {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		var v struct {
			Result struct{ Sessions []sessionView } `json:"result"`
		}
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatal(err)
		}
		return v.Result.Sessions
	}
	vs := list(v1, "")
	if len(vs) != 2 || vs[0].User != "viewer" || vs[1].User != "viewer" || vs[0].Addr != "127.0.0.1" || vs[0].Method != auth.MethodLogin {
		t.Fatalf("viewer's list: %+v", vs)
	}
	if !vs[0].Current || vs[1].Current {
		t.Errorf("current marks the wrong session: %+v", vs)
	}
	if all := list(a1, ""); len(all) != 3 {
		t.Errorf("admin's list: %d sessions, want 3", len(all))
	}
	if r := e.req("GET", "/api/auth/sessions?user=admin", cookie(v1), ""); r.status != 403 || r.errName != "ForbiddenError" {
		t.Errorf("viewer listing admin's: %d %s", r.status, r.body)
	}
	adminID := list(a1, "?user=admin")[0].ID
	if r := e.req("DELETE", "/api/auth/sessions?id="+adminID, cookie(v1), ""); r.status != 404 {
		t.Errorf("viewer ending admin's session: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/sessions?id="+vs[1].ID, cookie(v1), ""); r.status != 200 {
		t.Errorf("viewer ending its own session: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", cookie(v2), ""); r.status != 403 {
		t.Errorf("ended session still works: %d", r.status)
	}
	if r := e.req("DELETE", "/api/auth/sessions?user=viewer", cookie(a1), ""); r.status != 200 || !strings.Contains(string(r.body), `"ended":1`) {
		t.Errorf("admin ending viewer's sessions: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", cookie(v1), ""); r.status != 403 {
		t.Errorf("ended session still works: %d", r.status)
	}
	if r := e.req("DELETE", "/api/auth/sessions", cookie(a1), ""); r.status != 400 {
		t.Errorf("DELETE without id or user: %d", r.status)
	}
	if !strings.Contains(e.logs.String(), `msg="session ended" user=viewer`) {
		t.Errorf("no 'session ended' line in the log")
	}
}

// followUntilEnd opens a log follow with hdr, reads a line, runs end, and
// checks that the stream then ends within a second of end's return (the
// change made: a PATCH of a password hashes it first, which under the race
// detector on a busy machine took up to 2 s, and is no part of the
// stream's end).
func followUntilEnd(t *testing.T, e *env, f *fakeLog, hdr map[string]string, end func()) {
	t.Helper()
	before := f.closed.Load()
	resp := e.get(t, "/api/log?follow=1", hdr)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(done) }()
	end()
	start := time.Now()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the follow did not end")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("follow ended %s after its session", d)
	}
	eventually(t, "log reader released", func() bool { return f.closed.Load() == before+1 })
}

// TestEndingClosesStreams: a log follow ends when its session is ended
// by DELETE, by logout, by the user's removal or role change, and when its
// API token is revoked.
func TestEndingClosesStreams(t *testing.T) {
	f := &fakeLog{}
	e := newEnv(t, envOpts{log: f})
	admin := xhdr("admin", "admin-pass")

	tok := e.login("viewer", "viewer pass")
	followUntilEnd(t, e, f, cookie(tok), func() {
		if r := e.req("DELETE", "/api/auth/sessions?user=viewer", admin, ""); r.status != 200 {
			t.Errorf("DELETE: %d", r.status)
		}
	})
	tok = e.login("viewer", "viewer pass")
	followUntilEnd(t, e, f, cookie(tok), func() { e.req("POST", "/api/auth/logout", cookie(tok), "") })

	api := e.mkToken(t, admin, `{"name":"s"}`)
	followUntilEnd(t, e, f, bearer(api), func() { e.req("DELETE", "/api/auth/tokens?name=s", admin, "") })

	tok = e.login("operator", "operator-pass")
	followUntilEnd(t, e, f, cookie(tok), func() { writeRoles(t, e, "viewer:viewer\noperator:viewer\n") })

	tok = e.login("viewer", "viewer pass")
	followUntilEnd(t, e, f, cookie(tok), func() {
		users := map[string]string{}
		for u, p := range testUsers {
			if u != "viewer" {
				users[u] = p
			}
		}
		writeUsers(t, e.users, users)
	})
	for _, want := range []string{`msg="role changed" user=operator old=operator new=viewer`, `msg="token revoked" user=admin token=s by=admin`, `msg=logout user=viewer`} {
		if !strings.Contains(e.logs.String(), want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

// writeRoles replaces the roles file as kvmd user set --role does: a new
// file renamed over the old.
func writeRoles(t *testing.T, e *env, text string) {
	t.Helper()
	p := auth.RolesPath(e.users)
	if err := os.WriteFile(p+".tmp", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatal(err)
	}
}

// code is the 2FA code of secret now.
func code(t *testing.T, secret string) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUsersAPI: an admin adds a user, changes its role (its sessions end),
// resets its password, removes it (its tokens stop working); no admin
// can remove or demote itself; the events are logged without a password.
func TestUsersAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := xhdr("admin", "admin-pass")
	admin["Content-Type"] = "application/json"
	post := func(method, body string) reply {
		t.Helper()
		return e.req(method, "/api/auth/users", admin, body)
	}
	if r := post("POST", `{"name":"dave","passwd":"dave-pass-1"}`); r.status != 200 {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	if r := post("POST", `{"name":"dave","passwd":"x"}`); r.status != 400 {
		t.Errorf("second add: %d %s", r.status, r.body)
	}
	r := e.req("GET", "/api/auth/users", admin, "")
	if !strings.Contains(string(r.body), `{"name":"dave","role":"viewer"}`) || strings.Contains(string(r.body), "$2") {
		t.Errorf("list: %s", r.body)
	}
	sess := e.login("dave", "dave-pass-1")
	tok := e.mkToken(t, cookie(sess), `{"name":"t"}`)
	if r := e.req("GET", "/api/auth/users", cookie(sess), ""); r.status != 403 {
		t.Errorf("a viewer lists users: %d", r.status)
	}
	if r := post("PATCH", `{"name":"dave","role":"operator"}`); r.status != 200 {
		t.Fatalf("set role: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", cookie(sess), ""); r.status != 403 {
		t.Errorf("session survived a role change: %d", r.status)
	}
	if r := post("PATCH", `{"name":"dave","passwd":"dave-pass-2"}`); r.status != 200 {
		t.Fatalf("reset password: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", xhdr("dave", "dave-pass-1"), ""); r.status != 403 {
		t.Errorf("old password still works: %d", r.status)
	}
	if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 200 {
		t.Errorf("token after a password reset: %d", r.status)
	}
	if r := post("PATCH", `{"name":"admin","role":"viewer"}`); r.status != 400 {
		t.Errorf("self-demotion: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/users?name=admin", admin, ""); r.status != 400 {
		t.Errorf("self-removal: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/users?name=dave", admin, ""); r.status != 200 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 403 {
		t.Errorf("token of a removed user: %d", r.status)
	}
	logs := e.logs.String()
	for _, want := range []string{`msg="user added" user=dave by=admin`, `msg="role changed" user=dave old=viewer new=operator`,
		`msg="password reset" user=dave by=admin`, `msg="user removed" user=dave by=admin`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	if strings.Contains(logs, "dave-pass") {
		t.Errorf("a password is in the log")
	}
	// Made with a role: no role of it changed then.
	if strings.Contains(logs, `msg="role changed" user=dave old=admin`) {
		t.Errorf("the new user's role is logged as changed from admin")
	}
}

// TestTwoFactorEnroll: 2FA turned on from the API only with a code of the
// new secret; then passwords need a code and API tokens do not; off again.
func TestTwoFactorEnroll(t *testing.T) {
	e := newEnv(t, envOpts{totpConfigured: true})
	if err := os.WriteFile(e.totpPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	admin := xhdr("admin", "admin-pass")
	eventually(t, "the empty secret file read", func() bool { return e.req("GET", "/api/auth/check", admin, "").status == 200 })
	tok := e.mkToken(t, admin, `{"name":"ha"}`)
	admin["Content-Type"] = "application/json"
	if r := e.req("GET", "/api/auth/totp", admin, ""); !strings.Contains(string(r.body), `"enabled":false`) {
		t.Fatalf("state: %s", r.body)
	}
	if r := e.req("POST", "/api/auth/totp/confirm", admin, `{"code":"123456"}`); r.status != 400 {
		t.Errorf("confirm before begin: %d", r.status)
	}
	r := e.req("POST", "/api/auth/totp/begin", admin, "")
	var v struct {
		Result struct {
			Secret, URI string
			QR          []string
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || v.Result.Secret == "" || !strings.HasPrefix(v.Result.URI, "otpauth://totp/") {
		t.Fatalf("begin: %s", r.body)
	}
	if n := len(v.Result.QR); n < 29 || len(v.Result.QR[0]) != n || strings.Trim(v.Result.QR[0], "0") != "" {
		t.Errorf("QR rows: %d, first %q", n, v.Result.QR[0])
	}
	if data, _ := os.ReadFile(e.totpPath); len(data) != 0 {
		t.Errorf("secret written before the confirm")
	}
	wrong := code(t, v.Result.Secret)
	wrong = string('0'+(wrong[0]-'0'+1)%10) + wrong[1:]
	if r := e.req("POST", "/api/auth/totp/confirm", admin, `{"code":"`+wrong+`"}`); r.status != 400 {
		t.Errorf("wrong code: %d", r.status)
	}
	if r := e.req("POST", "/api/auth/totp/confirm", admin, `{"code":"`+code(t, v.Result.Secret)+`"}`); r.status != 200 {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	if data, _ := os.ReadFile(e.totpPath); strings.TrimSpace(string(data)) != v.Result.Secret {
		t.Errorf("secret file = %q", data)
	}
	// At once: the next request already needs the code.
	if r := e.req("GET", "/api/auth/check", xhdr("viewer", "viewer pass"), ""); r.status != 403 {
		t.Errorf("right after 2FA on, a password without the code: %d", r.status)
	}
	if r := e.req("GET", "/api/auth/check", xhdr("viewer", "viewer pass"+code(t, v.Result.Secret)), ""); r.status != 200 {
		t.Errorf("password with the code: %d", r.status)
	}
	if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 200 {
		t.Errorf("API token under 2FA: %d", r.status)
	}
	admin = xhdr("admin", "admin-pass"+code(t, v.Result.Secret))
	if r := e.req("DELETE", "/api/auth/totp", admin, ""); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", xhdr("viewer", "viewer pass"), ""); r.status != 200 {
		t.Errorf("right after 2FA off, a password: %d", r.status)
	}
	if !strings.Contains(e.logs.String(), `msg="2FA changed" state=on user=admin`) || strings.Contains(e.logs.String(), v.Result.Secret) {
		t.Errorf("log: no 2FA line, or the secret")
	}
}

// TestEndingClosesWebSocket: a WebSocket opened with a session closes
// when the session is ended elsewhere.
func TestEndingClosesWebSocket(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	tok := e.login("viewer", "viewer pass")
	c := dialWS(t, e, "", http.Header{"Cookie": {"auth_token=" + tok}})
	readEvent(t, c) // the first state event: the socket is up
	if r := e.req("DELETE", "/api/auth/sessions?user=viewer", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Fatalf("DELETE: %d", r.status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if ctx.Err() != nil {
				t.Fatal("the WebSocket stayed open after its session ended")
			}
			return
		}
	}
}

// tinyBundle is a support bundle that writes two bytes.
type tinyBundle struct{}

func (tinyBundle) FileName() string { return "kvmd-diag.zip" }

func (tinyBundle) Write(ctx context.Context, w io.Writer) error {
	_, err := w.Write([]byte("PK"))
	return err
}
