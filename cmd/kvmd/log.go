package main

import (
	"io"
	"log/slog"

	"github.com/coreos/go-systemd/v22/journal"

	"kvmd/internal/slogjournal"
)

// newLogger logs to the journal, with each attribute also as a KVMD_*
// field, when stderr is connected to it (running under systemd), and as
// text to stderr otherwise.
func newLogger(stderr io.Writer) *slog.Logger {
	text := slog.NewTextHandler(stderr, nil)
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return slog.New(slogjournal.New(slogjournal.Send("KVMD_"), text))
	}
	return slog.New(text)
}
