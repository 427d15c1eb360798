// Package slogtext is a log/slog handler that writes, byte for byte, the
// lines slog.TextHandler writes with its default options (level Info and
// above, no source, no ReplaceAttr), at a fraction of its cost: a daemon
// that logs a line per request (kvmd's access log) spends a part of each
// request there.
//
// It formats the records it can (attributes of the kinds string, integer,
// float, bool, duration and time, with keys, outside groups) itself and
// hands any other (an error or another value of kind Any, a group, a
// LogValuer, WithGroup) to a slog.TextHandler on the same writer, so the
// output is always TextHandler's. Its tests compare the two on every kind
// of record, and FuzzSameAsTextHandler on arbitrary strings.
package slogtext

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Handler is the handler. Its methods are safe for concurrent use.
type Handler struct {
	out *lockedWriter
	// pre is the attributes of WithAttrs, formatted (" k=v" each).
	pre []byte
	// slow is a slog.TextHandler with the same attributes and groups,
	// for the records this one does not format; all is set when every
	// record goes there (after WithGroup, or WithAttrs of a kind this
	// handler does not format).
	slow slog.Handler
	all  bool
}

// lockedWriter serializes the lines of a Handler and of its
// TextHandler, and of their clones: each line is one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
	// stamp is the last record time's second as written: the records of
	// one second differ in their milliseconds only.
	stamp atomic.Pointer[stamp]
}

// stamp is a second of record times as appendTime writes it.
type stamp struct {
	sec  int64
	loc  *time.Location
	head []byte // "2006-01-02T15:04:05."
	zone []byte // "Z", "+01:00"
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// New returns a Handler writing to w what slog.NewTextHandler(w, nil)
// would.
func New(w io.Writer) *Handler {
	out := &lockedWriter{w: w}
	return &Handler{out: out, slow: slog.NewTextHandler(out, nil)}
}

// Enabled reports whether level is Info or above, as TextHandler's
// default.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}

// WithAttrs returns a Handler that adds as to every record.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := &Handler{out: h.out, slow: h.slow.WithAttrs(as), all: h.all}
	if h.all {
		return h2
	}
	pre := append([]byte(nil), h.pre...)
	for _, a := range as {
		var ok bool
		if pre, ok = appendAttr(pre, a); !ok {
			h2.all = true
			return h2
		}
	}
	h2.pre = pre
	return h2
}

// WithGroup returns a Handler whose records' attributes are in group
// name: TextHandler's from then on.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{out: h.out, slow: h.slow.WithGroup(name), all: true}
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Handle writes r as one line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if h.all {
		return h.slow.Handle(ctx, r)
	}
	bp := bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 {
			bufs.Put(bp)
		}
	}()
	b := h.appendHead((*bp)[:0], r.Time, r.Level, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendAttr(b, a)
		return ok
	})
	if !ok {
		*bp = b
		return h.slow.Handle(ctx, r)
	}
	b = append(b, '\n')
	*bp = b
	_, err := h.out.Write(b)
	return err
}

// TextHandler is a handler that takes a line's attributes as text:
// Handler, and handlers that wrap one (logbuf's).
type TextHandler interface {
	HandleText(t time.Time, level slog.Level, msg string, attrs []byte) (bool, error)
}

// HandleText writes a record of level and msg at t whose attributes,
// after the handler's own (WithAttrs), are attrs: " key=value" each, the
// keys and values already as TextHandler writes them (AppendString). It
// is Handle without a slog.Record and without a look at each attribute's
// kind, for a caller that writes the same keys on every line (the access
// log, a line a request). It reports false, writing nothing, when this
// handler leaves its records to TextHandler (after WithGroup): the caller
// then makes a Record.
func (h *Handler) HandleText(t time.Time, level slog.Level, msg string, attrs []byte) (bool, error) {
	if h.all {
		return false, nil
	}
	bp := bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 {
			bufs.Put(bp)
		}
	}()
	b := h.appendHead((*bp)[:0], t, level, msg)
	b = append(append(b, attrs...), '\n')
	*bp = b
	_, err := h.out.Write(b)
	return true, err
}

