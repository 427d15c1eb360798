// Package logbuf batches log output into few writes, as nginx's
// "access_log ... buffer= flush=" does: a line waits in memory at most
// a set delay, or until the buffer fills, or until a record at warning
// level or above arrives, which goes out at once with everything before
// it (the order is kept). Nothing is dropped: a writer that finds the
// buffer full waits for the write that empties it.
//
// It is for text written to stderr when that is a file or a pipe. Under
// systemd kvmd sends each record to the journal as its own datagram,
// and this package is not used.
package logbuf

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"kvmd/internal/slogtext"
)

// Writer is an io.Writer safe for concurrent use whose output reaches
// the underlying writer within the delay given to New.
type Writer struct {
	delay time.Duration
	out   io.Writer

	mu    sync.Mutex
	w     *bufio.Writer
	timer *time.Timer // armed while the buffer holds something
}

// New returns a Writer with a buffer of size bytes that writes to w at
// most delay after a byte arrives.
func New(w io.Writer, size int, delay time.Duration) *Writer {
	b := &Writer{delay: delay, out: w, w: bufio.NewWriterSize(w, size)}
	b.timer = time.AfterFunc(time.Hour, func() { b.Flush() })
	b.timer.Stop()
	return b
}

// Write buffers p; a p larger than the buffer is written through.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	empty := b.w.Buffered() == 0
	n, err := b.w.Write(p)
	if err != nil {
		b.forget()
	} else if empty && b.w.Buffered() > 0 {
		b.timer.Reset(b.delay)
	}
	return n, err
}

// Flush writes whatever is buffered.
func (b *Writer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer.Stop()
	err := b.w.Flush()
	if err != nil {
		b.forget()
	}
	return err
}

// forget drops what a failed write left in the buffer: a bufio.Writer
// keeps its first error for ever, and the next line (the disk has room
// again, say) should still get out, as it would without a buffer.
func (b *Writer) forget() {
	b.w.Reset(b.out)
}

// Handler wraps h, whose output goes to b, so that a record at warning
// level or above is flushed as soon as it is written.
func Handler(h slog.Handler, b *Writer) slog.Handler {
	return &handler{Handler: h, b: b}
}

type handler struct {
	slog.Handler
	b *Writer
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.b.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

// HandleText is the wrapped handler's HandleText, when it has one (false
// otherwise), flushing as Handle does.
func (h *handler) HandleText(t time.Time, level slog.Level, msg string, attrs []byte) (bool, error) {
	th, ok := h.Handler.(slogtext.TextHandler)
	if !ok {
		return false, nil
	}
	done, err := th.HandleText(t, level, msg, attrs)
	if done && level >= slog.LevelWarn {
		if ferr := h.b.Flush(); err == nil {
			err = ferr
		}
	}
	return done, err
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{Handler: h.Handler.WithAttrs(as), b: h.b}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{Handler: h.Handler.WithGroup(name), b: h.b}
}
