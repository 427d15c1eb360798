package httpd

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// MetricsSource answers GET /api/export/prometheus/metrics (package
// metrics implements it).
type MetricsSource interface {
	// WriteMetrics writes the Prometheus text exposition.
	WriteMetrics(w io.Writer) error
}

// metricsContentType is the text exposition format, version 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	// Written whole before the reply begins: a failure is then a proper
	// error, never a truncated exposition Prometheus would half ingest.
	// It is a few KiB.
	var b bytes.Buffer
	if err := s.cfg.Metrics.WriteMetrics(&b); err != nil {
		return internalError(err)
	}
	h := w.Header()
	h.Set("Content-Type", metricsContentType)
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
	return nil
}
