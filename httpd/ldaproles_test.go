package httpd

import (
	"net/http"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/auth/ldapauth"
	"kvmd/auth/ldapauth/ldaptest"
)

// TestLDAPRoles: with the real slapd behind --auth-backend ldap and
// --ldap-role-groups, each LDAP user gets its group's role on the routes,
// by password and through a session.
func TestLDAPRoles(t *testing.T) {
	_, ext := ldapRoles(t, time.Minute)
	ok := func(w http.ResponseWriter, r *http.Request) error { writeBody(w, 200, okEmpty); return nil }
	e := newEnv(t, envOpts{external: ext, extraRoutes: func(s *Server) {
		s.handle("POST", "/test/atx", auth.RoleOperator, ok)
		s.handle("GET", "/test/diagnostics", auth.RoleAdmin, ok)
	}})
	for _, tc := range []struct {
		user      ldaptest.User
		atx, diag int
	}{
		{ldaptest.Alice, 200, 200},
		{ldaptest.Bob, 200, 403},
		{ldaptest.Carol, 403, 403},
	} {
		hdr := map[string]string{"Authorization": basic(tc.user.Name, tc.user.Password)}
		if r := e.req("POST", "/api/test/atx", hdr, ""); r.status != tc.atx {
			t.Errorf("%s POST atx: %d, want %d", tc.user.Name, r.status, tc.atx)
		}
		c := cookie(e.login(tc.user.Name, tc.user.Password))
		if r := e.req("GET", "/api/test/diagnostics", c, ""); r.status != tc.diag {
			t.Errorf("%s GET diagnostics with a session: %d, want %d", tc.user.Name, r.status, tc.diag)
		}
	}
}

// ldapRoles starts the real slapd and returns it with an External on it
// that takes roles from its groups (admin, operator, viewer: Alice, Bob,
// Carol), admin local, its cache ttl long.
func ldapRoles(t *testing.T, ttl time.Duration) (*ldaptest.Server, *auth.External) {
	t.Helper()
	s := ldaptest.Start(t)
	groups, err := ldapauth.ParseRoleGroups("admin=" + ldaptest.Group + ";operator=" + ldaptest.UniqueGroup + ";viewer=" + ldaptest.MemberOfGroup)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ldapauth.New(ldapauth.Config{URL: s.TLSURL, CAFile: s.CAFile, UserTemplate: ldaptest.UserTemplate,
		Timeout: 5 * time.Second, RoleGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := auth.NewExternal(auth.ExternalConfig{Backend: b, Local: []string{"admin"}, CacheTTL: ttl, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, ext
}
