package daemon

import (
	"io"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/journal"

	"kvmd/internal/logbuf"
	"kvmd/internal/slogjournal"
	"kvmd/internal/slogtext"
)

// Text log lines wait at most logDelay in a buffer of logBuffer bytes,
// so that a busy server does not pay one write per request line.
const (
	logBuffer = 32 << 10
	logDelay  = 100 * time.Millisecond
)

// newLogger logs to the journal, with each attribute also as a KVMD_*
// field, when stderr is connected to it (running under systemd), and as
// text to stderr otherwise, batched by logbuf. flush writes out what is
// buffered; call it before exiting. The text is slog.TextHandler's, written
// by slogtext at less cost (a line per request).
func newLogger(stderr io.Writer) (log *slog.Logger, flush func()) {
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return slog.New(slogjournal.New(slogjournal.Send("KVMD_"), slogtext.New(stderr))), func() {}
	}
	b := logbuf.New(stderr, logBuffer, logDelay)
	return slog.New(logbuf.Handler(slogtext.New(b), b)), func() { b.Flush() }
}
