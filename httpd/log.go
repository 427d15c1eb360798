package httpd

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// LogSource answers GET /api/log (package journal, through an adapter in
// the daemon's main).
type LogSource interface {
	// Open starts reading the log seek back (0: the whole boot), staying
	// attached when follow is set. Its errors are *Error values (503).
	Open(ctx context.Context, seek time.Duration, follow bool) (LogStream, error)
}

// LogStream is an open log.
type LogStream interface {
	// Stream writes lines to w, calling flush after each batch and
	// setDeadline before each write, until the log ends (without follow),
	// ctx ends, or a write fails.
	Stream(ctx context.Context, w io.Writer, flush func() error, setDeadline func(time.Time) error) error
	Close() error
}

// maxSeek bounds seek: ten years back is the whole of any journal.
const maxSeek = 10 * 365 * 24 * 3600

func parseSeek(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, BadParam("seek", "not a whole number of seconds, 0 or more")
	}
	return time.Duration(min(n, maxSeek)) * time.Second, nil
}

var errLogDisabled = &Error{Status: http.StatusBadRequest, Name: "LogReaderDisabledError", Msg: "The log reader is disabled"}

func (s *Server) log(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.LogSource == nil {
		return errLogDisabled
	}
	q := r.URL.Query()
	seek, err := parseSeek(q.Get("seek"))
	if err != nil {
		return err
	}
	follow, err := queryBool(r, "follow", false)
	if err != nil {
		return err
	}
	// The stream ends when the client goes away or the server shuts down.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()

	st, err := s.cfg.LogSource.Open(ctx, seek, follow)
	if err != nil {
		return err
	}
	defer st.Close()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Accel-Buffering", "no") // a reverse proxy must not hold a follow back
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return nil // the client is gone already
	}
	if err := st.Stream(ctx, w, rc.Flush, rc.SetWriteDeadline); err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("log stream ended", "err", err)
	}
	return nil
}
