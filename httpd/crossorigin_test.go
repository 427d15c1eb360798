package httpd

import (
	"strings"
	"testing"
)

// TestCrossSiteCookieRequests: a state-changing request authenticated by
// the session cookie is refused (403) when a browser says it comes from
// another origin; a page on another site could otherwise log the user out
// (or, later, press the power button). Header, Basic and peer clients are
// no browser session and are unaffected, as are GETs.
func TestCrossSiteCookieRequests(t *testing.T) {
	e := newEnv(t, envOpts{})
	host := strings.TrimPrefix(e.base, "http://")
	tests := []struct {
		name   string
		method string
		hdr    map[string]string
		cookie bool
		want   int
	}{
		{"cookie, cross-site Origin", "POST", map[string]string{"Origin": "https://evil.example"}, true, 403},
		{"cookie, Sec-Fetch-Site cross-site", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, true, 403},
		{"cookie, Sec-Fetch-Site same-site (another origin)", "POST", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other." + host}, true, 403},
		{"cookie, Origin null", "POST", map[string]string{"Origin": "null"}, true, 403},
		{"cookie, Origin of another port", "POST", map[string]string{"Origin": "http://127.0.0.1:1"}, true, 403},
		{"cookie, own Origin", "POST", map[string]string{"Origin": e.base}, true, 200},
		{"cookie, Sec-Fetch-Site same-origin", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.base}, true, 200},
		{"cookie, no Origin (curl)", "POST", nil, true, 200},
		{"cookie, cross-site GET", "GET", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, true, 200},
		{"headers, cross-site Origin", "POST", merge(xhdr("admin", "admin-pass"), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}), false, 200},
		{"basic, cross-site Origin", "POST", map[string]string{"Authorization": basic("admin", "admin-pass"), "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, false, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := merge(nil, tt.hdr)
			var token string
			if tt.cookie {
				token = e.login("admin", "admin-pass")
				hdr["Cookie"] = "auth_token=" + token
			}
			path := "/api/auth/logout"
			if tt.method == "GET" {
				path = "/api/auth/check"
			}
			r := e.req(tt.method, path, hdr, "")
			if r.status != tt.want {
				t.Fatalf("%s %s: %d %q %s, want %d", tt.method, path, r.status, r.errName, r.errMsg, tt.want)
			}
			if tt.want == 403 {
				if r.errName != "ForbiddenError" || !strings.Contains(r.errMsg, "origin") {
					t.Errorf("refusal %q %q, want ForbiddenError naming the origin", r.errName, r.errMsg)
				}
				// The session lives on: the forged logout did nothing.
				if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + token}, ""); r.status != 200 {
					t.Errorf("the session after a refused cross-site logout: %d", r.status)
				}
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}
