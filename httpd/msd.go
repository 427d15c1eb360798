package httpd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"kvmd/msd"
)

// MSD is the virtual media drive (package msd's Manager).
type MSD interface {
	SetParams(msd.Params) error
	SetConnected(connected bool) error
	Reset() error
	Remove(name string) error
	Begin(name string, size int64) (*msd.Upload, error)
	Open(name string) (*msd.Reader, error)
}

// DefaultMSDStall is how long an upload's body or a read's client may
// stall before the transfer is cut (Devices.MSDStall): these replace the
// server's 10 s body timeout, which a large image could never meet.
const DefaultMSDStall = 60 * time.Second

func (s *Server) msdStall() time.Duration {
	if d := s.cfg.Devices.MSDStall; d > 0 {
		return d
	}
	return DefaultMSDStall
}

// msdDrive returns the drive, or kvmd's disabled MSD's error.
func (s *Server) msdDrive() (MSD, error) {
	if m := s.cfg.Devices.MSD; m != nil {
		return m, nil
	}
	return nil, msdError(msd.ErrDisabled)
}

// msdError turns package msd's errors into the envelope's.
func msdError(err error) error {
	var e *msd.Error
	var ne *msd.NameError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return &Error{Status: e.Status, Name: e.Name, Msg: e.Msg, Err: e.Err}
	case errors.As(err, &ne):
		return BadParam("image", ne.Why)
	}
	return err
}

// imageName reads an image name as kvmd's valid_msd_image_name does
// (prefix, then image, joined with a slash, empty parts dropped), but of
// one part only: this storage has no subdirectories. allowEmpty lets ""
// through (set_params: no image). A name is taken as it is written: one
// with a space at either end is refused (CheckName), never stored
// trimmed, so that the name you give is the name you get.
func imageName(r *http.Request, withPrefix, allowEmpty bool) (string, error) {
	q := r.URL.Query()
	raw := q.Get("image")
	if withPrefix {
		raw = q.Get("prefix") + "/" + raw
	}
	var parts []string
	for _, p := range strings.Split(raw, "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	switch {
	case len(parts) == 0 && allowEmpty:
		return "", nil
	case len(parts) == 0:
		return "", BadParam("image", "an image name is required")
	case len(parts) > 1:
		return "", BadParam("image", "a path: images are single files in the storage (no prefix or subdirectory)")
	}
	if err := msd.CheckName(parts[0]); err != nil {
		return "", msdError(err)
	}
	return parts[0], nil
}

// remoteImage is kvmd's test for an image given as a URL in set_params
// (a scheme, "://", then a host).
var remoteImage = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9._+-]+[a-zA-Z]://[a-zA-Z0-9\[]`)

