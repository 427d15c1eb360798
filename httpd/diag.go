package httpd

import (
	"context"
	"io"
	"mime"
	"net/http"
	"time"
)

// DiagBundle is one support bundle (package diag's *Bundle).
type DiagBundle interface {
	// FileName is the name to save it under.
	FileName() string
	// Write runs the probes and writes the archive to w.
	Write(ctx context.Context, w io.Writer) error
}

// DiagSource makes a support bundle for GET /api/diagnostics, with user
// names and addresses replaced when redactIdentities. Its error (a secret
// file that cannot be read, so that its secret could not be removed) is
// the request's answer.
type DiagSource func(redactIdentities bool) (DiagBundle, error)

var errDiagBusy = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError",
	Msg: "A diagnostics bundle is being made; try again when it is done", RetryAfter: 10 * time.Second, Expected: true}

// diagnostics answers GET /api/diagnostics: a zip archive streamed as
// the probes end, one at a time (a bundle runs a dozen probes, some of
// them processes; two at once would only slow both).
func (s *Server) diagnostics(w http.ResponseWriter, r *http.Request) error {
	redact, err := queryBool(r, "redact_identities", false)
	if err != nil {
		return err
	}
	select {
	case s.diagBusy <- struct{}{}:
		defer func() { <-s.diagBusy }()
	default:
		return errDiagBusy
	}
	b, err := s.cfg.Diagnostics(redact)
	if err != nil {
		return Unavailable("Cannot make a diagnostics bundle; the daemon's log has the details", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": b.FileName()}))
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}
	if err := b.Write(r.Context(), w); err != nil { // cut short at shutdown (BaseContext)
		// The reply has begun: the client sees a truncated archive, which
		// no zip reader opens; the log says why.
		s.cfg.Log.Warn("diagnostics bundle not sent whole", "err", err)
		return nil
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}
