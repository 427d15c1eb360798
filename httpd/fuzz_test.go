package httpd

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kvmd/auth"
	"kvmd/hid"
)

func FuzzParseBasic(f *testing.F) {
	for _, s := range []string{
		"", "!!!", "Og==", "YQ", "YQ==", "YTpi", "  YTpi  ", "YTpi\n", "YT pi", "YTpi_-",
		base64.StdEncoding.EncodeToString([]byte("admin:admin-pass")),
		base64.StdEncoding.EncodeToString([]byte("colon:pa:ss:word")),
		base64.StdEncoding.EncodeToString([]byte("adm\xff:x")),
		base64.StdEncoding.EncodeToString([]byte("a\x00:\x00b")),
		base64.StdEncoding.EncodeToString([]byte(":")),
		base64.RawStdEncoding.EncodeToString([]byte("admin:x")),
		base64.URLEncoding.EncodeToString([]byte("\xfb\xff:?>")),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		user, passwd, ok := parseBasic(v)
		if !ok {
			return
		}
		if strings.Contains(user, ":") {
			t.Fatalf("parseBasic(%q): user %q holds a colon: the cut is not at the first", v, user)
		}
		if !utf8.ValidString(user) || !utf8.ValidString(passwd) {
			t.Fatalf("parseBasic(%q) = %q, %q: not UTF-8", v, user, passwd)
		}
		enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + passwd))
		u2, p2, ok2 := parseBasic(enc)
		if !ok2 || u2 != user || p2 != passwd {
			t.Fatalf("re-encoded %q, %q -> %q -> %q, %q, %v", user, passwd, enc, u2, p2, ok2)
		}
	})
}

func FuzzSessionToken(f *testing.F) {
	tok := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{
		"", "auth_token=", "auth_token=" + tok, "a=b; auth_token=" + tok + "; c=d",
		"auth_token=" + strings.ToUpper(tok), "auth_token=" + tok[:63], "auth_token=" + tok + "0",
		"auth_token=\"" + tok + "\"", "auth_token=x; auth_token=" + tok, "auth_token=" + tok + "; auth_token=x",
		"AUTH_TOKEN=" + tok, "auth_token =" + tok, "auth_token=\xff", ";;;=;", "auth_token=" + tok + "\x00",
		" auth_token\t= \"" + tok + "\" ; x", "auth_token=\"", "auth_token=\"\"", "auth_token=a\\b; auth_token=" + tok,
		strings.Repeat("a=b;", 100) + "auth_token=" + tok,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cookie string) {
		r := &http.Request{Header: http.Header{"Cookie": {cookie}}}
		// The scan finds what net/http's parser finds.
		want, werr := r.Cookie("auth_token")
		got, ok, valid := authCookie(r)
		if ok != (werr == nil) || ok && got != want.Value {
			t.Fatalf("authCookie(%q) = %q, %v; r.Cookie gives %v, %v", cookie, got, ok, want, werr)
		}
		if valid != (ok && auth.ValidToken(got) == nil) {
			t.Fatalf("authCookie(%q) = %q: valid %v", cookie, got, valid)
		}
		token, present, err := sessionToken(r)
		switch {
		case !present:
			if token != "" || err != nil {
				t.Fatalf("absent, yet token %q, err %v", token, err)
			}
		case err != nil:
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || token != "" {
				t.Fatalf("malformed cookie: token %q, err %v; want no token and a 400 *Error", token, err)
			}
		default:
			if verr := auth.ValidToken(token); verr != nil {
				t.Fatalf("cookie %q accepted token %q: %v", cookie, token, verr)
			}
		}
	})
}

func FuzzParseLogin(f *testing.F) {
	mp := "--B\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nadmin\r\n--B\r\nContent-Disposition: form-data; name=\"passwd\"\r\n\r\np\r\n--B--\r\n"
	for _, s := range [][2]string{
		{"application/x-www-form-urlencoded", "user=admin&passwd=admin-pass&expire=60"},
		{"application/x-www-form-urlencoded; charset=utf-8", "user=%zz"},
		{"application/x-www-form-urlencoded", "user=a;b&passwd"},
		{"application/json", `{"user":"admin","passwd":"x","expire":30}`},
		{"application/json", `{"user":"admin","passwd":"x","expire":"30"}`},
		{"application/json", `{"user":1}`},
		{"application/json", `{"expire":{"a":[1,2]}}`},
		{"application/json", `[`},
		{"multipart/form-data; boundary=B", mp},
		{"multipart/form-data; boundary=B", mp[:40]},
		{"multipart/form-data; boundary=\"B\"", mp},
		{"multipart/form-data; boundary=B", "--B\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=ZZ\r\n--B--\r\n"},
		{"multipart/form-data", mp},
		{"multipart/mixed; boundary=B", mp},
		{"text/plain", "user=admin"},
		{"", ""},
		{";;", "x"},
		{"application/x-www-form-urlencoded; a=\"", "x"},
	} {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		if len(body) > 4<<10 {
			return // the server never hands parseLogin more
		}
		_, err := parseLogin(ctype, body)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Name == "" || e.Msg == "" {
			t.Fatalf("parseLogin(%q, %q): %#v, want a 400 *Error", ctype, body, err)
		}
	})
}

