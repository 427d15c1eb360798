// Package export writes the journal export format, the stream that
// systemd-journal-remote turns into real journal files: fields as NAME=value
// lines, a value holding a newline or bytes that are not text in the
// binary-safe form (NAME, newline, 64-bit little-endian length, the bytes,
// newline), and an empty line after each entry.
package export

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// Field is one field of an entry.
type Field struct {
	Name  string
	Value []byte
}

// F makes a text field.
func F(name, value string) Field { return Field{Name: name, Value: []byte(value)} }

// Timestamps makes the two timestamp fields every entry needs: wall-clock
// time and time since the boot began.
func Timestamps(at, bootStart time.Time) []Field {
	return []Field{
		F("__REALTIME_TIMESTAMP", fmt.Sprint(at.UnixMicro())),
		F("__MONOTONIC_TIMESTAMP", fmt.Sprint(max(at.Sub(bootStart).Microseconds(), 1))),
	}
}

// validName reports whether name is a journal field name: upper-case
// letters, digits and underscores, not starting with a digit.
func validName(name string) bool {
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Write writes one entry.
func Write(w io.Writer, fields []Field) error {
	var b bytes.Buffer
	for _, f := range fields {
		if !validName(f.Name) {
			return fmt.Errorf("export: bad field name %q", f.Name)
		}
		b.WriteString(f.Name)
		if bytes.IndexByte(f.Value, '\n') < 0 && utf8.Valid(f.Value) {
			b.WriteByte('=')
			b.Write(f.Value)
		} else {
			b.WriteByte('\n')
			binary.Write(&b, binary.LittleEndian, uint64(len(f.Value)))
			b.Write(f.Value)
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}
