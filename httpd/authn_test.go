package httpd

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
)

func basic(user, passwd string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+passwd))
}

func xhdr(user, passwd string) map[string]string {
	return map[string]string{"X-KVMD-User": user, "X-KVMD-Passwd": passwd}
}

// TestAuthRows walks the credentials of docs/api.md, "Authentication", in
// its order.
func TestAuthRows(t *testing.T) {
	e := newEnv(t, envOpts{})
	token := e.login("admin", "admin-pass")
	const unknownToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

	tests := []struct {
		name    string
		hdr     map[string]string
		status  int
		errName string
	}{
		{"nothing", nil, 401, "UnauthorizedError"},
		{"xhdr right", xhdr("admin", "admin-pass"), 200, ""},
		{"xhdr wrong", xhdr("admin", "nope"), 403, "ForbiddenError"},
		{"xhdr unknown user", xhdr("ghost", "admin-pass"), 403, "ForbiddenError"},
		{"xhdr missing passwd is empty", map[string]string{"X-KVMD-User": "admin"}, 403, "ForbiddenError"},
		{"xhdr bad name", xhdr("Admin!", "x"), 400, "ValidatorError"},
		{"xhdr non-UTF-8 name", xhdr("adm\xffin", "x"), 400, "ValidatorError"},
		{"xhdr name with blanks is trimmed", xhdr(" admin ", "admin-pass"), 200, ""},
		{"xhdr non-printable passwd", xhdr("admin", "caf\xc3\xa9"), 400, "ValidatorError"},
		{"xhdr passwd with spaces", xhdr("viewer", "viewer pass"), 200, ""},
		{"xhdr empty falls to cookie", map[string]string{"X-KVMD-User": "", "Cookie": "auth_token=" + token}, 200, ""},
		{"xhdr decides over a good cookie", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "bad", "Cookie": "auth_token=" + token}, 403, "ForbiddenError"},
		{"xhdr decides over a bad cookie", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass", "Cookie": "auth_token=zz"}, 200, ""},
		{"cookie right", map[string]string{"Cookie": "auth_token=" + token}, 200, ""},
		{"cookie among others", map[string]string{"Cookie": "a=b; auth_token=" + token + "; c=d"}, 200, ""},
		{"cookie malformed", map[string]string{"Cookie": "auth_token=nothex"}, 400, "ValidatorError"},
		{"cookie upper-case hex is malformed", map[string]string{"Cookie": "auth_token=" + strings.ToUpper(token)}, 400, "ValidatorError"},
		{"cookie unknown", map[string]string{"Cookie": "auth_token=" + unknownToken}, 403, "ForbiddenError"},
		{"cookie decides over good basic", map[string]string{"Cookie": "auth_token=" + unknownToken, "Authorization": basic("admin", "admin-pass")}, 403, "ForbiddenError"},
		{"cookie empty falls to basic", map[string]string{"Cookie": "auth_token=", "Authorization": basic("admin", "admin-pass")}, 200, ""},
		{"basic right", map[string]string{"Authorization": basic("admin", "admin-pass")}, 200, ""},
		{"basic scheme any case", map[string]string{"Authorization": "bAsIc " + base64.StdEncoding.EncodeToString([]byte("admin:admin-pass"))}, 200, ""},
		{"basic wrong", map[string]string{"Authorization": basic("admin", "wrong")}, 403, "ForbiddenError"},
		{"basic password with colons", map[string]string{"Authorization": basic("colon", "pa:ss:word")}, 200, ""},
		{"basic password with colons, cut wrong", map[string]string{"Authorization": basic("colon", "pa")}, 403, "ForbiddenError"},
		{"basic undecodable", map[string]string{"Authorization": "Basic !!!"}, 401, "UnauthorizedError"},
		{"basic without colon", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("admin"))}, 401, "UnauthorizedError"},
		{"basic not UTF-8", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("adm\xff:x"))}, 401, "UnauthorizedError"},
		{"basic bad name", map[string]string{"Authorization": basic("ROOT", "x")}, 400, "ValidatorError"},
		{"other scheme is no credential", map[string]string{"Authorization": "Bearer abc"}, 401, "UnauthorizedError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.req("GET", "/api/auth/check", tt.hdr, "")
			if r.status != tt.status || r.errName != tt.errName {
				t.Errorf("got %d %q (%s), want %d %q", r.status, r.errName, r.errMsg, tt.status, tt.errName)
			}
			if v := r.header.Get("WWW-Authenticate"); v != "" {
				t.Errorf("WWW-Authenticate %q sent: a browser would pop up a dialog", v)
			}
			if tt.status == 400 && strings.Contains(r.errMsg, "admin-pass") {
				t.Errorf("error message echoes the password: %q", r.errMsg)
			}
		})
	}
}

