// Package client talks to the kvmd daemon's HTTP API (docs/api.md):
// login, check, logout, device information and the service log, with the
// 2FA code computed and timed by the client. kvmctl is built on it.
//
// A Client authenticates each request with its session token when it has
// one (the auth_token cookie of a Login), else with its user and password
// in the X-KVMD-User and X-KVMD-Passwd headers, else with nothing (over the
// daemon's unix socket, root and its trusted group need no password). It
// never sends two kinds of credential at once: the daemon takes the first
// one present and does not fall through to the next.
//
// Errors the daemon answers are *Error values (errors.As); a daemon that
// cannot be reached gives an error that wraps ErrUnreachable (errors.Is).
package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client is a client of one daemon. Its zero value is not usable: BaseURL
// is required. A Client may be used by one goroutine at a time (Login and
// Logout change Token).
type Client struct {
	// BaseURL is the daemon: "https://kvm.local", "http://127.0.0.1:8080",
	// or "unix:/run/kvmd/kvmd.sock" for its unix socket. A path after the
	// host is kept as a prefix (a reverse proxy serving the API below it).
	BaseURL string
	// User and Password authenticate requests when Token is empty, and
	// Login. Without User, requests carry no password.
	User, Password string
	// TOTPSecret is the 2FA secret (base32, as `kvmd totp show` prints
	// it; spaces and case do not matter). When set, the current code is
	// appended to Password, as the daemon wants with 2FA on.
	TOTPSecret string
	// Token is the session token requests carry as the auth_token cookie
	// instead of the password. Login sets it, Logout clears it.
	Token string
	// HTTPClient sends the requests; nil means NewHTTPClient(BaseURL,
	// false). Its Timeout must be 0 for Log with follow.
	HTTPClient *http.Client
	// Now and Sleep are the clock the 2FA code is timed by; nil means
	// real time. Sleep returns early with an error when ctx is done.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// ErrUnreachable is wrapped by the errors of requests that got no answer
// from the daemon: refused or timed-out connections, unknown host names,
// a socket that does not exist.
var ErrUnreachable = errors.New("client: daemon unreachable")

// Error is an error answer of the daemon, from its JSON envelope
// (`{"ok": false, "result": {"error": Name, "error_msg": Msg}}`).
type Error struct {
	Status int    // HTTP status, such as 403
	Name   string // such as "ForbiddenError"; empty when the reply was not the daemon's JSON
	Msg    string // the daemon's sentence for humans
	// RetryAfter is the wait the daemon asked for (429, Retry-After).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d, %s)", e.Msg, e.Status, e.Name)
}

// ValidURL returns an error saying why, unless s is a BaseURL the client
// can use.
func ValidURL(s string) error {
	_, _, err := parseBase(s)
	return err
}

// parseBase splits a BaseURL into the URL prefix requests go to and, for
// "unix:", the socket's path.
func parseBase(s string) (prefix, sock string, err error) {
	if p, ok := strings.CutPrefix(s, "unix:"); ok {
		if p == "" {
			return "", "", errors.New("client: unix: URL without a socket path")
		}
		return "http://kvmd", p, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("client: bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", "", fmt.Errorf("client: bad URL %q: want http://HOST[:PORT], https://HOST[:PORT] or unix:/PATH", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", "", fmt.Errorf("client: bad URL %q: no query, fragment or user info allowed", s)
	}
	return strings.TrimRight(u.String(), "/"), "", nil
}

func (c *Client) httpClient() (*http.Client, error) {
	if c.HTTPClient != nil {
		return c.HTTPClient, nil
	}
	if err := ValidURL(c.BaseURL); err != nil {
		return nil, err
	}
	return NewHTTPClient(c.BaseURL, false), nil
}

// send makes one request. authn adds its credentials.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, form url.Values, authn func(http.Header)) (*http.Response, error) {
	prefix, _, err := parseBase(c.BaseURL)
	if err != nil {
		return nil, err
	}
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	u := prefix + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json, text/plain")
	if authn != nil {
		authn(req.Header)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, transportError(ctx, err)
	}
	return resp, nil
}

// transportError classifies an error of http.Client.Do: the caller giving
// up and a certificate that does not verify are not "unreachable".
func transportError(ctx context.Context, err error) error {
	var cv *tls.CertificateVerificationError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("client: %w", ctx.Err())
	case errors.As(err, &cv):
		return fmt.Errorf("client: the daemon's TLS certificate does not verify: %w", err)
	}
	return fmt.Errorf("%w: %w", ErrUnreachable, err)
}

// do sends a request with the client's credentials: the session token, or
// the password (with a 2FA code, retried once on a 403), or none.
func (c *Client) do(ctx context.Context, method, path string, query url.Values) (*http.Response, error) {
	if c.Token != "" || c.User == "" {
		token := c.Token
		return c.send(ctx, method, path, query, nil, func(h http.Header) {
			if token != "" {
				h.Set("Cookie", (&http.Cookie{Name: "auth_token", Value: token}).String())
			}
		})
	}
	return c.withPassword(ctx, func(passwd string) (*http.Response, error) {
		return c.send(ctx, method, path, query, nil, func(h http.Header) {
			h.Set("X-KVMD-User", c.User)
			h.Set("X-KVMD-Passwd", passwd)
		})
	})
}

// maxReply bounds the JSON replies read into memory.
const maxReply = 16 << 20

// result reads a JSON reply and returns its result, or the *Error it
// carries. It closes the body.
func result(resp *http.Response) (json.RawMessage, error) {
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return nil, fmt.Errorf("client: reading the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, replyError(resp, data)
	}
	var env struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &env); err != nil || !env.OK || env.Result == nil {
		return nil, fmt.Errorf("client: the reply is not the daemon's JSON envelope: %.200q", data)
	}
	return env.Result, nil
}

