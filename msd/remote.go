package msd

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// ErrRemote is a download for write_remote that could not start: the
// server could not be reached, refused, or did not say the image's size
// or name. kvmd answers these with its HTTP client's error class
// (aiohttp.ClientError, kvmd/apps/kvmd/api/msd.py), status 400.
var ErrRemote = &Error{Name: "ClientError", Status: 400, Msg: "The image could not be downloaded"}

// Remote is an image being downloaded: its name (from the server's
// Content-Disposition, else the last element of the URL's path), its
// size (the server's Content-Length) and its body.
type Remote struct {
	Name string
	Size int64
	Body io.ReadCloser
}

// FetchOptions are write_remote's: TLS is verified unless Insecure;
// Timeout bounds connecting (TCP and TLS), as kvmd's does, not the
// download, which lasts as long as ctx.
type FetchOptions struct {
	Insecure  bool
	Timeout   time.Duration
	UserAgent string
}

// Fetch starts downloading rawURL (http or https). It fails, with
// ErrRemote, unless the server answers 200 with a Content-Length.
func Fetch(ctx context.Context, rawURL string, o FetchOptions) (*Remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, ErrRemote.withMsg("Not an http:// or https:// URL")
	}
	dialer := &net.Dialer{Timeout: o.Timeout}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: o.Timeout,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: o.Insecure},
		// The image as it is: no transparent gzip that would hide its
		// length.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	client := &http.Client{Transport: tr}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, ErrRemote.with(err)
	}
	if o.UserAgent != "" {
		req.Header.Set("User-Agent", o.UserAgent)
	}
	resp, err := client.Do(req)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, ErrRemote.withMsg("The image's server could not be reached or refused the connection").with(err)
	}
	fail := func(e *Error) (*Remote, error) {
		resp.Body.Close()
		tr.CloseIdleConnections()
		return nil, e
	}
	if resp.StatusCode != http.StatusOK {
		return fail(ErrRemote.withMsg(fmt.Sprintf("The image's server answered %s", resp.Status)))
	}
	if resp.ContentLength < 0 {
		return fail(ErrRemote.withMsg("The image's server did not send its size (Content-Length)"))
	}
	name := remoteName(resp)
	if name == "" {
		return fail(ErrRemote.withMsg("The image's name cannot be told from the server's answer or the URL; give it as image="))
	}
	return &Remote{Name: name, Size: resp.ContentLength, Body: closer{resp.Body, tr}}, nil
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

type closer struct {
	io.ReadCloser
	tr *http.Transport
}

func (c closer) Close() error {
	err := c.ReadCloser.Close()
	c.tr.CloseIdleConnections()
	return err
}
