package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/coreos/go-systemd/v22/journal"
)

// newLogger logs to the journal, with each attribute also as a KVMD_*
// field, when stderr is connected to it (running under systemd), and as
// text to stderr otherwise.
func newLogger(stderr io.Writer) *slog.Logger {
	text := slog.NewTextHandler(stderr, nil)
	if ok, _ := journal.StderrIsJournalStream(); ok {
		return slog.New(&journalHandler{fallback: text, send: func(msg string, p journal.Priority, vars map[string]string) error {
			return journal.Send(msg, p, vars)
		}})
	}
	return slog.New(text)
}

// teeLogger also hands every record, as the sentence journald would get,
// to send (the demo journal), while logging as before.
func teeLogger(log *slog.Logger, send func(msg string)) *slog.Logger {
	return slog.New(&journalHandler{fallback: log.Handler(), tee: true, send: func(msg string, _ journal.Priority, _ map[string]string) error {
		send(msg)
		return nil
	}})
}

// journalHandler sends records to journald. The MESSAGE is the text a
// person reads in `journalctl` and in /api/log; the fields are for
// filtering (journalctl KVMD_USER=admin). With tee it also passes every
// record to fallback; otherwise fallback takes only what send refused.
type journalHandler struct {
	fallback slog.Handler
	tee      bool
	send     func(msg string, p journal.Priority, vars map[string]string) error
	attrs    []slog.Attr
	group    string
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.fallback.Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	var msg strings.Builder
	msg.WriteString(r.Message)
	vars := map[string]string{}
	add := func(a slog.Attr) bool {
		k := h.group + a.Key
		v := a.Value.Resolve().String()
		fmt.Fprintf(&msg, " %s=%s", k, quote(v))
		vars["KVMD_"+fieldName(k)] = v
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if err := h.send(msg.String(), priority(r.Level), vars); err != nil || h.tee {
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	c.fallback = h.fallback.WithAttrs(as)
	return &c
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = h.group + name + "."
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

func priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// fieldName makes a journal field name: upper-case letters, digits and
// underscores.
func fieldName(k string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, k)
}

func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \"=\t\r\n") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
