package httpd

import (
	"strings"
	"testing"
)

// TestTwoFactorNotConfigured: on a device started without --totp-secret
// the 2FA endpoints say what to configure (409), not that they do not
// exist (404); roles still apply.
func TestTwoFactorNotConfigured(t *testing.T) {
	e := newEnv(t, envOpts{}) // no secret file
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/auth/totp", ""},
		{"POST", "/api/auth/totp/begin", ""},
		{"POST", "/api/auth/totp/confirm", `{"code":"123456"}`},
		{"DELETE", "/api/auth/totp", ""},
	} {
		hdr := map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass", "Content-Type": "application/json"}
		r := e.req(tc.method, tc.path, hdr, tc.body)
		if r.status != 409 || r.errName != "TwoFactorNotConfiguredError" || !strings.Contains(r.errMsg, "--totp-secret FILE") {
			t.Errorf("%s %s: %d %s %q, want 409 TwoFactorNotConfiguredError saying what to configure", tc.method, tc.path, r.status, r.errName, r.errMsg)
		}
	}
	if r := e.req("GET", "/api/auth/totp", xhdr("viewer", "viewer pass"), ""); r.status != 403 {
		t.Errorf("a viewer: %d, want 403", r.status)
	}
}
