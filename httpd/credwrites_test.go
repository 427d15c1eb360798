package httpd

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"kvmd/auth"
)

// jsonHdr adds a JSON Content-Type to hdr.
func jsonHdr(hdr map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range hdr {
		h[k] = v
	}
	return h
}

// credFiles reads the files a credential write would change.
func (e *env) credFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range []string{e.users, auth.RolesPath(e.users), auth.TokensPath(e.users), e.totpPath} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// TestTokenCannotWriteCredentials: an API token is for automation. Even an
// admin's cannot add a user (who could then mint tokens that outlive the
// first), reset a password, change a role, remove a user, make or revoke
// tokens, or touch 2FA: 403 ForbiddenError each, and no file changes. It
// may still read what its role allows.
func TestTokenCannotWriteCredentials(t *testing.T) {
	e := newEnv(t, envOpts{totpConfigured: true})
	if err := os.WriteFile(e.totpPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	admin := xhdr("admin", "admin-pass")
	eventually(t, "the empty secret file read", func() bool { return e.req("GET", "/api/auth/check", admin, "").status == 200 })
	tok := e.mkToken(t, admin, `{"name":"auto"}`)
	e.mkToken(t, xhdr("viewer", "viewer pass"), `{"name":"other"}`)
	if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 200 {
		t.Fatalf("the admin token: %d %s", r.status, r.body)
	}
	before := e.credFiles(t)
	writes := []struct{ method, path, body string }{
		{"POST", "/api/auth/users", `{"name":"mallory","passwd":"mallory-pass","role":"admin"}`},
		{"PATCH", "/api/auth/users", `{"name":"colon","passwd":"taken-over"}`},
		{"PATCH", "/api/auth/users", `{"name":"viewer","role":"admin"}`},
		{"DELETE", "/api/auth/users?name=viewer", ""},
		{"POST", "/api/auth/tokens", `{"name":"heir"}`},
		{"DELETE", "/api/auth/tokens?name=other&user=viewer", ""},
		{"POST", "/api/auth/totp/begin", ""},
		{"POST", "/api/auth/totp/confirm", `{"code":"123456"}`},
		{"DELETE", "/api/auth/totp", ""},
		{"DELETE", "/api/auth/tokens?name=auto", ""}, // itself: last, so that on failure the others are still tried
	}
	for _, w := range writes {
		r := e.req(w.method, w.path, jsonHdr(bearer(tok)), w.body)
		if r.status != 403 || r.errName != "ForbiddenError" || !strings.Contains(r.errMsg, "API token") {
			t.Errorf("admin token %s %s: %d %s, want 403 ForbiddenError naming API tokens", w.method, w.path, r.status, r.body)
		}
	}
	after := e.credFiles(t)
	for p, b := range before {
		if !bytes.Equal(b, after[p]) {
			t.Errorf("%s changed under a token's writes", p)
		}
	}
	// What its role allows otherwise: reads of users, tokens, sessions, 2FA.
	for _, p := range []string{"/api/auth/users", "/api/auth/tokens", "/api/auth/sessions", "/api/auth/totp", "/api/auth/check"} {
		if r := e.req("GET", p, bearer(tok), ""); r.status != 200 {
			t.Errorf("admin token GET %s: %d %s", p, r.status, r.body)
		}
	}
	// The same writes with the admin's password still work.
	if r := e.req("POST", "/api/auth/users", jsonHdr(admin), `{"name":"dave","passwd":"dave-pass-1"}`); r.status != 200 {
		t.Errorf("admin password adding a user: %d %s", r.status, r.body)
	}
}

// TestPasswordLimit: bcrypt reads 72 bytes of a password; a longer one is
// refused with 400 naming the limit wherever a password is set, never a
// 500, and 72 bytes work.
func TestPasswordLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := jsonHdr(xhdr("admin", "admin-pass"))
	p72, p73 := strings.Repeat("p", 72), strings.Repeat("p", 73)
	for _, c := range []struct{ method, body string }{
		{"POST", `{"name":"dave","passwd":"` + p73 + `"}`},
		{"POST", `{"name":"dave","passwd":"` + strings.Repeat("q", 512) + `"}`},
		{"PATCH", `{"name":"viewer","passwd":"` + p73 + `"}`},
	} {
		r := e.req(c.method, "/api/auth/users", admin, c.body)
		if r.status != 400 || r.errName != "ValidatorError" || !strings.Contains(r.errMsg, "72") {
			t.Errorf("%s a %d-byte password: %d %s, want 400 ValidatorError naming 72", c.method, len(c.body), r.status, r.body)
		}
	}
	if r := e.req("POST", "/api/auth/users", admin, `{"name":"dave","passwd":"`+p72+`"}`); r.status != 200 {
		t.Fatalf("a 72-byte password: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", xhdr("dave", p72), ""); r.status != 200 {
		t.Errorf("signing in with the 72-byte password: %d", r.status)
	}
}

// TestCanonicalUserName: a user name is taken with its surrounding blanks
// stripped (as kvmd's valid_user does) wherever the API reads one, so
// " viewer" is viewer: a token made for it is viewer's, and its sessions
// are the ones listed and ended.
func TestCanonicalUserName(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := xhdr("admin", "admin-pass")
	sess := e.login("viewer", "viewer pass")
	if r := e.req("GET", "/api/auth/sessions?user=%20viewer", cookie(sess), ""); r.status != 200 || !strings.Contains(string(r.body), `"user":"viewer"`) {
		t.Errorf("viewer listing user=%%20viewer: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/sessions?user=%20viewer", admin, ""); r.status != 200 || !strings.Contains(string(r.body), `"user":"viewer"`) {
		t.Errorf("admin listing user=%%20viewer: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/sessions?user=%20viewer", admin, ""); r.status != 200 || !strings.Contains(string(r.body), `"ended":1`) {
		t.Errorf("DELETE user=%%20viewer: %d %s, want ended 1", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", cookie(sess), ""); r.status != 403 {
		t.Errorf("viewer's session after DELETE user=%%20viewer: %d", r.status)
	}
	r := e.req("POST", "/api/auth/tokens", jsonHdr(admin), `{"name":"t","user":" viewer","role":"viewer"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"user":"viewer"`) {
		t.Fatalf(`token for " viewer": %d %s, want 200 for viewer`, r.status, r.body)
	}
	var v struct {
		Result struct{ Token string } `json:"result"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if r := e.req("GET", "/api/auth/check", bearer(v.Result.Token), ""); r.status != 200 {
		t.Errorf("the token: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/tokens?user=%20viewer", admin, ""); !strings.Contains(string(r.body), `"name":"t"`) {
		t.Errorf("tokens of %%20viewer: %d %s", r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/tokens?user=%20viewer&name=t", admin, ""); r.status != 200 {
		t.Errorf("DELETE token of user=%%20viewer: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", bearer(v.Result.Token), ""); r.status != 403 {
		t.Errorf("the revoked token: %d", r.status)
	}
	// A token's name is taken as given: blanks around it are a 400.
	if r := e.req("POST", "/api/auth/tokens", jsonHdr(admin), `{"name":" ha"}`); r.status != 400 || r.errName != "ValidatorError" {
		t.Errorf(`token named " ha": %d %s, want 400`, r.status, r.body)
	}
	if r := e.req("DELETE", "/api/auth/tokens?name=%20t&user=viewer", admin, ""); r.status != 400 || r.errName != "ValidatorError" {
		t.Errorf(`DELETE token name=%%20t: %d %s, want 400`, r.status, r.body)
	}
	// A name that is not one, blanks stripped or not, is 400.
	for _, q := range []string{"user=%20", "user=Viewer", "user=vi%20ewer"} {
		if r := e.req("DELETE", "/api/auth/sessions?"+q, admin, ""); r.status != 400 || r.errName != "ValidatorError" {
			t.Errorf("DELETE sessions?%s: %d %s, want 400", q, r.status, r.body)
		}
	}
}

// TestPasswordResetRevokesTokens: a password reset with revoke_tokens
// revokes every API token of the user (their open requests end), and says
// how many; without it the tokens stay.
func TestPasswordResetRevokesTokens(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := jsonHdr(xhdr("admin", "admin-pass"))
	t1 := e.mkToken(t, xhdr("operator", "operator-pass"), `{"name":"ha"}`)
	t2 := e.mkToken(t, xhdr("operator", "operator-pass"), `{"name":"ci"}`)
	tv := e.mkToken(t, xhdr("viewer", "viewer pass"), `{"name":"ha"}`)
	if r := e.req("PATCH", "/api/auth/users", admin, `{"name":"operator","passwd":"operator-pass-2"}`); r.status != 200 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", bearer(t1), ""); r.status != 200 {
		t.Errorf("a token after a reset without revoke_tokens: %d", r.status)
	}
	r := e.req("PATCH", "/api/auth/users", admin, `{"name":"operator","passwd":"operator-pass-3","revoke_tokens":true}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"tokens_revoked":2`) {
		t.Fatalf("reset with revoke_tokens: %d %s", r.status, r.body)
	}
	for _, tok := range []string{t1, t2} {
		if r := e.req("GET", "/api/auth/check", bearer(tok), ""); r.status != 403 {
			t.Errorf("a token after a reset with revoke_tokens: %d", r.status)
		}
	}
	if r := e.req("GET", "/api/auth/check", bearer(tv), ""); r.status != 200 {
		t.Errorf("another user's token: %d", r.status)
	}
	if r := e.req("GET", "/api/auth/check", xhdr("operator", "operator-pass-3"), ""); r.status != 200 {
		t.Errorf("the new password: %d", r.status)
	}
	// revoke_tokens is about a password change: alone it is refused.
	if r := e.req("PATCH", "/api/auth/users", admin, `{"name":"viewer","role":"viewer","revoke_tokens":true}`); r.status != 400 {
		t.Errorf("revoke_tokens without passwd: %d %s", r.status, r.body)
	}
	if !strings.Contains(e.logs.String(), `msg="tokens revoked" user=operator by=admin`) || !strings.Contains(e.logs.String(), `msg="token revoked" user=operator token=ci by=admin`) {
		t.Errorf("no 'tokens revoked' line in the log")
	}
}