// appendHead appends what starts every line: the time (unless zero),
// the level, the message and the handler's own attributes.
func (h *Handler) appendHead(b []byte, t time.Time, level slog.Level, msg string) []byte {
	sep := ""
	if !t.IsZero() {
		b = append(b, "time="...)
		b = h.out.appendTime(b, t.Round(0))
		sep = " "
	}
	b = append(b, sep...)
	b = append(b, "level="...)
	b = appendString(b, level.String())
	b = append(b, " msg="...)
	b = appendString(b, msg)
	return append(b, h.pre...)
}

// AppendString appends s as a string value (or key) of a line: quoted,
// in Go's syntax, when TextHandler would quote it.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// appendAttr appends " key=value", or reports false for an attribute
// this handler leaves to TextHandler.
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" {
		// TextHandler drops an empty attribute and quotes an empty
		// key: not worth repeating here.
		return b, false
	}
	v := a.Value
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
	default:
		return b, false
	}
	b = append(b, ' ')
	b = appendString(b, a.Key)
	b = append(b, '=')
	switch v.Kind() {
	case slog.KindString:
		b = appendString(b, v.String())
	case slog.KindInt64:
		b = strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		b = strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		b = strconv.AppendFloat(b, v.Float64(), 'g', -1, 64)
	case slog.KindBool:
		b = strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		b = append(b, v.Duration().String()...)
	case slog.KindTime:
		b = appendTime(b, v.Time())
	}
	return b, true
}

// appendString appends s, quoted (Go syntax) when TextHandler quotes it:
// when it is empty, or holds a blank, '=', '"', a control character, or
// a rune that is not valid UTF-8, a space or unprintable.
func appendString(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		switch quoteTable[s[i]] {
		case quoteNo:
			continue
		case quoteYes:
			return true
		}
		// Not ASCII: decide by the runes from here on.
		for _, r := range s[i:] {
			if r < utf8.RuneSelf {
				if quoteTable[r] == quoteYes {
					return true
				}
				continue
			}
			if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
				return true
			}
		}
		return false
	}
	return false
}

// quoteTable says, for each byte, whether TextHandler quotes a string
// holding it: the ASCII control characters, the blank, '=' and '"' make
// it quote; a byte beyond ASCII starts a rune to look at.
var quoteTable = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = quoteRune
		case c <= ' ' || c == '=' || c == '"':
			t[c] = quoteYes
		}
	}
	return t
}()

const (
	quoteNo = iota
	quoteYes
	quoteRune
)

// appendTime is appendTime with the second's text kept from the last
// record when it is the same second in the same location.
func (l *lockedWriter) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	if st := l.stamp.Load(); st != nil && st.sec == sec && st.loc == loc {
		ms := t.Nanosecond() / int(time.Millisecond)
		b = append(b, st.head...)
		b = append(b, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
		return append(b, st.zone...)
	}
	n := len(b)
	b = appendTime(b, t)
	if y := t.Year(); y >= 0 && y <= 9999 { // four digits: the head is 20 bytes
		const head, frac = len("2006-01-02T15:04:05."), len("000")
		l.stamp.Store(&stamp{sec: sec, loc: loc, head: bytes.Clone(b[n : n+head]), zone: bytes.Clone(b[n+head+frac:])})
	}
	return b
}

// appendTime appends t as TextHandler does: RFC 3339 with the seconds'
// fraction cut (not rounded) to exactly three digits, in t's location.
// RFC3339Nano drops trailing zeros, so a tenth of a millisecond is added
// first and the fourth digit of the fraction taken out after.
func appendTime(b []byte, t time.Time) []byte {
	const fracEnd = len("2006-01-02T15:04:05.000")
	n := len(b)
	b = t.Truncate(time.Millisecond).Add(time.Millisecond/10).AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+fracEnd], b[n+fracEnd+1:]...)
}
