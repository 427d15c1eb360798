// Package httpauth checks passwords with an HTTP service of the operator's:
// it POSTs {"user": ..., "passwd": ...} as JSON to a URL, with a shared
// secret as a bearer token, and lets the user in only on 200.
package httpauth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"kvmd/auth/backend"
)

// DefaultTimeout bounds a check when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// maxDrain is how much of a response body is read, so the connection can
// be reused; a service that sends more loses its connection instead.
const maxDrain = 4 << 10

// Config configures a Backend.
type Config struct {
	// URL is where the credentials are posted: https://, or http:// to
	// a loopback address only (the password must not cross a network in
	// clear).
	URL string
	// SecretFile holds the shared secret (surrounding blanks and the
	// final newline are ignored); Secret is the secret itself. One of
	// them is required.
	SecretFile string
	Secret     []byte
	// CAFile, when set, holds the PEM certificates the service's must
	// chain to, instead of the system's.
	CAFile string
	// Timeout bounds each check (0: DefaultTimeout).
	Timeout time.Duration
}

// Backend is an HTTP authentication service. It implements
// backend.Backend.
type Backend struct {
	url     string
	shown   string // the URL for errors and logs, userinfo redacted
	auth    string // the Authorization header
	timeout time.Duration
	client  *http.Client
}

// New checks cfg and returns the Backend it describes. It reads the secret
// and CA files now.
func New(cfg Config) (*Backend, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("httpauth: URL %q is not an absolute http(s) URL", cfg.URL)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !loopback(u.Hostname()) {
			return nil, fmt.Errorf("httpauth: %s: plain http only to a loopback address; use https", u.Redacted())
		}
	default:
		return nil, fmt.Errorf("httpauth: URL %s: scheme must be https (or http to a loopback address)", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("httpauth: URL %s: no user information in the URL; the secret is sent as a bearer token", u.Redacted())
	}

	secret := cfg.Secret
	if cfg.SecretFile != "" {
		if secret, err = os.ReadFile(cfg.SecretFile); err != nil {
			return nil, fmt.Errorf("httpauth: reading the secret: %w", err)
		}
	}
	tok := strings.TrimSpace(string(secret))
	if tok == "" {
		return nil, errors.New("httpauth: no shared secret (empty or missing secret file)")
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < 0x21 || tok[i] > 0x7e {
			return nil, errors.New("httpauth: the shared secret must be one word of printable ASCII")
		}
	}

	timeout := cfg.Timeout
	if timeout < 0 {
		return nil, errors.New("httpauth: negative timeout")
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("httpauth: reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("httpauth: %s holds no PEM certificate", cfg.CAFile)
		}
		tlsConf.RootCAs = pool
	}
	tr := &http.Transport{
		// No proxy from the environment: the service is the operator's,
		// reached directly, and the daemon's environment is not a
		// configuration to trust with passwords.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: timeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Backend{
		url:     u.String(),
		shown:   u.Redacted(),
		auth:    "Bearer " + tok,
		timeout: timeout,
		client: &http.Client{
			Transport: tr,
			// A redirect is a misconfiguration, never followed: the
			// credentials would go wherever it points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name returns "http".
func (b *Backend) Name() string { return "http" }

// Close closes the idle connections to the service.
func (b *Backend) Close() { b.client.CloseIdleConnections() }

// Verify posts the credentials. 200 lets the user in; a 4xx (401, 403,
// 404 for an unknown user...) is a rejection, but for 408 and 429, which
// say "not now"; anything else (5xx, a redirect, another 2xx), a timeout
// or a connection that fails is unavailable. The answer's body is read (at most 4 KiB) and ignored.
func (b *Backend) Verify(ctx context.Context, user, passwd string) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	body, err := json.Marshal(struct {
		User   string `json:"user"`
		Passwd string `json:"passwd"`
	}{user, passwd})
	if err != nil {
		return fmt.Errorf("%w: %v", backend.ErrUnavailable, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", backend.ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", b.auth)
	req.Header.Set("User-Agent", "kvmd")
	resp, err := b.client.Do(req)
	if err != nil {
		// A *url.Error names the URL; say it our way, redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w: %s: no answer within %s (%v)", backend.ErrUnavailable, b.shown, b.timeout, err)
		}
		return fmt.Errorf("%w: %s: %v", backend.ErrUnavailable, b.shown, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c == http.StatusOK:
		return nil
	case c == http.StatusRequestTimeout || c == http.StatusTooManyRequests:
		// "Not now" rather than "no".
		return fmt.Errorf("%w: %s answered %d", backend.ErrUnavailable, b.shown, c)
	case c >= 400 && c < 500:
		return fmt.Errorf("%w: %s answered %d", backend.ErrRejected, b.shown, c)
	default:
		return fmt.Errorf("%w: %s answered %d", backend.ErrUnavailable, b.shown, c)
	}
}
