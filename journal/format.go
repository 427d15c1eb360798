package journal

import (
	"bytes"
	"io"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// lineWriter is what writeLine writes to: a *bufio.Writer in a stream, a
// *bytes.Buffer in tests. AvailableBuffer spares an allocation per line.
type lineWriter interface {
	io.Writer
	io.StringWriter
	io.ByteWriter
	AvailableBuffer() []byte
}

// writeLine writes e as kvmd does:
//
//	[2024-05-01 12:00:00 kvmd.service] --- message\r\n
//
// with the time in loc and the message's trailing white space removed. A
// multi-line message keeps its inner newlines. Bytes that are not valid
// UTF-8, and control characters other than tab and newline, are written as
// \xNN escapes so that the text is valid UTF-8 and safe on a terminal. A
// message cut at maxMessage ends with a marker giving its full size.
func writeLine(w lineWriter, e *entry, loc *time.Location) error {
	b := append(w.AvailableBuffer(), '[')
	b = append(b, e.stamp(loc)...)
	b = append(b, ' ')
	w.Write(b)
	writeSafe(w, e.unit.b)
	w.WriteString("] --- ")

	msg := e.message.b
	dropped := e.message.dropped
	if dropped > 0 {
		// Do not leave half a character at the cut.
		cut := lastRuneStart(msg)
		if !utf8.FullRune(msg[cut:]) {
			dropped += int64(len(msg) - cut)
			msg = msg[:cut]
		}
	}
	writeSafe(w, bytes.TrimRightFunc(msg, unicode.IsSpace))
	if dropped > 0 {
		w.WriteString(" [message truncated: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(msg))+dropped, 10))
		w.WriteString(" bytes]")
	}
	_, err := w.WriteString("\r\n")
	return err
}

// stamp returns e's time in loc as the line shows it. Entries come many
// to a second: the last second's text is kept, and made again only when
// the second (or the zone) changes.
func (e *entry) stamp(loc *time.Location) []byte {
	sec := e.usec / 1e6 // the timestamp is not negative
	if loc != e.stampLoc || sec != e.stampSec || len(e.stampText) == 0 {
		e.stampText = time.Unix(sec, 0).In(loc).AppendFormat(e.stampText[:0], "2006-01-02 15:04:05")
		e.stampLoc, e.stampSec = loc, sec
	}
	return e.stampText
}

// lastRuneStart returns the index where the last (possibly partial) UTF-8
// sequence of b starts.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b)
}

// plain are the bytes writeSafe copies as they are without a look at
// the bytes after: printable ASCII, tab and newline.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'], t['\n'] = true, true
	return t
}()

// writeSafe writes b, escaping what writeLine says it escapes.
func writeSafe(w lineWriter, b []byte) {
	const hex = "0123456789abcdef"
	esc := func(p []byte) {
		for _, c := range p {
			w.WriteByte('\\')
			w.WriteByte('x')
			w.WriteByte(hex[c>>4])
			w.WriteByte(hex[c&15])
		}
	}
	start := 0
	for i := 0; i < len(b); {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			w.Write(b[start:i])
			esc(b[i : i+1])
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size == 1) || (r >= 0x80 && r <= 0x9f) {
			w.Write(b[start:i])
			esc(b[i : i+size])
			i += size
			start = i
			continue
		}
		i += size
	}
	w.Write(b[start:])
}
