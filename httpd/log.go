package httpd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LogSource answers GET /api/log. Package journal's *Reader is one.
type LogSource interface {
	// WriteLog writes the log lines from seek back (0: the whole boot) to
	// w, and with follow those that come after, until ctx ends. w also
	// has the methods Flush() error and SetWriteDeadline(time.Time) error.
	// An error returned before anything was written to or flushed on w is
	// the request's answer: one with the methods of PublicError answers
	// with its status and message.
	WriteLog(ctx context.Context, w io.Writer, seek time.Duration, follow bool) error
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
	q := query(r)
	seek, err := parseSeek(q.Get("seek"))
	if err != nil {
		return err
	}
	follow, err := queryBool(r, "follow", false)
	if err != nil {
		return err
	}
	if follow {
		release, err := s.holdStream(w, r, &s.logKind)
		if err != nil {
			return err
		}
		defer release()
	}
	// The stream ends when the client goes away or the server shuts down
	// (r's context derives from the server's BaseContext).
	ctx := r.Context()

	lw := &logWriter{w: w, rc: http.NewResponseController(w)}
	done := make(chan error, 1)
	go func() { done <- s.cfg.LogSource.WriteLog(ctx, lw, seek, follow) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The client left, the server is stopping, or the session or
		// token that let the request in ended (revoked, expired, idle):
		// the reply ends now, not once the source has let go of what it
		// holds (journalctl killed and reaped), which it does on its own
		// with ctx. Nothing reaches w after the handler returns.
		if !lw.stop() {
			err = <-done // nothing sent yet: the answer is WriteLog's
			break
		}
		return nil
	}
	if !lw.started {
		if err != nil {
			return err // nothing sent yet: the answer is the error's envelope
		}
		lw.start() // an empty log
		return nil
	}
	if err != nil && ctx.Err() == nil && !lw.gone {
		s.cfg.Log.Warn("log stream ended", "err", err)
	}
	return nil
}

// logWriter is the response as a LogSource writes it: the status and
// headers of a log go out with the first write or flush. Once stopped,
// it writes nothing more (the handler has returned).
type logWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	mu      sync.Mutex
	stopped bool
	started bool
	gone    bool // the first flush failed: the client left at once
}

// errLogStopped is a write after the handler returned.
var errLogStopped = errors.New("httpd: the log's reply has ended")

// stop makes every later call fail and tells whether the reply had
// begun; when it had not, it is not stopped (the handler answers with
// the source's error).
func (l *logWriter) stop() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started {
		return false
	}
	l.stopped = true
	return true
}

func (l *logWriter) start() {
	if l.started {
		return
	}
	l.started = true
	h := l.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Accel-Buffering", "no") // a reverse proxy must not hold a follow back
	l.w.WriteHeader(http.StatusOK)
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return 0, errLogStopped
	}
	l.start()
	return l.w.Write(p)
}

func (l *logWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errLogStopped
	}
	first := !l.started
	l.start()
	err := l.rc.Flush()
	if err != nil && first {
		l.gone = true
	}
	return err
}

func (l *logWriter) SetWriteDeadline(t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errLogStopped
	}
	return l.rc.SetWriteDeadline(t)
}