// trustedPeer returns a peer policy that trusts this test process over
// the unix socket, and the name it trusts it as: root, as every policy
// does, or, run by another user, a policy of that user's primary group
// (--unix-group), so that the peer-credential tests run either way.
func trustedPeer(t *testing.T) (func(uid, gid uint32) (string, bool), string) {
	t.Helper()
	group := ""
	if os.Geteuid() != 0 {
		g, err := user.LookupGroupId(strconv.Itoa(os.Getegid()))
		if err != nil {
			t.Fatalf("this process's group: %v", err)
		}
		group = g.Name
	}
	policy, err := PeerPolicy(group)
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.LookupId(strconv.Itoa(os.Geteuid()))
	if err != nil {
		t.Fatalf("this process's user: %v", err)
	}
	return policy, u.Username
}

func TestPeerCredentials(t *testing.T) {
	policy, name := trustedPeer(t)
	e := newEnv(t, envOpts{peer: policy})
	// Not on /api/auth/check, which never takes them (kvmd_compat_test.go).
	if r := e.reqUnix("POST", "/api/auth/logout", nil, ""); r.status != 200 {
		t.Errorf("%s over the unix socket: %d %s, want 200", name, r.status, r.body)
	}
	// A request forwarded by a local reverse proxy is not the proxy's own.
	if r := e.reqUnix("POST", "/api/auth/logout", map[string]string{"X-Real-IP": "192.0.2.7"}, ""); r.status != 401 {
		t.Errorf("proxied request over the unix socket: %d, want 401", r.status)
	}
	// Credentials present decide, even over the socket.
	if r := e.reqUnix("GET", "/api/auth/check", xhdr("admin", "wrong"), ""); r.status != 403 {
		t.Errorf("wrong password over the unix socket: %d, want 403", r.status)
	}
	// TCP never gets peer trust.
	if r := e.req("GET", "/api/auth/check", nil, ""); r.status != 401 {
		t.Errorf("no credentials over TCP: %d, want 401", r.status)
	}
}

func TestPeerPolicy(t *testing.T) {
	root, err := PeerPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := root(0, 0); !ok || name != "root" {
		t.Errorf("root: %q %v, want root true", name, ok)
	}
	if _, ok := root(65534, 65534); ok {
		t.Error("nobody allowed without a group configured")
	}
	grp, err := PeerPolicy("nogroup")
	if err != nil {
		t.Skipf("no nogroup here: %v", err)
	}
	if _, ok := grp(65534, 65534); !ok {
		t.Error("a peer whose primary group is the configured group is refused")
	}
	if _, ok := grp(12345, 12345); ok {
		t.Error("a peer outside the group is allowed")
	}
	if _, err := PeerPolicy("no-such-group-here"); err == nil {
		t.Error("an unknown group is accepted")
	}
}