func (s *Server) msdSetParams(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var p msd.Params
	if q.Has("image") {
		if remoteImage.MatchString(strings.TrimSpace(q.Get("image"))) {
			return msdError(msd.ErrRemoteDisabled)
		}
		name, err := imageName(r, false, true)
		if err != nil {
			return err
		}
		p.Image = &name
	}
	for _, f := range []struct {
		name string
		dst  **bool
	}{{"cdrom", &p.CDROM}, {"rw", &p.RW}} {
		if q.Has(f.name) {
			v, err := queryBool(r, f.name, false)
			if err != nil {
				return err
			}
			*f.dst = &v
		}
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	if err := msdError(m.SetParams(p)); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) msdSetConnected(w http.ResponseWriter, r *http.Request) error {
	if !r.URL.Query().Has("connected") {
		return BadParam("connected", "not a boolean (1/true/yes or 0/false/no)")
	}
	connected, err := queryBool(r, "connected", false)
	if err != nil {
		return err
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	if err := msdError(m.SetConnected(connected)); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) msdRemove(w http.ResponseWriter, r *http.Request) error {
	name, err := imageName(r, false, false)
	if err != nil {
		return err
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	if err := msdError(m.Remove(name)); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) msdReset(w http.ResponseWriter, r *http.Request) error {
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	if err := msdError(m.Reset()); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// writeInfo is kvmd's answer to write and write_remote.
type writeInfo struct {
	Image struct {
		Name    string `json:"name"`
		Size    int64  `json:"size"`
		Written int64  `json:"written"`
	} `json:"image"`
}

func newWriteInfo(name string, size, written int64) writeInfo {
	var wi writeInfo
	wi.Image.Name, wi.Image.Size, wi.Image.Written = name, size, written
	return wi
}

// transferContext is the request's context, also ended when the server
// begins to shut down: a transfer stops then, and its upload leaves
// nothing.
func (s *Server) transferContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// stallReader reads a request body with a deadline that moves on as data
// comes: a client may take hours over an image, but not stall for
// longer than stall. The context's end cuts a read short at once.
type stallReader struct {
	r     io.Reader
	rc    *http.ResponseController
	stall time.Duration
	last  time.Time
	// stopped says a read failed on its deadline before the stall's
	// time: the context's end moved it (net/http ends the request's
	// context itself after a failed read, so the context's state after
	// the failure does not tell which came first).
	stopped atomic.Bool
}

func newStallReader(ctx context.Context, w http.ResponseWriter, r io.Reader, stall time.Duration) (*stallReader, func()) {
	sr := &stallReader{r: r, rc: http.NewResponseController(w), stall: stall}
	stop := context.AfterFunc(ctx, func() { _ = sr.rc.SetReadDeadline(time.Now()) })
	return sr, func() { stop() }
}

func (b *stallReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(b.last) > time.Second {
		_ = b.rc.SetReadDeadline(now.Add(b.stall))
		b.last = now
	}
	n, err := b.r.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(b.last.Add(b.stall)) {
		b.stopped.Store(true)
	}
	return n, err
}

// POST /api/msd/write?image=NAME with the image as the raw body, its size
// in Content-Length (kvmd's form). The body streams to the storage; the
// image exists once all of it is on disk, and never otherwise.
func (s *Server) msdWrite(w http.ResponseWriter, r *http.Request) error {
	name, err := imageName(r, true, false)
	if err != nil {
		return err
	}
	if _, err := queryBool(r, "remove_incomplete", false); err != nil {
		return err
	}
	// Without the header net/http reads no body (ContentLength 0): an
	// image of nothing, which the docs say is refused.
	if r.ContentLength < 0 || r.Header.Get("Content-Length") == "" {
		return BadParam("Content-Length", "the image's size is needed (a chunked body, or none, is not taken)")
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	u, err := m.Begin(name, r.ContentLength)
	if err != nil {
		return msdError(err)
	}
	ctx, cancel := s.transferContext(r)
	defer cancel()
	body, stop := newStallReader(ctx, w, r.Body, s.msdStall())
	defer stop()
	err = u.Copy(ctx, body, nil)
	if err == nil {
		err = u.Commit()
	} else {
		u.Abort()
		err = cutError(body.stopped.Load(), err, u.Written(), u.Size(), s.msdStall())
	}
	if err != nil {
		return msdError(err)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return WriteJSON(w, newWriteInfo(name, u.Size(), u.Written()))
}

// cutError says why an upload stopped short. stopped, the transfer's
// context ending first, is asked before the error: it cuts a read short
// by moving the read deadline to now (stallReader), so its error is a
// deadline's too, which is no stall. Over HTTP/2 a client that goes away
// ends the context as well.
func cutError(stopped bool, err error, written, size int64, stall time.Duration) error {
	var e *msd.Error
	if errors.As(err, &e) {
		return err
	}
	why := "The upload was cut"
	switch {
	case stopped || errors.Is(err, context.Canceled):
		why = "The upload was stopped (the client went away, its session ended or the daemon is shutting down)"
	case errors.Is(err, os.ErrDeadlineExceeded):
		why = fmt.Sprintf("The upload stalled (no data for %v)", stall)
	}
	return &Error{Status: http.StatusBadRequest, Name: msd.ErrOperation.Name,
		Msg: fmt.Sprintf("%s after %d of %d bytes; nothing was kept", why, written, size), Err: err}
}

// POST /api/msd/write_remote?url=URL downloads an image into the storage
// as write does, answering with kvmd's progress lines (ndjson: the
// envelope with the write info, at the start, every second or so, and
// at the end; an error after the start is a last line with ok false).
func (s *Server) msdWriteRemote(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	rawURL := strings.TrimSpace(q.Get("url"))
	if u, err := url.Parse(rawURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return BadParam("url", "not an HTTP or HTTPS URL")
	}
	insecure, err := queryBool(r, "insecure", false)
	if err != nil {
		return err
	}
	timeout := 10.0
	if v := q.Get("timeout"); v != "" {
		if timeout, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || timeout < 0.1 || timeout > 3600 {
			return BadParam("timeout", "not a number of seconds from 0.1 to 3600")
		}
	}
	if _, err := queryBool(r, "remove_incomplete", false); err != nil {
		return err
	}
	var name string
	if strings.TrimSpace(q.Get("image")) != "" {
		if name, err = imageName(r, true, false); err != nil {
			return err
		}
	} else if _, err := imageName(r, true, true); err != nil {
		return err // a prefix alone
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	ctx, cancel := s.transferContext(r)
	defer cancel()
	rem, err := msd.Fetch(ctx, rawURL, msd.FetchOptions{
		Insecure: insecure, Timeout: time.Duration(timeout * float64(time.Second)), UserAgent: "kvmd",
	})
	if err != nil {
		return msdError(err)
	}
	defer rem.Body.Close()
	if name == "" {
		name = rem.Name
	}
	s.cfg.Log.Info("downloading an image", "url", redactURL(rawURL), "image", msd.LogName(name), "size", rem.Size)
	u, err := m.Begin(name, rem.Size)
	if err != nil {
		return msdError(err)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	line := func(v any, ok bool) {
		b, _ := json.Marshal(envelope{OK: ok, Result: v})
		_ = rc.SetWriteDeadline(time.Now().Add(s.msdStall()))
		w.Write(append(b, '\r', '\n'))
		rc.Flush()
	}
	line(newWriteInfo(name, rem.Size, 0), true)
	last := time.Now()
	err = u.Copy(ctx, rem.Body, func(n int64) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			line(newWriteInfo(name, rem.Size, n), true)
		}
	})
	if err == nil {
		err = u.Commit()
	} else {
		u.Abort()
		err = cutError(ctx.Err() != nil, err, u.Written(), u.Size(), s.msdStall())
	}
	line(newWriteInfo(name, rem.Size, u.Written()), true)
	if err != nil {
		e := asError(msdError(err))
		s.cfg.Log.Warn("image download failed", "image", msd.LogName(name), "err", err)
		line(errorResult{Error: e.Name, ErrorMsg: e.Msg}, false)
	}
	return nil
}

// rfc5987 percent-encodes s for a header parameter's ext-value (RFC 5987):
// every byte but letters, digits and -._~ (as kvmd's urllib quote with
// safe="" does), so no quote, semicolon or comma ends the value early.
func rfc5987(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// redactURL drops a URL's user information (a password) for the log.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

// GET /api/msd/read?image=NAME: the image's bytes, as an attachment.
// kvmd can also compress them on the way (compress=lzma or zstd); this
// daemon sends them as they are.
func (s *Server) msdRead(w http.ResponseWriter, r *http.Request) error {
	name, err := imageName(r, false, false)
	if err != nil {
		return err
	}
	switch strings.ToLower(strings.TrimSpace(r.URL.Query().Get("compress"))) {
	case "", "none":
	case "lzma", "zstd":
		return BadParam("compress", "compression is not supported by this daemon: use none")
	default:
		return BadParam("compress", "not one of none, lzma, zstd")
	}
	m, err := s.msdDrive()
	if err != nil {
		return err
	}
	rd, err := m.Open(name)
	if err != nil {
		return msdError(err)
	}
	defer rd.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(rd.Size(), 10))
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+rfc5987(name))
	if r.Method == http.MethodHead {
		return nil
	}
	ctx, cancel := s.transferContext(r)
	defer cancel()
	rc := http.NewResponseController(w)
	buf := make([]byte, 256<<10)
	var last time.Time
	for ctx.Err() == nil {
		n, rerr := rd.Read(buf)
		if n > 0 {
			if now := time.Now(); now.Sub(last) > time.Second {
				_ = rc.SetWriteDeadline(now.Add(s.msdStall()))
				last = now
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the client left
			}
		}
		if rerr != nil {
			break
		}
	}
	return nil
}