// errorReply reads and closes the body of a reply that is not 200.
func errorReply(resp *http.Response) error {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return replyError(resp, data)
}

func replyError(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode}
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var env struct {
		Result struct {
			Error    string `json:"error"`
			ErrorMsg string `json:"error_msg"`
		} `json:"result"`
	}
	if json.Unmarshal(data, &env) == nil && env.Result.Error != "" {
		e.Name, e.Msg = env.Result.Error, env.Result.ErrorMsg
		return e
	}
	// Not the daemon (a proxy in between, say): show what came.
	e.Msg = http.StatusText(resp.StatusCode)
	if text := strings.TrimSpace(string(data)); text != "" && len(text) <= 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		e.Msg += ": " + text
	}
	return e
}

// Login starts a session with User and Password (POST /api/auth/login) and
// returns its token, which it also stores in Token for the requests that
// follow.
func (c *Client) Login(ctx context.Context) (string, error) {
	if c.User == "" {
		return "", errors.New("client: login needs a user")
	}
	resp, err := c.withPassword(ctx, func(passwd string) (*http.Response, error) {
		form := url.Values{"user": {c.User}, "passwd": {passwd}}
		return c.send(ctx, http.MethodPost, "/api/auth/login", nil, form, nil)
	})
	if err != nil {
		return "", err
	}
	cookies := resp.Cookies()
	if _, err := result(resp); err != nil {
		return "", err
	}
	for _, ck := range cookies {
		if ck.Name == "auth_token" && ck.Value != "" {
			c.Token = ck.Value
			return ck.Value, nil
		}
	}
	return "", errors.New("client: the login succeeded but the reply set no auth_token cookie")
}

// Check asks whether the client's credentials are accepted
// (GET /api/auth/check). With none at all (over a unix socket, where the
// daemon may know the caller from its peer credentials) it asks
// GET /api/info?fields=auth instead: /api/auth/check never accepts peer
// credentials, as in kvmd, because a reverse proxy's auth_request calls it.
func (c *Client) Check(ctx context.Context) error {
	path := "/api/auth/check"
	if c.User == "" && c.Token == "" {
		path = "/api/info?fields=auth"
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	_, err = result(resp)
	return err
}

// Logout ends the session of Token on the daemon (POST /api/auth/logout)
// and clears Token. Without a token it does nothing. A session the daemon
// no longer knows gives a 403 *Error, and Token is kept.
func (c *Client) Logout(ctx context.Context) error {
	if c.Token == "" {
		return nil
	}
	resp, err := c.do(ctx, http.MethodPost, "/api/auth/logout", nil)
	if err != nil {
		return err
	}
	if _, err := result(resp); err != nil {
		return err
	}
	c.Token = ""
	return nil
}

// Info returns the result of GET /api/info: an object with the categories
// asked for as keys (all of them when fields is empty).
func (c *Client) Info(ctx context.Context, fields ...string) (json.RawMessage, error) {
	var q url.Values
	if len(fields) > 0 {
		q = url.Values{"fields": {strings.Join(fields, ",")}}
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/info", q)
	if err != nil {
		return nil, err
	}
	return result(resp)
}

// Log returns the service log (GET /api/log) as it streams: one line per
// journal entry, ending in "\r\n". seek > 0 starts that many seconds back
// (0: the whole boot); with follow, the stream stays open for new entries
// until ctx is done or the caller closes it.
func (c *Client) Log(ctx context.Context, seek int, follow bool) (io.ReadCloser, error) {
	if seek < 0 {
		return nil, errors.New("client: seek must not be negative")
	}
	q := url.Values{}
	if seek > 0 {
		q.Set("seek", strconv.Itoa(seek))
	}
	if follow {
		q.Set("follow", "1")
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/log", q)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorReply(resp)
	}
	return resp.Body, nil
}
