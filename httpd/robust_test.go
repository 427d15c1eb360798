package httpd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"kvmd/auth"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// These tests speak HTTP/1.1 by hand over net.Dial wherever net/http's
// client would refuse to send the input, or would fix it on the way.

// mustHeaders are the security headers every reply must carry, the ones
// net/http's own error replies (rewritten in conn.go) included.
var mustHeaders = map[string]string{
	"X-Content-Type-Options":       "nosniff",
	"Cache-Control":                "no-store",
	"X-Frame-Options":              "DENY",
	"Referrer-Policy":              "no-referrer",
	"Content-Security-Policy":      "default-src 'none'; frame-ancestors 'none'",
	"Cross-Origin-Resource-Policy": "same-origin",
}

// checkEnvelope checks that a reply is kvmd's JSON envelope with the
// security headers. It returns an error rather than failing the test so
// that goroutines can use it.
func checkEnvelope(status int, h http.Header, body []byte) (reply, error) {
	r := reply{status: status, header: h, body: body}
	if ct := h.Get("Content-Type"); ct != "application/json" {
		return r, fmt.Errorf("status %d: Content-Type %q, want application/json; body %q", status, ct, body)
	}
	var env struct {
		OK     *bool `json:"ok"`
		Result *struct {
			Error    string `json:"error"`
			ErrorMsg string `json:"error_msg"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.OK == nil || env.Result == nil {
		return r, fmt.Errorf("status %d: not the JSON envelope: %q (%v)", status, body, err)
	}
	if *env.OK != (status == http.StatusOK) {
		return r, fmt.Errorf("ok = %v with status %d", *env.OK, status)
	}
	if status != http.StatusOK && (env.Result.Error == "" || env.Result.ErrorMsg == "") {
		return r, fmt.Errorf("status %d without error and error_msg: %q", status, body)
	}
	for k, v := range mustHeaders {
		if got := h.Values(k); len(got) != 1 || got[0] != v {
			return r, fmt.Errorf("status %d: %s = %q, want %q once", status, k, got, v)
		}
	}
	// The mark conn.go replaces by the headers never reaches a client.
	if _, ok := h[securityMarkKey]; ok {
		return r, fmt.Errorf("status %d: the mark %s went out", status, securityMarkKey)
	}
	r.ok, r.errName, r.errMsg = *env.OK, env.Result.Error, env.Result.ErrorMsg
	return r, nil
}

// closedMark is set by readEnvelope in a reply's header when the reply said
// "Connection: close" (which http.ReadResponse removes).
const closedMark = "X-Test-Closed"

// readEnvelope reads one whole reply off br and checks it. A connection
// reset before the last byte of the body is an error.
func readEnvelope(br *bufio.Reader) (reply, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return reply{}, fmt.Errorf("reading the reply: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode}, fmt.Errorf("reading the body of a %d reply: %w", resp.StatusCode, err)
	}
	r, err := checkEnvelope(resp.StatusCode, resp.Header, b)
	if resp.Close {
		r.header.Set(closedMark, "1")
	}
	return r, err
}

// exchange writes payload on c from a goroutine while it reads one reply:
// the server may answer, and close, before it has read everything, and a
// client that only wrote would then never see the reply.
func exchange(c net.Conn, payload []byte, limit time.Duration) (reply, error) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(limit))
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.Write(payload) // fails once the server hangs up: expected
	}()
	r, err := readEnvelope(bufio.NewReader(c))
	c.Close()
	<-wrote
	return r, err
}

func (e *env) tcpAddr() string { return strings.TrimPrefix(e.base, "http://") }

// raw sends payload over a new TCP connection and reads one reply.
func (e *env) raw(payload string) (reply, error) {
	c, err := net.DialTimeout("tcp", e.tcpAddr(), 2*time.Second)
	if err != nil {
		return reply{}, err
	}
	return exchange(c, []byte(payload), 10*time.Second)
}

// rawRequest builds a request by hand: lines are header lines, body is
// sent as it is (the caller declares its length or chunking).
func rawRequest(method, path string, lines []string, body string) string {
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: kvmd\r\n")
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.String()
}

// post is a request with a Content-Type and a Content-Length body.
func post(path, ctype, body string, lines ...string) string {
	lines = append(lines, "Content-Type: "+ctype, "Content-Length: "+strconv.Itoa(len(body)))
	return rawRequest("POST", path, lines, body)
}

const adminLines = "X-KVMD-User: admin\r\nX-KVMD-Passwd: admin-pass"

func expect(t *testing.T, r reply, err error, status int, name string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if r.status != status || r.errName != name {
		t.Fatalf("got %d %q (%s), want %d %q", r.status, r.errName, r.errMsg, status, name)
	}
}

func TestHugeHeaders(t *testing.T) {
	e := newEnv(t, envOpts{})
	const size = 10 << 20
	var many bytes.Buffer
	many.WriteString("GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\n")
	for i := 0; many.Len() < size; i++ {
		fmt.Fprintf(&many, "X-Pad-%d: v\r\n", i)
	}
	many.WriteString("\r\n")
	cases := map[string][]byte{
		"one huge header": []byte("GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nX-Big: " + strings.Repeat("a", size) + "\r\n\r\n"),
		"many headers":    many.Bytes(),
		"huge cookie":     []byte("GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nCookie: a=" + strings.Repeat("b", size) + "\r\n\r\n"),
		"huge path":       []byte("GET /api/" + strings.Repeat("a", size) + " HTTP/1.1\r\nHost: kvmd\r\n\r\n"),
		"just over":       []byte("GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nCookie: a=" + strings.Repeat("b", 40<<10) + "\r\n\r\n"),
	}
	for name, payload := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", e.tcpAddr())
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r, err := exchange(c, payload, 10*time.Second)
			expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("reply took %v", d)
			}
			if r.header.Get(closedMark) == "" {
				t.Error("no Connection: close")
			}
		})
	}
	t.Run("just under: a 20 KB cookie jar", func(t *testing.T) {
		token := e.login("admin", "admin-pass")
		var jar []string
		for i := 0; len(strings.Join(jar, "; ")) < 20<<10; i++ {
			jar = append(jar, fmt.Sprintf("tracker_%d=%s", i, strings.Repeat("x", 90)))
		}
		mid := len(jar) / 2
		withToken := strings.Join(jar[:mid], "; ") + "; auth_token=" + token + "; " + strings.Join(jar[mid:], "; ")
		if r := e.req("GET", "/api/auth/check", map[string]string{"Cookie": withToken}, ""); r.status != 200 {
			t.Errorf("20 KB cookie jar with a session: %d %s", r.status, r.body)
		}
		hdr := xhdr("admin", "admin-pass")
		hdr["Cookie"] = strings.Join(jar, "; ")
		if r := e.req("GET", "/api/auth/check", hdr, ""); r.status != 200 {
			t.Errorf("20 KB cookie jar beside X-KVMD-User: %d %s", r.status, r.body)
		}
	})
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("server after huge headers: %d", r.status)
	}
}

// TestMalformedRequests covers what net/http refuses before any handler
// runs, and writes in plain text unless conn.go rewrites it.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t, envOpts{})
	auth := "X-KVMD-User: admin\r\nX-KVMD-Passwd: admin-pass\r\n"
	for _, tt := range []struct{ name, req string }{
		{"garbage request line", "GARBAGE\r\n\r\n"},
		{"request line without version", "GET /api/auth/check\r\nHost: kvmd\r\n\r\n"},
		{"NUL in the request line", "GET /api/auth\x00/check HTTP/1.1\r\nHost: kvmd\r\n\r\n"},
		{"binary (a TLS hello on the plain port)", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"},
		{"bad percent escape", "GET /api/%zz HTTP/1.1\r\nHost: kvmd\r\n\r\n"},
		{"missing Host", "GET /api/auth/check HTTP/1.1\r\n" + auth + "\r\n"},
		{"two Hosts", "GET /api/auth/check HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
		{"malformed Host", "GET /api/auth/check HTTP/1.1\r\nHost: a b\r\n\r\n"},
		{"header line without colon", "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nNo colon here\r\n\r\n"},
		{"space in a header name", "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nBad Name: v\r\n\r\n"},
		{"control byte in a value", "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nX-A: a\x01b\r\n\r\n"},
		{"HTTP/9.9 (net/http says 505)", "GET /api/auth/check HTTP/9.9\r\nHost: kvmd\r\n\r\n"},
		{"HTTP/2.0 without preface", "GET /api/auth/check HTTP/2.0\r\nHost: kvmd\r\n\r\n"},
		{"unknown transfer coding (net/http says 501)", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"Expect other than 100-continue (net/http says 417)", "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\n" + auth + "Expect: teapot\r\n\r\n"},
		{"Expect on HTTP/1.0", "GET /api/auth/check HTTP/1.0\r\nExpect: teapot\r\n\r\n"},
		{"negative Content-Length", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nContent-Length: -1\r\n\r\n"},
		{"two Content-Lengths", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"broken chunk size", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nuser=admin\r\n0\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := e.raw(tt.req)
			expect(t, r, err, http.StatusBadRequest, "BadRequestError")
		})
	}
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("server after malformed requests: %d", r.status)
	}
}

func TestOversizedBodies(t *testing.T) {
	e := newEnv(t, envOpts{bodyTimeout: 2 * time.Second})
	form := "Content-Type: application/x-www-form-urlencoded"
	good := "user=admin&passwd=admin-pass&pad="

	// A declared length over the limit is refused at once: the client
	// sends only the headers, and the server must neither wait for the
	// body (before or after its reply) nor read it.
	for _, tt := range []struct {
		name, method, path string
		lines              []string
	}{
		{"login 10 MB", "POST", "/api/auth/login", []string{form, "Content-Length: 10000000"}},
		{"login just over 4 KiB", "POST", "/api/auth/login", []string{form, "Content-Length: 4097"}},
		{"login 100 KB", "POST", "/api/auth/login", []string{form, "Content-Length: 100000"}},
		{"authenticated GET", "GET", "/api/auth/check", []string{adminLines, "Content-Length: 100000"}},
		{"unauthenticated GET", "GET", "/api/auth/check", []string{"Content-Length: 10000000"}},
		{"logout", "POST", "/api/auth/logout", []string{adminLines, "Content-Length: 5000"}},
	} {
		t.Run("Content-Length/"+tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.tcpAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			c.SetDeadline(start.Add(5 * time.Second))
			if _, err := io.WriteString(c, rawRequest(tt.method, tt.path, tt.lines, "")); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			r, err := readEnvelope(br)
			expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
			if d := time.Since(start); d > time.Second {
				t.Errorf("413 took %v: the server waited for the body", d)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("after the 413: read %d bytes, %v; want the connection closed", n, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("connection closed only after %v", d)
			}
		})
	}

	t.Run("exactly 4 KiB is accepted", func(t *testing.T) {
		body := good + strings.Repeat("a", 4096-len(good))
		r, err := e.raw(post("/api/auth/login", "application/x-www-form-urlencoded", body))
		expect(t, r, err, 200, "")
		r, err = e.raw(post("/api/auth/login", "application/x-www-form-urlencoded", body+"a"))
		expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
	})

	t.Run("chunked login growing past 4 KiB", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString(rawRequest("POST", "/api/auth/login", []string{form, "Transfer-Encoding: chunked"}, ""))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(good), good)
		for b.Len() < 1<<20 {
			fmt.Fprintf(&b, "400\r\n%s\r\n", strings.Repeat("a", 0x400))
		}
		b.WriteString("0\r\n\r\n")
		c, err := net.Dial("tcp", e.tcpAddr())
		if err != nil {
			t.Fatal(err)
		}
		r, err := exchange(c, b.Bytes(), 5*time.Second)
		expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
	})

	t.Run("chunked body on an authenticated GET", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString(rawRequest("GET", "/api/auth/check", []string{adminLines, "Transfer-Encoding: chunked"}, ""))
		for b.Len() < 64<<10 {
			fmt.Fprintf(&b, "400\r\n%s\r\n", strings.Repeat("a", 0x400))
		}
		b.WriteString("0\r\n\r\n")
		c, err := net.Dial("tcp", e.tcpAddr())
		if err != nil {
			t.Fatal(err)
		}
		r, err := exchange(c, b.Bytes(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, r, err, http.StatusRequestEntityTooLarge, "RequestTooLargeError")
	})
}

func TestBrokenMultipart(t *testing.T) {
	e := newEnv(t, envOpts{})
	part := func(name, value string) string {
		return "--B\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + value + "\r\n"
	}
	creds := part("user", "admin") + part("passwd", "admin-pass")
	tiny := func(n int) string { return strings.Repeat("--B\r\n\r\n\r\n", n) }
	for _, tt := range []struct {
		name, ctype, body string
		status            []int
	}{
		{"sanity: a good one", "multipart/form-data; boundary=B", creds + "--B--\r\n", []int{200}},
		{"truncated in a header", "multipart/form-data; boundary=B", "--B\r\nContent-Disp", []int{400}},
		{"truncated in a value", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\nadm", []int{400}},
		{"no closing delimiter", "multipart/form-data; boundary=B", creds, []int{400}},
		{"wrong boundary", "multipart/form-data; boundary=C", creds + "--B--\r\n", []int{400}},
		{"empty boundary", "multipart/form-data; boundary=", creds + "--B--\r\n", []int{400}},
		{"boundary of 200 characters", "multipart/form-data; boundary=" + strings.Repeat("B", 200), creds, []int{400}},
		{"unterminated quoted boundary", "multipart/form-data; boundary=\"B", creds + "--B--\r\n", []int{400}},
		{"empty body", "multipart/form-data; boundary=B", "", []int{400}},
		{"only the closing delimiter", "multipart/form-data; boundary=B", "--B--\r\n", []int{400}},
		{"400 tiny parts, then the credentials", "multipart/form-data; boundary=B", tiny(400) + creds + "--B--\r\n", []int{200}},
		{"450 tiny parts", "multipart/form-data; boundary=B", tiny(450) + "--B--\r\n", []int{400}},
		{"1000 tiny parts (9 KB)", "multipart/form-data; boundary=B", tiny(1000) + "--B--\r\n", []int{413}},
		{"a 3 KB part header", "multipart/form-data; boundary=B", "--B\r\nX-Junk: " + strings.Repeat("j", 3000) + "\r\n\r\nv\r\n" + creds + "--B--\r\n", []int{200, 400}},
		{"a 100 KB part header", "multipart/form-data; boundary=B", "--B\r\nX-Junk: " + strings.Repeat("j", 100000) + "\r\n\r\nv\r\n--B--\r\n", []int{413}},
		{"a part header without colon", "multipart/form-data; boundary=B", "--B\r\nnonsense\r\n\r\nv\r\n--B--\r\n", []int{400}},
		{"a non-UTF-8 field name", "multipart/form-data; boundary=B", part("us\xffer", "admin") + "--B--\r\n", []int{400}},
		{"base64 transfer encoding", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"user\"\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!\r\n--B--\r\n", []int{400}},
		{"quoted-printable garbage", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"user\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=ZZ\r\n--B--\r\n", []int{400}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := e.raw(post("/api/auth/login", tt.ctype, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.status {
				if r.status == s {
					return
				}
			}
			t.Errorf("got %d %q (%s), want one of %v", r.status, r.errName, r.errMsg, tt.status)
		})
	}
}

// TestBadBytesInCredentials sends bytes that no valid credential holds,
// raw, where net/http's client would refuse them.
func TestBadBytesInCredentials(t *testing.T) {
	e := newEnv(t, envOpts{limiterFreeFail: 1000})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	get := func(lines ...string) string { return rawRequest("GET", "/api/auth/check", lines, "") }
	form := func(body string) string { return post("/api/auth/login", "application/x-www-form-urlencoded", body) }
	for _, tt := range []struct {
		name, req string
		status    int
		errName   string
	}{
		{"xhdr user not UTF-8", get("X-KVMD-User: adm\xffin", "X-KVMD-Passwd: admin-pass"), 400, "ValidatorError"},
		{"xhdr user overlong UTF-8", get("X-KVMD-User: \xc0\xaf", "X-KVMD-Passwd: x"), 400, "ValidatorError"},
		{"xhdr user with a tab", get("X-KVMD-User: ad\tmin", "X-KVMD-Passwd: admin-pass"), 400, "ValidatorError"},
		{"xhdr user with DEL", get("X-KVMD-User: ad\x7fmin", "X-KVMD-Passwd: admin-pass"), 400, "BadRequestError"},
		{"xhdr user with NUL", get("X-KVMD-User: ad\x00min", "X-KVMD-Passwd: admin-pass"), 400, "BadRequestError"},
		{"xhdr user with ESC", get("X-KVMD-User: \x1b[31madmin", "X-KVMD-Passwd: admin-pass"), 400, "BadRequestError"},
		{"xhdr password not UTF-8", get("X-KVMD-User: admin", "X-KVMD-Passwd: admin-pass\xff"), 400, "ValidatorError"},
		{"xhdr password UTF-8 but not ASCII", get("X-KVMD-User: admin", "X-KVMD-Passwd: p\xc3\xa4ss"), 400, "ValidatorError"},
		{"xhdr password with a tab", get("X-KVMD-User: admin", "X-KVMD-Passwd: admin\tpass"), 400, "ValidatorError"},
		{"xhdr password of 513", get("X-KVMD-User: admin", "X-KVMD-Passwd: "+strings.Repeat("p", 513)), 400, "ValidatorError"},
		{"basic user not UTF-8", get("Authorization: Basic " + b64("adm\xffin:admin-pass")), 401, "UnauthorizedError"},
		{"basic password not UTF-8", get("Authorization: Basic " + b64("admin:admin-pass\xfe")), 401, "UnauthorizedError"},
		{"basic user with NUL", get("Authorization: Basic " + b64("ad\x00min:admin-pass")), 400, "ValidatorError"},
		{"basic password with a newline", get("Authorization: Basic " + b64("admin:admin\npass")), 400, "ValidatorError"},
		{"basic password with DEL", get("Authorization: Basic " + b64("admin:admin\x7fpass")), 400, "ValidatorError"},
		{"basic raw high bytes", get("Authorization: Basic \xff\xfe\xfd"), 401, "UnauthorizedError"},
		{"basic with a NUL", get("Authorization: Basic YW\x00Rt"), 400, "BadRequestError"},
		{"cookie not UTF-8", get("Cookie: auth_token=\xff\xfe"), 401, "UnauthorizedError"},
		{"cookie hex with a high byte", get("Cookie: auth_token=" + strings.Repeat("a", 63) + "\xe9"), 401, "UnauthorizedError"},
		{"cookie with a control byte", get("Cookie: auth_token=\x01abc"), 400, "BadRequestError"},
		{"cookie with a quote", get("Cookie: auth_token=\"" + strings.Repeat("a", 64) + "\""), 403, "ForbiddenError"},
		{"cookie of 64 high bytes", get("Cookie: auth_token=" + strings.Repeat("\x80", 64)), 401, "UnauthorizedError"},
		{"login user %FF", form("user=%FF%FE&passwd=x"), 400, "ValidatorError"},
		{"login raw high bytes", form("user=\xff&passwd=\xfe"), 400, "ValidatorError"},
		{"login password %00", form("user=admin&passwd=admin%00pass"), 400, "ValidatorError"},
		{"login raw control bytes", form("user=admin&passwd=\x01\x02"), 400, "ValidatorError"},
		{"login JSON with a NUL escape", post("/api/auth/login", "application/json", `{"user":"admin","passwd":"a\u0000b"}`), 400, "ValidatorError"},
		{"login JSON not UTF-8", post("/api/auth/login", "application/json", "{\"user\":\"adm\xffin\",\"passwd\":\"x\"}"), 400, "ValidatorError"},
		{"login JSON with a lone surrogate", post("/api/auth/login", "application/json", `{"user":"\ud800","passwd":"x"}`), 400, "ValidatorError"},
		{"login multipart raw bytes", post("/api/auth/login", "multipart/form-data; boundary=B",
			"--B\r\nContent-Disposition: form-data; name=\"user\"\r\n\r\n\xff\x00\r\n--B--\r\n"), 400, "ValidatorError"},
		{"login Content-Type not UTF-8", post("/api/auth/login", "application/\xffjson", `{}`), 400, "BadRequestError"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := e.raw(tt.req)
			expect(t, r, err, tt.status, tt.errName)
			if strings.Contains(r.errMsg, "admin-pass") || strings.ContainsFunc(r.errMsg, func(c rune) bool { return c == utf8.RuneError || c < 0x20 }) {
				t.Errorf("error message echoes the input: %q", r.errMsg)
			}
		})
	}
}

// slowWriter writes payload one byte every interval until it is done, the
// connection fails, or stop is closed.
func slowWriter(c net.Conn, payload string, interval time.Duration, stop <-chan struct{}) {
	for i := 0; i < len(payload); i++ {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		if _, err := c.Write([]byte{payload[i]}); err != nil {
			return
		}
	}
}

// cutWithin waits until the server ends the connection and returns how long
// that took, and what it sent before (a JSON reply, or nothing).
func cutWithin(t *testing.T, c net.Conn, start time.Time, limit time.Duration) (time.Duration, []byte) {
	t.Helper()
	c.SetReadDeadline(start.Add(limit))
	b, err := io.ReadAll(c)
	d := time.Since(start)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("not cut within %v (read %q, %v)", limit, b, err)
	}
	return d, b
}

func TestSlowClients(t *testing.T) {
	e := newEnv(t, envOpts{headerTimeout: 300 * time.Millisecond, bodyTimeout: 300 * time.Millisecond})

	t.Run("slowloris headers, others served meanwhile", func(t *testing.T) {
		const n = 20
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer func() { close(stop); wg.Wait() }()
		durs := make([]time.Duration, n)
		sent := make([][]byte, n)
		errs := make([]error, n)
		start := time.Now()
		for i := range n {
			c, err := net.Dial("tcp", e.tcpAddr())
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				slowWriter(c, "GET /api/auth/check HTTP/1.1\r\nHost: kvmd\r\nX-Slow: "+strings.Repeat("s", 100), 100*time.Millisecond, stop)
			}()
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetReadDeadline(start.Add(3 * time.Second))
				b, err := io.ReadAll(c)
				durs[i], sent[i] = time.Since(start), b
				if err != nil && !errors.Is(err, syscall.ECONNRESET) {
					errs[i] = err
				}
			}()
		}
		// Meanwhile, a well-behaved client is served promptly.
		served := 0
		for time.Since(start) < 800*time.Millisecond {
			t0 := time.Now()
			if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
				t.Errorf("good client during the attack: %d", r.status)
			}
			if d := time.Since(t0); d > 300*time.Millisecond {
				t.Errorf("good client waited %v during the attack", d)
			}
			served++
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		if served < 5 {
			t.Errorf("only %d good requests served in 800 ms", served)
		}
		for i := range n {
			if errs[i] != nil {
				t.Errorf("slow client %d not cut: %v", i, errs[i])
				continue
			}
			if durs[i] > 1500*time.Millisecond {
				t.Errorf("slow client %d cut after %v, want about 300 ms", i, durs[i])
			}
			if len(sent[i]) != 0 {
				if _, err := readEnvelope(bufio.NewReader(bytes.NewReader(sent[i]))); err != nil {
					t.Errorf("slow client %d got %q: %v", i, sent[i], err)
				}
			}
		}
	})

	t.Run("idle connection", func(t *testing.T) {
		c, err := net.Dial("tcp", e.tcpAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if d, b := cutWithin(t, c, time.Now(), 3*time.Second); d > 1500*time.Millisecond || len(b) != 0 {
			t.Errorf("idle connection cut after %v, having got %q", d, b)
		}
	})

	t.Run("idle after a first request", func(t *testing.T) {
		c, err := net.Dial("tcp", e.tcpAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, rawRequest("GET", "/api/auth/check", []string{adminLines}, ""))
		br := bufio.NewReader(c)
		start := time.Now()
		c.SetDeadline(start.Add(3 * time.Second))
		r, err := readEnvelope(br)
		expect(t, r, err, 200, "")
		// Half a request, then nothing: the header timeout applies again.
		io.WriteString(c, "GET /api/auth/check HTTP/1.1\r\nHo")
		d, b := cutWithin(t, c, start, 3*time.Second)
		if d > 1500*time.Millisecond {
			t.Errorf("cut after %v", d)
		}
		if len(b) != 0 {
			r, err := readEnvelope(bufio.NewReader(bytes.NewReader(b)))
			expect(t, r, err, 400, "BadRequestError")
		}
	})

	for _, tt := range []struct{ name, head, body string }{
		{"slow login body", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\n",
			"user=admin&passwd=admin-pass&pad=aaaaaaa"},
		{"slow chunked login body", "POST /api/auth/login HTTP/1.1\r\nHost: kvmd\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n",
			"1\r\nu\r\n1\r\ns\r\n1\r\ne\r\n1\r\nr\r\n1\r\n=\r\n1\r\na\r\n1\r\nd\r\n1\r\nm\r\n0\r\n\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.tcpAddr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stop := make(chan struct{})
			done := make(chan struct{})
			defer func() { close(stop); <-done }()
			if _, err := io.WriteString(c, tt.head); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			go func() { defer close(done); slowWriter(c, tt.body, 100*time.Millisecond, stop) }()
			d, b := cutWithin(t, c, start, 3*time.Second)
			if d > 1500*time.Millisecond {
				t.Errorf("cut after %v, want about 300 ms", d)
			}
			if len(b) != 0 {
				r, err := readEnvelope(bufio.NewReader(bytes.NewReader(b)))
				expect(t, r, err, 400, "BadRequestError")
			}
		})
	}

	t.Run("body announced and never sent, to a GET", func(t *testing.T) {
		c, err := net.Dial("tcp", e.tcpAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, rawRequest("GET", "/api/auth/check", []string{adminLines, "Content-Length: 100"}, ""))
		start := time.Now()
		c.SetReadDeadline(start.Add(2 * time.Second))
		b, err := io.ReadAll(c)
		if errors.Is(err, os.ErrDeadlineExceeded) && len(b) == 0 {
			t.Fatal("a body the handler does not read held the reply back past 2 s")
		}
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("answered or cut after %v", d)
		}
		if len(b) != 0 {
			if _, err := readEnvelope(bufio.NewReader(bytes.NewReader(b))); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestHandlerPanic(t *testing.T) {
	e := newEnv(t, envOpts{extraRoutes: func(s *Server) {
		s.handle("GET", "/boom", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
			panic("boom: secret internals")
		})
		s.handle("GET", "/index", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
			_ = make([]int, 1)[len(r.URL.Path)] // a runtime error, not a panic call
			return nil
		})
	}})
	for i := 0; i < 3; i++ {
		for _, p := range []string{"/api/boom", "/boom", "/api/index"} {
			r := e.req("GET", p, xhdr("admin", "admin-pass"), "")
			if r.status != 500 || r.errName != "InternalError" {
				t.Fatalf("%s: %d %q, want 500 InternalError", p, r.status, r.errName)
			}
			if strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), "panic") {
				t.Errorf("%s: the reply tells internals: %s", p, r.body)
			}
			for k, v := range mustHeaders {
				if r.header.Get(k) != v {
					t.Errorf("%s: %s = %q", p, k, r.header.Get(k))
				}
			}
		}
		if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
			t.Fatalf("after a panic: %d", r.status)
		}
	}
	if r := e.req("GET", "/api/boom", nil, ""); r.status != 401 {
		t.Errorf("unauthenticated /boom: %d, want 401 (auth comes before the handler)", r.status)
	}
	logs := e.logs.String()
	for _, want := range []string{"request failed", "panic: boom: secret internals", "index out of range", "robust_test.go"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}

func TestSecurityHeadersEverywhere(t *testing.T) {
	e := newEnv(t, envOpts{extraRoutes: func(s *Server) {
		s.handle("GET", "/boom", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error { panic("boom") })
	}})
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, c := range []struct {
		method, path string
		hdr          map[string]string
		body         string
		status       int
	}{
		{"GET", "/api/auth/check", xhdr("admin", "admin-pass"), "", 200},
		{"HEAD", "/api/auth/check", xhdr("admin", "admin-pass"), "", 200},
		{"GET", "/api/auth/check", nil, "", 401},
		{"GET", "/api/auth/check", map[string]string{"Cookie": "auth_token=x"}, "", 400},
		{"GET", "/api/auth/check", xhdr("admin", "wrong"), "", 403},
		{"GET", "/api/nope", nil, "", 404},
		{"PUT", "/api/auth/check", nil, "", 405},
		{"POST", "/api/auth/login", form, "user=admin&passwd=admin-pass", 200},
		{"POST", "/api/auth/login", form, strings.Repeat("a", 5000), 413},
		{"POST", "/api/auth/logout", xhdr("admin", "admin-pass"), "", 200},
		{"GET", "/api/boom", xhdr("admin", "admin-pass"), "", 500},
	} {
		var resp *http.Response
		var err error
		req, _ := http.NewRequest(c.method, e.base+c.path, strings.NewReader(c.body))
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		if resp, err = client.Do(req); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		if c.method == "HEAD" {
			b = []byte(`{"ok":true,"result":{}}`)
		}
		if _, err := checkEnvelope(resp.StatusCode, resp.Header, b); err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
		}
	}
	// net/http's own replies, rewritten: checkEnvelope checks them too.
	for _, raw := range []string{"BAD\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("a", 40000) + "\r\n\r\n"} {
		if _, err := e.raw(raw); err != nil {
			t.Error(err)
		}
	}
}

// tapListener records everything net/http writes, before conn.go sees it.
type tapListener struct {
	net.Listener
	mu     sync.Mutex
	writes [][]byte
}

func (l *tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, l: l}, nil
}

func (l *tapListener) take() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

type tapConn struct {
	net.Conn
	l *tapListener
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	c.l.writes = append(c.l.writes, bytes.Clone(p))
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

// TestStdError checks the recognition of net/http's own replies against
// what this Go's net/http really writes: its errors must be recognized
// (else clients get plain text), and no reply of a handler may be (else
// it would be replaced).
func TestStdError(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Handlers whose replies look as much as they can like net/http's.
	s.handle("GET", "/lookalike", auth.RoleNone, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "400 Bad Request")
		return nil
	})
	s.handle("GET", "/lookalike417", auth.RoleNone, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusExpectationFailed)
		return nil
	})
	s.handle("GET", "/plain", auth.RoleNone, func(w http.ResponseWriter, r *http.Request) error {
		http.Error(w, "431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
		return nil
	})
	s.handle("GET", "/json", auth.RoleNone, func(w http.ResponseWriter, r *http.Request) error { return WriteJSON(w, map[string]int{"a": 1}) })
	s.handle("POST", "/continue", auth.RoleNone, func(w http.ResponseWriter, r *http.Request) error {
		_, err := s.readBody(w, r, 1<<10)
		if err != nil {
			return err
		}
		return WriteJSON(w, nil)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap := &tapListener{Listener: ln}
	srv := &http.Server{Handler: s, MaxHeaderBytes: 1 << 10, ReadHeaderTimeout: 2 * time.Second}
	go srv.Serve(tap)
	defer srv.Close()

	get := func(p string) string { return "GET " + p + " HTTP/1.1\r\nHost: k\r\n\r\n" }
	for _, tt := range []struct {
		name, req string
		status    int // of the net/http error, 0: a handler's reply
	}{
		{"headers too large", "GET / HTTP/1.1\r\nHost: k\r\nX: " + strings.Repeat("a", 8000) + "\r\n\r\n", 431},
		{"garbage", "GARBAGE\r\n\r\n", 400},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"bad version", "GET / HTTP/3.0\r\nHost: k\r\n\r\n", 505},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: k\r\nTransfer-Encoding: x\r\n\r\n", 501},
		{"Expect teapot", "GET / HTTP/1.1\r\nHost: k\r\nExpect: teapot\r\n\r\n", 417},
		{"lookalike 400", get("/lookalike"), 0},
		{"lookalike 417", get("/lookalike417"), 0},
		{"http.Error", get("/plain"), 0},
		{"JSON", get("/json"), 0},
		{"not found", get("/nope"), 0},
		{"HTTP/1.0", "GET /lookalike HTTP/1.0\r\n\r\n", 0},
		{"100 Continue", "POST /continue HTTP/1.1\r\nHost: k\r\nContent-Type: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(3 * time.Second))
			io.WriteString(c, tt.req)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == 100 {
				io.WriteString(c, "ab")
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			c.Close()
			time.Sleep(10 * time.Millisecond) // let a 431's close finish writing
			writes := tap.take()
			if len(writes) == 0 {
				t.Fatal("nothing written")
			}
			if tt.status == 0 {
				for _, w := range writes {
					if st, _, ok := stdError(w); ok {
						t.Errorf("a handler's reply taken for net/http's %d: %q", st, w)
					}
				}
				return
			}
			st, msg, ok := stdError(writes[0])
			if !ok || st != tt.status {
				t.Fatalf("net/http's reply %q: stdError = %d %q %v, want %d", writes[0], st, msg, ok, tt.status)
			}
			// And what the client would get instead.
			r, err := readEnvelope(bufio.NewReader(bytes.NewReader(jsonErrorReply(st, msg))))
			want, wantName := http.StatusBadRequest, "BadRequestError"
			if st == 431 {
				want, wantName = http.StatusRequestEntityTooLarge, "RequestTooLargeError"
			}
			expect(t, r, err, want, wantName)
			if r.header.Get(closedMark) == "" {
				t.Error("no Connection: close")
			}
		})
	}

	for _, p := range []string{"", "HTTP/1.1 ", "HTTP/1.1 4", "HTTP/1.1 40", "HTTP/1.1 abc" + stdErrorHeaders, "HTTP/1.1 417", "HTTP/1.0 400 Bad Request" + stdErrorHeaders,
		"HTTP/1.1 400 Bad Request\r\nX: y" + stdErrorHeaders, "0\r\n\r\n", "{\"ok\":true}"} {
		if st, msg, ok := stdError([]byte(p)); ok {
			t.Errorf("stdError(%q) = %d %q, true", p, st, msg)
		}
	}
}

// TestConcurrentMixed runs 200 clients at once, half of them misbehaving,
// for a second: nothing may get a 5xx, every reply is the envelope with
// the status its request deserves, and the server answers afterwards.
func TestConcurrentMixed(t *testing.T) {
	e := newEnv(t, envOpts{limiterFreeFail: 1 << 30})
	token := e.login("admin", "admin-pass")
	b64 := base64.StdEncoding.EncodeToString
	kinds := []struct {
		req    string
		status int
	}{
		{rawRequest("GET", "/api/auth/check", []string{adminLines}, ""), 200},
		{rawRequest("GET", "/auth/check", []string{"Cookie: auth_token=" + token}, ""), 200},
		{rawRequest("HEAD", "/api/auth/check", []string{"Authorization: Basic " + b64([]byte("colon:pa:ss:word"))}, ""), 200},
		{rawRequest("GET", "/api/auth/check", nil, ""), 401},
		{rawRequest("GET", "/api/auth/check", []string{"Cookie: auth_token=zz"}, ""), 400},
		{rawRequest("GET", "/api/auth/check", []string{"Cookie: auth_token=" + strings.Repeat("0", 64)}, ""), 403},
		{rawRequest("GET", "/api/auth/check", []string{"X-KVMD-User: admin", "X-KVMD-Passwd: wrong"}, ""), 403},
		{rawRequest("GET", "/api/nothing", nil, ""), 404},
		{rawRequest("DELETE", "/api/auth/check", nil, ""), 405},
		{post("/api/auth/login", "text/plain", "x"), 400},
		{post("/api/auth/login", "application/json", `{"user":"admin","passwd":"nope"}`), 403},
		{rawRequest("POST", "/api/auth/login", []string{"Content-Length: 100000"}, ""), 413},
		{"NONSENSE\r\n\r\n", 400},
		{"GET /api/auth/check HTTP/1.1\r\nHost: k\r\nX-Pad: " + strings.Repeat("p", 40<<10) + "\r\n\r\n", 413},
	}
	var total, conns atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(f string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(f, args...))
		}
	}
	deadline := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	for w := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var br *bufio.Reader
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			// Every worker sends at least its first request (200 workers
			// starting at w cover every kind), then as many as fit in a
			// second: how many fit is make bench's business, not this test's.
			for i := w; i < w+10000 && (i == w || time.Now().Before(deadline)); i++ {
				k := kinds[i%len(kinds)]
				if c == nil {
					var err error
					network, addr := "tcp", e.tcpAddr()
					if w%4 == 0 {
						network, addr = "unix", e.sock
					}
					if c, err = net.DialTimeout(network, addr, 5*time.Second); err != nil {
						fail("dial: %v", err)
						return
					}
					conns.Add(1)
					c.SetDeadline(time.Now().Add(10 * time.Second))
					br = bufio.NewReader(c)
				}
				if _, err := io.WriteString(c, k.req); err != nil {
					fail("write %q: %v", k.req[:20], err)
					return
				}
				var r reply
				var err error
				if strings.HasPrefix(k.req, "HEAD ") {
					resp, rerr := http.ReadResponse(br, &http.Request{Method: "HEAD"})
					if err = rerr; err == nil {
						resp.Body.Close()
						r.status = resp.StatusCode
						r.header = resp.Header
						if resp.Close {
							r.header.Set(closedMark, "1")
						}
					}
				} else {
					r, err = readEnvelope(br)
				}
				total.Add(1)
				if err != nil {
					fail("%.30q: %v", k.req, err)
					return
				}
				if r.status != k.status {
					fail("%.30q: %d %q, want %d", k.req, r.status, r.errName, k.status)
				}
				if r.header.Get(closedMark) != "" {
					c.Close()
					c = nil
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d replies on %d connections", total.Load(), conns.Load())
	if total.Load() < 200 {
		t.Errorf("only %d replies from 200 workers", total.Load())
	}
	start := time.Now()
	if r := e.req("GET", "/api/auth/check", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("after the storm: %d", r.status)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("after the storm a request took %v", d)
	}
}

// A connection that never sends a request (browsers open them ahead of
// need) does not hold up the shutdown: net/http alone would wait 5 s.
func TestShutdownFreshConn(t *testing.T) {
	s, err := New(Config{ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, []net.Listener{ln}, nil) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // for the server to accept it
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return within 5 s")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutdown took %v with a new idle connection open", took)
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the fresh connection is still open")
	}
}