// newFuzzServer is a Server like newEnv's, without listeners, and a live
// session token. Its limiter is the daemon's: after a few failures the
// test address is blocked, so most inputs cost no bcrypt at all.
func newFuzzServer(tb testing.TB) (*Server, string) {
	path := filepath.Join(tb.TempDir(), "htpasswd")
	writeUsers(tb, path, testUsers)
	log := slog.New(slog.DiscardHandler)
	users, err := auth.OpenUsers(path, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { users.Store().Close() })
	a := auth.New(users, nil, &auth.Sessions{Max: 100}, auth.NewLimiter(), log)
	token, _, err := a.Sessions.New("admin", 0, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(Config{Auth: a, Log: log})
	if err != nil {
		tb.Fatal(err)
	}
	return s, token
}

// statusNames are the answers authentication may give, by status.
var statusNames = map[int][]string{
	200: {""},
	400: {"ValidatorError", "BadRequestError"},
	401: {"UnauthorizedError"},
	403: {"ForbiddenError"},
	429: {"TooManyRequestsError"},
}

func FuzzAuthHeaders(f *testing.F) {
	s, token := newFuzzServer(f)
	b64 := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	// TOKEN in a cookie stands for the live session's token: seeds cannot
	// hold it, since every fuzzing process makes its own.
	for _, c := range [][4]string{
		{"", "", "", ""},
		{"", "", "", "auth_token=TOKEN"},
		{"", "", "", "x=y; auth_token=TOKEN; z"},
		{"admin", "admin-pass", "", ""},
		{" admin ", "admin-pass", "", "auth_token=zz"},
		{"admin", "wrong", "", ""},
		{"Admin!", "", "", ""},
		{"adm\xffin", "x", "", ""},
		{"admin", "caf\xc3\xa9", "", ""},
		{"", "", "Basic " + b64("admin:admin-pass"), ""},
		{"", "", "basic " + b64("colon:pa:ss:word"), ""},
		{"", "", "Basic !!!", ""},
		{"", "", "Basic " + b64("adm\xff:x"), ""},
		{"", "", "Bearer TOKEN", ""},
		{"", "", "", "auth_token=" + strings.Repeat("0", 64)},
		{"", "", "", "auth_token=" + strings.Repeat("A", 64)},
		{"", "x", "Basic " + b64("admin:"+strings.Repeat("p", 600)), "auth_token="},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, user, passwd, authz, cookie string) {
		r := httptest.NewRequest("GET", "/api/auth/check", nil)
		for k, v := range map[string]string{
			"X-KVMD-User": user, "X-KVMD-Passwd": passwd, "Authorization": authz,
			"Cookie": strings.ReplaceAll(cookie, "TOKEN", token),
		} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		res := w.Result()
		names, known := statusNames[res.StatusCode]
		if !known {
			t.Fatalf("status %d: %s", res.StatusCode, w.Body.Bytes())
		}
		got, err := checkEnvelope(res.StatusCode, res.Header, w.Body.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, n := range names {
			found = found || got.errName == n
		}
		if !found {
			t.Fatalf("status %d with error %q", res.StatusCode, got.errName)
		}
		if res.Header.Get("WWW-Authenticate") != "" {
			t.Fatal("WWW-Authenticate sent")
		}
		if res.StatusCode == 429 && res.Header.Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	})
}

// FuzzWSMessage: a client's text message through the WebSocket's envelope
// and the input parsers never panics, and what parses is an input event.
func FuzzWSMessage(f *testing.F) {
	for _, s := range []string{
		`{"event_type":"key","event":{"key":"KeyA","state":true}}`,
		`{"event_type":"mouse_move","event":{"to":{"x":1,"y":2}}}`,
		`{"event_type":"ping","event":{}}`,
		`{"event_type":"key","event":[]}`,
		`{"event_type":1}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		et, ev, ok := parseWSEvent(msg)
		if !ok {
			return
		}
		if len(ev) == 0 || ev[0] != '{' {
			t.Fatalf("event %q is not an object", ev)
		}
		if _, err := hid.ParseJSON(et, ev); err == nil && !hid.IsInputEvent(et) {
			t.Fatalf("parsed an input event of type %q", et)
		}
	})
}