func TestLogin(t *testing.T) {
	e := newEnv(t, envOpts{lifetime: time.Hour})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	json := map[string]string{"Content-Type": "application/json"}
	mp := func(fields ...string) (map[string]string, string) {
		var b strings.Builder
		for i := 0; i < len(fields); i += 2 {
			fmt.Fprintf(&b, "--XyZ\r\nContent-Disposition: form-data; name=%q\r\n\r\n%s\r\n", fields[i], fields[i+1])
		}
		b.WriteString("--XyZ--\r\n")
		return map[string]string{"Content-Type": "multipart/form-data; boundary=XyZ"}, b.String()
	}
	mpOK, mpBody := mp("user", "admin", "passwd", "admin-pass")
	mpBad, mpBadBody := mp("user", "admin", "passwd", "nope")

	tests := []struct {
		name    string
		hdr     map[string]string
		body    string
		status  int
		errName string
		maxAge  int
	}{
		{"form", form, "user=admin&passwd=admin-pass", 200, "", 3600},
		{"form expire shortens", form, "user=admin&passwd=admin-pass&expire=60", 200, "", 60},
		{"form expire cannot lengthen", form, "user=admin&passwd=admin-pass&expire=99999", 200, "", 3600},
		{"form expire 0 is the default", form, "user=admin&passwd=admin-pass&expire=0", 200, "", 3600},
		{"form colon password", form, "user=colon&passwd=pa%3Ass%3Aword", 200, "", 3600},
		{"form wrong", form, "user=admin&passwd=nope", 403, "ForbiddenError", 0},
		{"form unknown user", form, "user=ghost&passwd=nope", 403, "ForbiddenError", 0},
		{"form no user", form, "passwd=nope", 400, "ValidatorError", 0},
		{"form bad expire", form, "user=admin&passwd=admin-pass&expire=-1", 400, "ValidatorError", 0},
		{"form huge expire", form, "user=admin&passwd=admin-pass&expire=99999999999999999999", 400, "ValidatorError", 0},
		{"form malformed", form, "user=%zz", 400, "BadRequestError", 0},
		{"json", json, `{"user":"admin","passwd":"admin-pass"}`, 200, "", 3600},
		{"json expire number", json, `{"user":"admin","passwd":"admin-pass","expire":30}`, 200, "", 30},
		{"json expire string", json, `{"user":"admin","passwd":"admin-pass","expire":"30"}`, 200, "", 30},
		{"json wrong", json, `{"user":"admin","passwd":"x"}`, 403, "ForbiddenError", 0},
		{"json broken", json, `{"user":`, 400, "BadRequestError", 0},
		{"json not an object", json, `[1,2]`, 400, "BadRequestError", 0},
		{"json user not a string", json, `{"user":1,"passwd":"x"}`, 400, "BadRequestError", 0},
		{"multipart", mpOK, mpBody, 200, "", 3600},
		{"multipart wrong", mpBad, mpBadBody, 403, "ForbiddenError", 0},
		{"multipart broken", map[string]string{"Content-Type": "multipart/form-data; boundary=XyZ"}, "--XyZ\r\nContent-Disp", 400, "BadRequestError", 0},
		{"multipart no boundary", map[string]string{"Content-Type": "multipart/form-data"}, "x", 400, "BadRequestError", 0},
		{"no content type", nil, "user=admin&passwd=admin-pass", 400, "BadRequestError", 0},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, "user=admin", 400, "BadRequestError", 0},
		{"body too large", form, "user=admin&passwd=" + strings.Repeat("a", 10000), 413, "RequestTooLargeError", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.req("POST", "/api/auth/login", tt.hdr, tt.body)
			if r.status != tt.status || r.errName != tt.errName {
				t.Fatalf("got %d %q (%s), want %d %q", r.status, r.errName, r.errMsg, tt.status, tt.errName)
			}
			if tt.status != 200 {
				if sc := r.header.Values("Set-Cookie"); len(sc) != 0 {
					t.Errorf("failed login set cookies %q", sc)
				}
				return
			}
			c := (&http.Response{Header: r.header}).Cookies()
			if len(c) != 1 {
				t.Fatalf("cookies %q, want one", r.header.Values("Set-Cookie"))
			}
			if c[0].Name != "auth_token" || len(c[0].Value) != 64 || c[0].Path != "/" || !c[0].HttpOnly ||
				c[0].SameSite != http.SameSiteStrictMode || c[0].Secure || c[0].MaxAge != tt.maxAge {
				t.Errorf("cookie %q: want auth_token=<64 hex>; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict, no Secure on plain HTTP",
					r.header.Get("Set-Cookie"), tt.maxAge)
			}
			if string(r.body) != `{"ok":true,"result":{}}` {
				t.Errorf("body %s", r.body)
			}
			if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + c[0].Value}, ""); r.status != 200 {
				t.Errorf("new session refused: %d", r.status)
			}
		})
	}
	if !regexp.MustCompile(`msg=http addr=127.0.0.1 method=POST path=/api/auth/login status=200 bytes=23 user=admin auth=login`).MatchString(e.logs.String()) {
		t.Error("the access log does not name the user of a successful login")
	}
	if r := e.req("GET", "/api/auth/login", nil, ""); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET login: %d Allow %q, want 405 Allow POST", r.status, r.header.Get("Allow"))
	}
}

