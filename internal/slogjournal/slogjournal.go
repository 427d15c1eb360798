// Package slogjournal is a log/slog handler for the systemd journal. Each
// record becomes one entry whose MESSAGE is the sentence a person reads in
// journalctl (the record's message, then every attribute as key=value) and
// whose fields repeat each attribute for filtering (journalctl
// KVMD_USER=admin).
//
// No maintained handler writes that MESSAGE: github.com/systemd/slog-journal
// and the others send the bare message and drop or rename the attributes,
// which /api/log, showing MESSAGE alone, would then lose.
package slogjournal

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// An Entry is one record, its attributes flattened: a group's attributes
// have keys qualified by the group's name and a dot ("req.user"), in the
// order they were added.
type Entry struct {
	// Time is the record's time (zero if it has none). journald stamps
	// entries itself, so Send leaves it out.
	Time  time.Time
	Level slog.Level
	Msg   string
	Attrs []Attr
}

// An Attr is an attribute with its group-qualified key and resolved value.
type Attr struct{ Key, Value string }

// Message is the entry as a sentence: Msg, then " key=value" for each
// attribute, a value quoted (Go syntax) when it is empty or holds blanks,
// quotes or '='.
func (e Entry) Message() string {
	var b strings.Builder
	b.WriteString(e.Msg)
	for _, a := range e.Attrs {
		fmt.Fprintf(&b, " %s=%s", a.Key, quote(a.Value))
	}
	return b.String()
}

// Fields returns the attributes as journal fields: prefix and the key in
// upper case, any character but letters and digits turned into '_'
// ("req.user" with prefix "KVMD_": KVMD_REQ_USER).
func (e Entry) Fields(prefix string) map[string]string {
	vars := make(map[string]string, len(e.Attrs))
	for _, a := range e.Attrs {
		vars[prefix+fieldName(a.Key)] = a.Value
	}
	return vars
}

// Priority is the journal priority of the entry's level.
func (e Entry) Priority() journal.Priority {
	switch {
	case e.Level >= slog.LevelError:
		return journal.PriErr
	case e.Level >= slog.LevelWarn:
		return journal.PriWarning
	case e.Level >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// Send returns a function sending entries to journald, their fields
// named with prefix.
func Send(prefix string) func(Entry) error {
	return func(e Entry) error { return journal.Send(e.Message(), e.Priority(), e.Fields(prefix)) }
}

// Handler hands every record to send as an Entry. Without Tee, fallback
// takes only the records send refused (journald gone); with Tee, every
// record goes to fallback too.
type Handler struct {
	send     func(Entry) error
	fallback slog.Handler
	tee      bool
	attrs    []Attr // from WithAttrs, keys qualified by the groups open then
	prefix   string // the open groups: "" or "g1.g2."
}

// New returns a Handler sending to send, falling back to fallback.
func New(send func(Entry) error, fallback slog.Handler) *Handler {
	return &Handler{send: send, fallback: fallback}
}

// NewTee returns a Handler that passes every record to both send and
// next.
func NewTee(send func(Entry) error, next slog.Handler) *Handler {
	return &Handler{send: send, fallback: next, tee: true}
}

// Enabled reports Info and above, and what fallback enables.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.fallback.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	e := Entry{Time: r.Time, Level: r.Level, Msg: r.Message, Attrs: h.attrs}
	if r.NumAttrs() > 0 {
		e.Attrs = append([]Attr(nil), h.attrs...)
		r.Attrs(func(a slog.Attr) bool {
			e.Attrs = flatten(e.Attrs, h.prefix, a)
			return true
		})
	}
	if err := h.send(e); err != nil || h.tee {
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

// WithAttrs implements slog.Handler: the attributes belong to the groups
// open now, not to any opened later.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]Attr(nil), h.attrs...)
	for _, a := range as {
		c.attrs = flatten(c.attrs, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(as)
	return &c
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

// flatten appends a to out with its key qualified by prefix, resolving its
// value; a group's attributes are appended in turn under the group's name
// (inline when that is empty). Empty attributes and groups add nothing,
// as slog.Handler asks.
func flatten(out []Attr, prefix string, a slog.Attr) []Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return out
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			out = flatten(out, prefix, ga)
		}
		return out
	}
	return append(out, Attr{Key: prefix + a.Key, Value: a.Value.String()})
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
