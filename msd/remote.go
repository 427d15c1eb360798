package msd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRemote is a download for write_remote that could not start: the
// server could not be reached, refused, or did not say the image's size
// or name. kvmd answers these with its HTTP client's error class
// (aiohttp.ClientError, kvmd/apps/kvmd/api/msd.py), status 400.
var ErrRemote = &Error{Name: "ClientError", Status: 400, Msg: "The image could not be downloaded"}

// ErrStalled is a download whose server sent nothing for FetchOptions.Stall.
var ErrStalled = errors.New("msd: the image's server stopped sending")

// errDenied is a connection to an address FetchOptions.Deny holds.
var errDenied = errors.New("msd: the address is one remote images may not come from")

// DefaultDeny are the networks a remote image may not come from unless the
// configuration says otherwise: the device itself (loopback, "this
// network"), link-local addresses (a cloud's metadata service lives at
// 169.254.169.254) and multicast and broadcast, which no image server
// has. The LAN, where images usually are, is allowed.
var DefaultDeny = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("255.255.255.255/32"),
}

// MaxRedirects is how many redirects a download follows.
const MaxRedirects = 5

// Remote is an image being downloaded: its name (from the server's
// Content-Disposition, else the last element of the URL's path), its
// size (the server's Content-Length) and its body.
type Remote struct {
	Name string
	Size int64
	Body io.ReadCloser
}

// FetchOptions are write_remote's: TLS is verified unless Insecure.
// Timeout bounds connecting (TCP and TLS) and waiting for the answer's
// header, as kvmd's does; Stall how long the body may send nothing (0:
// forever), else the download lasts as long as ctx.
type FetchOptions struct {
	Insecure  bool
	Timeout   time.Duration
	Stall     time.Duration
	UserAgent string
	// Deny are the networks the download may not connect to, checked on
	// the address each connection is made to (after DNS, so a name that
	// resolves into one is refused too, and on every redirect).
	Deny []netip.Prefix
}

// Fetch starts downloading rawURL (http or https). It fails, with
// ErrRemote, unless the server answers 200 with a Content-Length and no
// Content-Encoding. A redirect is followed (at most MaxRedirects) only to
// http or https, and never from https to http.
func Fetch(ctx context.Context, rawURL string, o FetchOptions) (*Remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, ErrRemote.withMsg("Not an http:// or https:// URL")
	}
	deny := o.Deny
	dialer := &net.Dialer{Timeout: o.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		for _, p := range deny {
			if p.Contains(ap.Addr().Unmap()) {
				return fmt.Errorf("%w: %s", errDenied, ap.Addr())
			}
		}
		return nil
	}}
	tr := &http.Transport{
		// No proxy, as kvmd's aiohttp session (trust_env off): the
		// connection goes where the URL says, and Deny sees it.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
		TLSClientConfig:       &tls.Config{InsecureSkipVerify: o.Insecure},
		// The image as it is: no transparent gzip that would hide its
		// length.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	client := &http.Client{Transport: tr, CheckRedirect: checkRedirect}
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return nil, ErrRemote.with(err)
	}
	if o.UserAgent != "" {
		req.Header.Set("User-Agent", o.UserAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		tr.CloseIdleConnections()
		return nil, remoteError(err)
	}
	fail := func(e *Error) (*Remote, error) {
		resp.Body.Close()
		cancel()
		tr.CloseIdleConnections()
		return nil, e
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return fail(ErrRemote.withMsg(fmt.Sprintf("The image's server answered %s", resp.Status)))
	case resp.ContentLength < 0:
		return fail(ErrRemote.withMsg("The image's server did not send its size (Content-Length)"))
	case resp.Header.Get("Content-Encoding") != "" && !strings.EqualFold(resp.Header.Get("Content-Encoding"), "identity"):
		return fail(ErrRemote.withMsg("The image's server sent it encoded (Content-Encoding " + resp.Header.Get("Content-Encoding") + "): an image is stored as it is"))
	}
	name := remoteName(resp)
	if name == "" {
		return fail(ErrRemote.withMsg("The image's name cannot be told from the server's answer or the URL; give it as image="))
	}
	body := &remoteBody{body: resp.Body, tr: tr, cancel: cancel, stall: o.Stall}
	if o.Stall > 0 {
		body.timer = time.AfterFunc(o.Stall, body.stalled)
	}
	return &Remote{Name: name, Size: resp.ContentLength, Body: body}, nil
}