func TestLogout(t *testing.T) {
	e := newEnv(t, envOpts{})
	a, b := e.login("admin", "admin-pass"), e.login("admin", "admin-pass")
	ck := func(tok string) map[string]string { return map[string]string{"Cookie": "auth_token=" + tok} }

	r := e.req("POST", "/api/auth/logout", ck(a), "")
	if r.status != 200 {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if sc := r.header.Get("Set-Cookie"); !strings.Contains(sc, "auth_token=;") || !strings.Contains(sc, "Max-Age=0") {
		t.Errorf("logout Set-Cookie %q does not clear the cookie", sc)
	}
	if r := e.req("GET", "/api/auth/check", ck(a), ""); r.status != 403 {
		t.Errorf("logged-out session: %d, want 403", r.status)
	}
	if r := e.req("GET", "/api/auth/check", ck(b), ""); r.status != 200 {
		t.Errorf("the other session of the same user ended too: %d", r.status)
	}
	if r := e.req("POST", "/api/auth/logout", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("logout without a cookie: %d, want 200", r.status)
	}
	if r := e.req("POST", "/api/auth/logout", nil, ""); r.status != 401 {
		t.Errorf("logout with nothing: %d, want 401", r.status)
	}
	// A request authenticated otherwise that carries a cookie ends that session.
	hdr := xhdr("admin", "admin-pass")
	hdr["Cookie"] = "auth_token=" + b
	if r := e.req("POST", "/api/auth/logout", hdr, ""); r.status != 200 {
		t.Errorf("logout: %d", r.status)
	}
	if r := e.req("GET", "/api/auth/check", ck(b), ""); r.status != 403 {
		t.Errorf("session carried beside header credentials not ended: %d", r.status)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, envOpts{lifetime: time.Hour, idle: 10 * time.Minute, fakeClock: true})
	t0 := time.Now()
	e.setNow(t0)
	tok := e.login("admin", "admin-pass")
	ck := map[string]string{"Cookie": "auth_token=" + tok}
	for _, step := range []struct {
		at     time.Duration
		status int
	}{
		{9 * time.Minute, 200},  // used: idle clock restarts
		{18 * time.Minute, 200}, // 9 min idle
		{29 * time.Minute, 403}, // 11 min idle: ended
	} {
		e.setNow(t0.Add(step.at))
		if r := e.req("GET", "/api/auth/check", ck, ""); r.status != step.status {
			t.Fatalf("at +%s: %d, want %d", step.at, r.status, step.status)
		}
	}

	e.setNow(t0)
	tok = e.login("admin", "admin-pass")
	ck = map[string]string{"Cookie": "auth_token=" + tok}
	for at := 5 * time.Minute; at < time.Hour; at += 5 * time.Minute {
		e.setNow(t0.Add(at))
		if r := e.req("GET", "/api/auth/check", ck, ""); r.status != 200 {
			t.Fatalf("at +%s: %d, want 200", at, r.status)
		}
	}
	e.setNow(t0.Add(time.Hour))
	if r := e.req("GET", "/api/auth/check", ck, ""); r.status != 403 {
		t.Fatalf("past the lifetime: %d, want 403", r.status)
	}

	// expire at login shortens this session only.
	e.setNow(t0)
	r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "user=admin&passwd=admin-pass&expire=60")
	short := cookieValue(t, r.header, "auth_token")
	e.setNow(t0.Add(61 * time.Second))
	if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + short}, ""); r.status != 403 {
		t.Errorf("session past its login expire: %d, want 403", r.status)
	}
}

