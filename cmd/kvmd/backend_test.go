package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"kvmd/auth/ldapauth/ldaptest"
	"kvmd/internal/testutil"
)

// TestParseAuth checks the external authentication settings: defaults,
// the config file's keys, and the combinations refused at start.
func TestParseAuth(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "htpasswd")
	base := []string{"--users", users}

	cfg, err := parseServe(base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AuthBackend != "file" || !reflect.DeepEqual(cfg.AuthLocalUsers, []string{"admin"}) ||
		cfg.AuthCacheTTL != time.Minute || cfg.AuthTimeout != 5*time.Second || cfg.RADIUSRetries != 2 || cfg.RADIUSNASID != "kvmd" {
		t.Errorf("defaults: %+v", cfg)
	}

	for _, tc := range []struct {
		args  []string
		local []string
	}{
		{[]string{"--auth-local-users", "ops"}, []string{"ops"}},
		{[]string{"--auth-local-users", "ops,root", "--auth-local-users", " admin ,ops"}, []string{"ops", "root", "admin"}},
		{[]string{"--auth-local-users", ""}, nil},
		{[]string{"--auth-local-users=,"}, nil},
	} {
		cfg, err := parseServe(append(base, tc.args...), io.Discard)
		if err != nil || !reflect.DeepEqual(cfg.AuthLocalUsers, tc.local) {
			t.Errorf("%q: local users %q (%v), want %q", tc.args, cfg.AuthLocalUsers, err, tc.local)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown backend", []string{"--auth-backend", "kerberos"}, `"kerberos": want one of file, ldap, radius, http`},
		{"ldap without url", []string{"--auth-backend", "ldap", "--ldap-user-template", "{user}@x"}, "needs --ldap-url"},
		{"ldap without template", []string{"--auth-backend", "ldap", "--ldap-url", "ldaps://x"}, "needs --ldap-user-template"},
		{"template without {user}", []string{"--auth-backend", "ldap", "--ldap-url", "ldaps://x", "--ldap-user-template", "uid=x"}, "has no {user}"},
		{"starttls on ldaps", []string{"--auth-backend", "ldap", "--ldap-url", "ldaps://x", "--ldap-user-template", "{user}@x", "--ldap-starttls"}, "ldap://"},
		{"radius without server", []string{"--auth-backend", "radius", "--radius-secret-file", "s"}, "needs --radius-server"},
		{"radius without secret", []string{"--auth-backend", "radius", "--radius-server", "r:1812"}, "needs --radius-secret-file"},
		{"http without url", []string{"--auth-backend", "http", "--http-auth-secret-file", "s"}, "needs --http-auth-url"},
		{"http without secret", []string{"--auth-backend", "http", "--http-auth-url", "https://a"}, "needs --http-auth-secret-file"},
		{"ldap option, file backend", []string{"--ldap-url", "ldaps://x"}, "--ldap-url is set, but --auth-backend is file, not ldap"},
		{"http option, ldap backend", []string{"--auth-backend", "ldap", "--ldap-url", "ldaps://x", "--ldap-user-template", "{user}@x", "--http-auth-ca-file", "ca"}, "--http-auth-ca-file is set, but --auth-backend is ldap"},
		{"bad local user", []string{"--auth-local-users", "Admin"}, `--auth-local-users "Admin"`},
		{"negative TTL", []string{"--auth-cache-ttl", "-1s"}, "negative"},
		{"zero timeout", []string{"--auth-timeout", "0"}, "positive"},
		{"negative retries", []string{"--radius-retries", "-1"}, "negative"},
	} {
		if _, err := parseServe(append(base, tc.args...), io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// authService is an HTTP authentication service for the daemon's tests:
// alice's password is "alice-pass"; "down" makes it answer 500.
type authService struct {
	calls atomic.Int32
	down  atomic.Bool
}

func (s *authService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	var c struct{ User, Passwd string }
	if r.Header.Get("Authorization") != "Bearer e2e-secret" || json.NewDecoder(r.Body).Decode(&c) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch {
	case s.down.Load():
		w.WriteHeader(http.StatusInternalServerError)
	case c.User == "alice" && c.Passwd == "alice-pass":
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusForbidden)
	}
}

// TestServeHTTPBackend runs the daemon with --auth-backend http against a
// service of the test's.
func TestServeHTTPBackend(t *testing.T) {
	svc := &authService{}
	ts := httptest.NewServer(svc)
	defer ts.Close()
	users := usersFile(t, "admin", "pw")
	// bob is in the users file but not local: the file is no fallback.
	if _, stderr, err := runKvmd(t, "bob-pw\n", "user", "add", "bob", "--users", users); err != nil {
		t.Fatal(err, stderr)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("e2e-secret\n"), 0o600)
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr,
		"--auth-backend", "http", "--http-auth-url", ts.URL+"/check", "--http-auth-secret-file", secret,
		"--auth-timeout", "2s")
	d.stderr.wait(t, `kvmd listening`)
	d.stderr.wait(t, `msg="external authentication" component=auth backend=http local_users=admin cache_ttl=1m0s timeout=2s`)
	d.stderr.wait(t, `users in the users file but not in auth-local-users.*users=bob`)

	c := &http.Client{}
	url := "http://" + addr + "/api/auth/check"
	for _, tc := range []struct {
		user, passwd string
		want         int
	}{
		{"alice", "alice-pass", 200},
		{"alice", "alice-pass", 200}, // cached
		{"alice", "nope", 403},
		{"admin", "pw", 200},   // local
		{"bob", "bob-pw", 403}, // not local, unknown to the service
		{"admin", "alice-pass", 403},
	} {
		if st := get(t, c, url, basicAuth(tc.user, tc.passwd)); st != tc.want {
			t.Errorf("%s/%s: %d, want %d", tc.user, tc.passwd, st, tc.want)
		}
	}
	if n := svc.calls.Load(); n != 3 {
		t.Errorf("the service was asked %d times, want 3 (alice once thanks to the cache, her wrong password, bob)", n)
	}

	// Login, then the session.
	resp, err := c.PostForm("http://"+addr+"/api/auth/login", map[string][]string{"user": {"alice"}, "passwd": {"alice-pass"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var token string
	for _, ck := range resp.Cookies() {
		if ck.Name == "auth_token" {
			token = ck.Value
		}
	}
	if resp.StatusCode != 200 || token == "" {
		t.Fatalf("login: %d, token %q", resp.StatusCode, token)
	}

	// The service fails: 503 in the JSON envelope, but the session, the
	// cached password and the local user still work.
	svc.down.Store(true)
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("alice", "other-pass")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		OK     bool `json:"ok"`
		Result struct {
			Error string `json:"error"`
		} `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != 503 || env.OK || env.Result.Error != "UnavailableError" {
		t.Errorf("service down: %d %+v, want 503 UnavailableError", resp.StatusCode, env)
	}
	for name, hdr := range map[string]map[string]string{
		"session":         {"Cookie": "auth_token=" + token},
		"cached password": basicAuth("alice", "alice-pass"),
		"local user":      basicAuth("admin", "pw"),
	} {
		if st := get(t, c, url, hdr); st != 200 {
			t.Errorf("%s while the service is down: %d", name, st)
		}
	}
	d.stderr.wait(t, `msg="auth unavailable" component=auth user=alice method=basic .*backend=http`)
	if err := d.stop(t); err != nil {
		t.Errorf("exit: %v", err)
	}
}

func TestServeBadBackend(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ldap without url", []string{"--auth-backend", "ldap"}, "needs --ldap-url"},
		{"http secret missing", []string{"--auth-backend", "http", "--http-auth-url", "https://auth.example.org", "--http-auth-secret-file", filepath.Join(dir, "nope")}, "no such file"},
		{"http in clear", []string{"--auth-backend", "http", "--http-auth-url", "http://auth.example.org", "--http-auth-secret-file", users}, "loopback"},
		{"radius secret missing", []string{"--auth-backend", "radius", "--radius-server", "r.example.org", "--radius-secret-file", filepath.Join(dir, "nope")}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runKvmd(t, "", append([]string{"serve", "--users", users, "--listen", testutil.FreeAddr(t)}, tc.args...)...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("err %v, stderr %q: want a failure saying %q", err, stderr, tc.want)
			}
		})
	}
}

// TestServeLDAPWith2FA runs the daemon against a real OpenLDAP (slapd on
// loopback, LDAPS with the test CA, a required group) with 2FA on: the
// code is split off before the directory sees the password, and every
// refusal (wrong code, no code, wrong password, unknown user, not in the
// group) is a 403, while the local admin still uses the users file.
func TestServeLDAPWith2FA(t *testing.T) {
	srv := ldaptest.Start(t)
	const secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	totpFile := filepath.Join(t.TempDir(), "totp.secret")
	if err := os.WriteFile(totpFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--totp-secret", totpFile,
		"--auth-backend", "ldap", "--ldap-url", srv.TLSURL, "--ldap-ca-file", srv.CAFile,
		"--ldap-user-template", ldaptest.UserTemplate, "--ldap-group", ldaptest.Group, "--auth-timeout", "3s")
	d.stderr.wait(t, `kvmd listening`)

	code := func(at time.Time) string {
		c, err := totp.GenerateCode(secret, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	now := time.Now()
	wrong := "000000"
	if code(now) == wrong {
		wrong = "111111"
	}
	c := &http.Client{}
	url := "http://" + addr + "/api/auth/check"
	alice, bob := ldaptest.Alice, ldaptest.Bob
	for _, tc := range []struct {
		name, user, passwd string
		want               int
	}{
		{"directory user with the code", alice.Name, alice.Password + code(now), 200},
		{"no code", alice.Name, alice.Password, 403},
		{"wrong code", alice.Name, alice.Password + wrong, 403},
		{"wrong password", alice.Name, "not-" + alice.Password + code(now), 403},
		{"not in the group", bob.Name, bob.Password + code(now), 403},
		{"unknown user", "mallory", "whatever" + code(now), 403},
		{"local admin with the code", "admin", "pw" + code(now), 200},
		{"local admin's password at the directory", alice.Name, "pw" + code(now), 403},
	} {
		if st := get(t, c, url, map[string]string{"X-KVMD-User": tc.user, "X-KVMD-Passwd": tc.passwd}); st != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, st, tc.want)
		}
	}
	d.stderr.wait(t, `msg="auth failed" component=auth user=bob method=xhdr`)
}