// checkRedirect follows a redirect only to http or https, never down from
// https to http (a TLS-verified download must not go on in the clear),
// and at most MaxRedirects times.
func checkRedirect(req *http.Request, via []*http.Request) error {
	from := via[len(via)-1].URL.Scheme
	switch to := req.URL.Scheme; {
	case len(via) > MaxRedirects:
		return fmt.Errorf("%w: more than %d redirects", errRedirect, MaxRedirects)
	case to != "http" && to != "https":
		return fmt.Errorf("%w: to a %s: URL", errRedirect, to)
	case from == "https" && to == "http":
		return fmt.Errorf("%w: from https to http", errRedirect)
	}
	return nil
}

var errRedirect = errors.New("msd: redirect refused")

// remoteError says why a download could not start.
func remoteError(err error) *Error {
	switch {
	case errors.Is(err, errRedirect):
		return ErrRemote.withMsg("The image's server redirected where the daemon does not follow (to a scheme other than http or https, from https to http, or more than 5 times)").with(err)
	case errors.Is(err, errDenied):
		return ErrRemote.withMsg("The image's address is one the daemon does not download from (the device itself, link-local or multicast: msd-remote-deny)").with(err)
	}
	return ErrRemote.withMsg("The image's server could not be reached or refused the connection").with(err)
}

// remoteName is the file name the server gives (Content-Disposition's
// filename), else the last element of the final URL's path, as kvmd's
// htclient.get_filename does; "" when neither is a valid image name.
func remoteName(resp *http.Response) string {
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		if n := path.Base(strings.ReplaceAll(params["filename"], `\`, "/")); CheckName(n) == nil {
			return n
		}
	}
	if resp.Request != nil && resp.Request.URL != nil {
		if n := path.Base(resp.Request.URL.Path); CheckName(n) == nil {
			return n
		}
	}
	return ""
}

// remoteBody is a download's body: each read moves the stall deadline
// on; when it passes, the request is cancelled and reads say ErrStalled.
// Close ends the request and its connections.
type remoteBody struct {
	body   io.ReadCloser
	tr     *http.Transport
	cancel context.CancelFunc
	stall  time.Duration
	timer  *time.Timer

	mu      sync.Mutex
	isStall bool
}

func (b *remoteBody) stalled() {
	b.mu.Lock()
	b.isStall = true
	b.mu.Unlock()
	b.cancel()
}

func (b *remoteBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if b.timer != nil && n > 0 {
		b.timer.Reset(b.stall)
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.isStall {
			err = fmt.Errorf("%w (nothing for %v)", ErrStalled, b.stall)
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *remoteBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.cancel()
	err := b.body.Close()
	b.tr.CloseIdleConnections()
	return err
}

// Download writes rem into the storage as image name, as an upload is
// written (Begin, Copy, Commit): progress is called with 0 once the
// upload began, then with the bytes written after each write. Whatever
// stops it (ctx, the server, the disk) leaves nothing in the storage.
// rem.Body is the caller's to close.
func (m *Manager) Download(ctx context.Context, rem *Remote, name string, progress func(written int64)) error {
	u, err := m.Begin(name, rem.Size)
	if err != nil {
		return err
	}
	progress(0)
	if err := u.Copy(ctx, rem.Body, progress); err != nil {
		u.Abort()
		return &CutError{Written: u.Written(), Size: u.Size(), Err: err}
	}
	return u.Commit()
}

// CutError is a transfer into the storage that stopped short: Err says
// why (the context, ErrStalled, the source's error).
type CutError struct {
	Written, Size int64
	Err           error
}

func (e *CutError) Error() string {
	return fmt.Sprintf("msd: transfer cut after %d of %d bytes: %v", e.Written, e.Size, e.Err)
}

func (e *CutError) Unwrap() error { return e.Err }
