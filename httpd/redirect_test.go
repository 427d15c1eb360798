package httpd

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// postLogin posts a login body without following redirects.
func (e *env) postLogin(ctype, body string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+"/api/auth/login", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestLoginRedirect: kvmd (4.108 on) answers a login with redirect=/,
// /kvm or /kvm/ (blanks around and case ignored) with 302 there and the
// cookie set, and any other value with 400 before the password is looked
// at (kvmd/apps/kvmd/api/auth.py; PiKVM's docs, "Session-based login
// using HTML form").
func TestLoginRedirect(t *testing.T) {
	e := newEnv(t, envOpts{ui: testUI})
	const form = "application/x-www-form-urlencoded"
	mp := func(fields ...string) (string, string) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		for i := 0; i < len(fields); i += 2 {
			w.WriteField(fields[i], fields[i+1])
		}
		w.Close()
		return w.FormDataContentType(), b.String()
	}
	mpType, mpBody := mp("user", "admin", "passwd", "admin-pass", "redirect", "/kvm/")
	tests := []struct {
		name, ctype, body string
		status            int
		location          string
		cookie            bool
	}{
		{"form, /kvm/", form, "user=admin&passwd=admin-pass&expire=0&redirect=%2Fkvm%2F", 302, "/kvm/", true},
		{"form, /", form, "user=admin&passwd=admin-pass&redirect=/", 302, "/", true},
		{"form, blanks and case", form, "user=admin&passwd=admin-pass&redirect=+%2FKVM+", 302, "/kvm", true},
		{"multipart, /kvm/", mpType, mpBody, 302, "/kvm/", true},
		{"JSON, /kvm", "application/json", `{"user":"admin","passwd":"admin-pass","redirect":"/kvm"}`, 302, "/kvm", true},
		{"empty: no redirect", form, "user=admin&passwd=admin-pass&redirect=", 200, "", true},
		{"another site", form, "user=admin&passwd=admin-pass&redirect=https%3A%2F%2Fevil.example%2F", 400, "", false},
		{"protocol-relative", form, "user=admin&passwd=admin-pass&redirect=%2F%2Fevil.example", 400, "", false},
		{"another path", form, "user=admin&passwd=admin-pass&redirect=%2Flogs", 400, "", false},
		{"bad value before the password", form, "user=admin&passwd=wrong&redirect=%2Fx", 400, "", false},
		{"wrong password with a redirect", form, "user=admin&passwd=wrong&redirect=%2Fkvm%2F", 403, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.postLogin(tt.ctype, tt.body)
			if resp.StatusCode != tt.status || resp.Header.Get("Location") != tt.location {
				t.Fatalf("%d Location %q (%s), want %d %q", resp.StatusCode, resp.Header.Get("Location"), body, tt.status, tt.location)
			}
			var token string
			for _, c := range resp.Cookies() {
				if c.Name == "auth_token" && c.Value != "" {
					token = c.Value
				}
			}
			if (token != "") != tt.cookie {
				t.Fatalf("cookie %q, want one: %v", token, tt.cookie)
			}
			if tt.status == 400 && !strings.Contains(body, `"ValidatorError"`) {
				t.Errorf("400 body %s, want a ValidatorError", body)
			}
			if token != "" {
				if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=" + token}, ""); r.status != 200 {
					t.Errorf("the redirect's cookie: check %d", r.status)
				}
			}
		})
	}
	// The limiter counted the failure, not the refused redirect.
	if n := e.a.Limiter.Failures(mustAddr("127.0.0.1"), e.a.Clock.Now()); n != 1 {
		t.Errorf("%d failures counted, want 1 (the wrong password)", n)
	}
	// Where the redirects land: /kvm and /kvm/ are the console's other
	// names (PiKVM's KVM page; this daemon's is /console).
	for _, p := range []string{"/kvm", "/kvm/"} {
		resp, _ := e.uiGet("GET", p, nil)
		if resp.StatusCode != 302 || resp.Header.Get("Location") != "/console" {
			t.Errorf("GET %s: %d Location %q, want 302 /console", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
