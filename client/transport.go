package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"
)

// NewHTTPClient returns an HTTP client for the daemon at baseURL: one that
// dials the socket for a "unix:" URL. insecure skips the verification of
// the daemon's TLS certificate (a device's self-signed one).
//
// It has no overall timeout, since a followed log may stream for days;
// connecting and waiting for the reply's headers time out instead.
func NewHTTPClient(baseURL string, insecure bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = dialer.DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	// Long enough for a login whose slow hash waits behind others.
	tr.ResponseHeaderTimeout = 60 * time.Second
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	if sock, ok := strings.CutPrefix(baseURL, "unix:"); ok {
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", sock)
		}
	}
	return &http.Client{Transport: tr}
}