func TestUsersFileChanges(t *testing.T) {
	e := newEnv(t, envOpts{})
	adminTok := e.login("admin", "admin-pass")
	viewerTok := e.login("viewer", "viewer pass")
	colonTok := e.login("colon", "pa:ss:word")
	// Warm the verification cache for the old password.
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Fatal(r.status)
	}

	// admin's password changes, viewer is removed, newbie is added, colon stays.
	writeUsers(t, e.users, map[string]string{"admin": "new-pass", "colon": "pa:ss:word", "newbie": "hello"})
	eventually(t, "new user accepted", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("newbie", "hello"), "").status == 200
	})
	checks := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"old password (cached before)", xhdr("admin", "admin-pass"), 403},
		{"new password", xhdr("admin", "new-pass"), 200},
		{"removed user", xhdr("viewer", "viewer pass"), 403},
		{"session of changed user", map[string]string{"Cookie": "auth_token=" + adminTok}, 403},
		{"session of removed user", map[string]string{"Cookie": "auth_token=" + viewerTok}, 403},
		{"session of unchanged user", map[string]string{"Cookie": "auth_token=" + colonTok}, 200},
	}
	for _, c := range checks {
		if r := e.req("GET", "/api/auth/check", c.hdr, ""); r.status != c.status {
			t.Errorf("%s: %d, want %d", c.name, r.status, c.status)
		}
	}

	// A file that becomes unreadable fails closed, and recovers.
	if err := os.Remove(e.users); err != nil {
		t.Fatal(err)
	}
	eventually(t, "missing users file refuses", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("admin", "new-pass"), "").status == 403
	})
	writeUsers(t, e.users, map[string]string{"admin": "back"})
	eventually(t, "users file back", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("admin", "back"), "").status == 200
	})
}

