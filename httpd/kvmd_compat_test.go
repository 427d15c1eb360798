package httpd

import (
	"crypto/tls"
	"kvmd/auth"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Where kvmd's own answers differ from what a plain reading of the API
// would give, and kvmd's clients depend on kvmd's.

// TestCheckRefusesPeerCredentials: nginx's auth_request calls
// /api/auth/check over the unix socket as the proxy's own user; kvmd never
// lets peer credentials pass there (allow_usc=False), or a proxy user put
// in the trusted group would let every client in.
func TestCheckRefusesPeerCredentials(t *testing.T) {
	policy, name := trustedPeer(t)
	e := newEnv(t, envOpts{peer: policy})
	if r := e.reqUnix("GET", "/api/auth/check", nil, ""); r.status != 401 || r.errName != "UnauthorizedError" {
		t.Errorf("check with peer credentials only: %d %q, want 401 UnauthorizedError", r.status, r.errName)
	}
	// Every other endpoint still takes them.
	e.srv.handle("GET", "/whoami", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
		return WriteJSON(w, map[string]string{"user": IdentityFrom(r.Context()).User})
	})
	if r := e.reqUnix("GET", "/api/whoami", nil, ""); r.status != 200 || !strings.Contains(string(r.body), `"`+name+`"`) {
		t.Errorf("another endpoint with peer credentials: %d %s, want 200 %s", r.status, r.body, name)
	}
	// Credentials a client sends still work on check over the socket.
	if r := e.reqUnix("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("check with a password over the socket: %d, want 200", r.status)
	}
}

type fakeInfo struct{ got []string }

func (f *fakeInfo) Fields(arg string, legacy bool) ([]string, error) {
	f.got = append(f.got, arg)
	return []string{"system"}, nil
}
func (f *fakeInfo) Result([]string, bool) []byte { return []byte(`{}`) }

// TestBadQueryEscape: a query that does not decode (a bad %-escape) is a
// 400, not a parameter silently dropped (which gave every category).
func TestBadQueryEscape(t *testing.T) {
	fi := &fakeInfo{}
	e := newEnv(t, envOpts{info: fi, extraRoutes: func(s *Server) {
		s.handle("GET", "/q", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
			if _, err := queryBool(r, "x", false); err != nil {
				return err
			}
			return WriteJSON(w, nil)
		})
	}})
	auth := xhdr("admin", "admin-pass")
	for _, path := range []string{"/api/info?fields=%zz", "/api/info?fields=hw&legacy=%", "/api/q?x=%g1", "/api/info?%zz=1"} {
		r := e.req("GET", path, auth, "")
		if r.status != 400 || r.errName != "ValidatorError" {
			t.Errorf("%s: %d %q %s, want 400 ValidatorError", path, r.status, r.errName, r.errMsg)
		}
	}
	// The message says which fault it is.
	for path, want := range map[string]string{
		"/api/q?x=%zz": "a bad %-escape", "/api/q?x=1;y=2": "a semicolon is no separator", "/api/q?x=1&y=%zz": "a bad %-escape",
	} {
		if r := e.req("GET", path, auth, ""); r.status != 400 || !strings.Contains(r.errMsg, want) {
			t.Errorf("%s: %d %q, want 400 saying %q", path, r.status, r.errMsg, want)
		}
	}
	if len(fi.got) != 0 {
		t.Errorf("the info source was asked for %q: the bad query reached it", fi.got)
	}
	if r := e.req("GET", "/api/info?fields=system%2Cmeta", auth, ""); r.status != 200 || !slices.Equal(fi.got, []string{"system,meta"}) {
		t.Errorf("a good escape: %d, fields %q", r.status, fi.got)
	} else if string(r.body) != `{"ok":true,"result":{}}` {
		t.Errorf("the info source's result in the server's envelope: %s", r.body)
	}
	// A bad query on an unauthenticated request is still 401 first: the
	// query is not looked at before authentication.
	if r := e.req("GET", "/api/info?fields=%zz", nil, ""); r.status != 401 {
		t.Errorf("no credentials, bad query: %d, want 401", r.status)
	}
}

// TestTLSOnlyAEAD: TLS 1.2 offers only ECDHE suites with AES-GCM or
// ChaCha20-Poly1305; a client that offers only CBC suites is refused.
func TestTLSOnlyAEAD(t *testing.T) {
	te := newTLSEnv(t, envOpts{})
	dial := func(suites ...uint16) (*tls.Conn, error) {
		cfg := te.client.Clone()
		cfg.MaxVersion = tls.VersionTLS12
		cfg.CipherSuites = suites
		return tls.Dial("tcp", te.addr, cfg)
	}
	for _, s := range tls.CipherSuites() {
		aead := strings.Contains(s.Name, "_GCM_") || strings.Contains(s.Name, "CHACHA20_POLY1305")
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) || strings.Contains(s.Name, "_RSA_WITH") {
			continue // the test certificate is ECDSA: RSA suites fail either way
		}
		c, err := dial(s.ID)
		if err == nil {
			c.Close()
		}
		switch {
		case aead && strings.HasPrefix(s.Name, "TLS_ECDHE_") && err != nil:
			t.Errorf("%s refused: %v", s.Name, err)
		case !(aead && strings.HasPrefix(s.Name, "TLS_ECDHE_")) && err == nil:
			t.Errorf("%s accepted", s.Name)
		}
	}
	for _, s := range tls.InsecureCipherSuites() {
		if strings.Contains(s.Name, "_RSA_WITH") {
			continue
		}
		if c, err := dial(s.ID); err == nil {
			c.Close()
			t.Errorf("insecure %s accepted", s.Name)
		}
	}
	// TLS 1.3 still works (its suites are all AEAD).
	cfg := te.client.Clone()
	cfg.MinVersion = tls.VersionTLS13
	c, err := tls.Dial("tcp", te.addr, cfg)
	if err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	c.Close()
}

// TestLoginTooManySessions: a login refused because every session slot is
// someone else's is a 503 in the envelope, and ends nobody's session.
func TestLoginTooManySessions(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.a.Sessions.Max = 2
	admin := e.login("admin", "admin-pass")
	e.login("colon", "pa:ss:word")
	r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "user=viewer&passwd=viewer+pass")
	if r.status != 503 || r.errName != "UnavailableError" {
		t.Errorf("login at the bound: %d %q, want 503 UnavailableError", r.status, r.errName)
	}
	if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + admin}, ""); r.status != 200 {
		t.Errorf("admin's session after the refused login: %d", r.status)
	}
}