func TestTwoFactor(t *testing.T) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "kvmd", AccountName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	secret := key.Secret()
	e := newEnv(t, envOpts{totpSecret: secret, limiterFreeFail: 1000, fakeClock: true})
	now := time.Date(2026, 11, 21, 12, 0, 10, 0, time.UTC) // 10 s into a step
	e.setNow(now)
	code := func(at time.Time) string {
		c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	step := 30 * time.Second
	tests := []struct {
		name   string
		passwd string
		status int
	}{
		{"current code", "admin-pass" + code(now), 200},
		{"previous step", "admin-pass" + code(now.Add(-step)), 200},
		{"next step", "admin-pass" + code(now.Add(step)), 200},
		{"two steps back", "admin-pass" + code(now.Add(-2*step)), 403},
		{"three steps back", "admin-pass" + code(now.Add(-3*step)), 403},
		{"no code", "admin-pass", 403},
		{"code only", code(now), 403},
		{"wrong password, right code", "nope" + code(now), 403},
		{"empty", "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := e.req("GET", "/api/auth/check", xhdr("admin", tt.passwd), ""); r.status != tt.status {
				t.Errorf("xhdr: %d, want %d", r.status, tt.status)
			}
		})
	}
	// Clock edges: a code made in the last second of its step is still
	// good 29 s into the next, and not 30 s later.
	last := time.Date(2026, 11, 21, 12, 0, 29, 0, time.UTC)
	c := code(last)
	for _, tt := range []struct {
		at     time.Time
		status int
	}{
		{last.Add(30 * time.Second), 200},
		{last.Add(31 * time.Second), 403},
	} {
		e.setNow(tt.at)
		// A fresh password each time would miss the cache; 2FA is
		// checked before it anyway.
		if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"+c), ""); r.status != tt.status {
			t.Errorf("code of %s at %s: %d, want %d", last.Format("15:04:05"), tt.at.Format("15:04:05"), r.status, tt.status)
		}
	}
	e.setNow(now)

	// Login takes the code the same way.
	r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "user=admin&passwd=admin-pass"+code(now))
	if r.status != 200 {
		t.Errorf("login with code: %d", r.status)
	}

	// Disabling 2FA needs no restart: an empty file turns it off.
	if err := os.WriteFile(e.totpPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2FA off", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), "").status == 200
	})
	// Enabling it again too.
	if err := os.WriteFile(e.totpPath, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2FA on", func() bool {
		return e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), "").status == 403
	})
	// Unreadable or garbage: fail closed, even with a right code.
	for _, content := range []string{"not base32 !!!", ""} {
		if content == "" {
			os.Remove(e.totpPath)
		} else if err := os.WriteFile(e.totpPath, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "fail closed", func() bool {
			return e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"+code(now)), "").status == 403 &&
				e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), "").status == 403
		})
	}
	if !strings.Contains(e.logs.String(), "2FA secret unusable") {
		t.Error("the log does not say why authentication fails closed")
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	for i := 0; i < 5; i++ {
		if r := e.req("GET", "/api/auth/check", xhdr("admin", "guess"), ""); r.status != 403 {
			t.Fatalf("failure %d: %d, want 403", i+1, r.status)
		}
	}
	// The sixth failure blocks the address.
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "guess"), ""); r.status != 403 {
		t.Fatalf("sixth failure: %d, want 403", r.status)
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
	}{
		{"right password", xhdr("admin", "admin-pass")},
		{"basic", map[string]string{"Authorization": basic("admin", "admin-pass")}},
	} {
		r := e.req("GET", "/api/auth/check", c.hdr, "")
		if r.status != 429 || r.errName != "TooManyRequestsError" || r.header.Get("Retry-After") == "" {
			t.Errorf("blocked address, %s: %d %q Retry-After %q, want 429 with Retry-After", c.name, r.status, r.errName, r.header.Get("Retry-After"))
		}
	}
	r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "user=admin&passwd=admin-pass")
	if r.status != 429 {
		t.Errorf("login from blocked address: %d, want 429", r.status)
	}
	// Another address is not locked out, nor is the account.
	if r := e.reqFrom("127.0.0.2", "GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("another address: %d, want 200", r.status)
	}
	// The block ends.
	time.Sleep(1100 * time.Millisecond)
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("after the backoff: %d, want 200", r.status)
	}
	logs := e.logs.String()
	for _, want := range []string{`msg="auth failed" user=admin method=xhdr addr=127.0.0.1`, `msg="auth ok" user=admin method=xhdr addr=127.0.0.2`, `blocked=1s`} {
		if !strings.Contains(logs, want) {
			t.Errorf("audit log lacks %q", want)
		}
	}
}

func TestUnprefixedPaths(t *testing.T) {
	e := newEnv(t, envOpts{})
	if r := e.req("GET", "/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("/auth/check (nginx strips /api): %d", r.status)
	}
	for _, p := range []string{"/api/nope", "/nope", "/api", "/", "/api/auth/check/"} {
		if r := e.req("GET", p, xhdr("admin", "admin-pass"), ""); r.status != 404 || r.errName != "NotFoundError" {
			t.Errorf("%s: %d %q, want 404 NotFoundError", p, r.status, r.errName)
		}
	}
	r := e.req("DELETE", "/api/auth/check", xhdr("admin", "admin-pass"), "")
	if r.status != 405 || r.errName != "MethodNotAllowedError" || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE check: %d %q Allow %q", r.status, r.errName, r.header.Get("Allow"))
	}
}
