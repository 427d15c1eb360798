// Package export writes and reads the journal export format (systemd's
// JOURNAL_EXPORT_FORMATS), the stream that systemd-journal-remote turns
// into real journal files and that `journalctl --output=export` prints:
// fields as NAME=value lines, a value holding control characters or bytes
// that are not UTF-8 in the binary-safe form (NAME, newline, 64-bit
// little-endian length, the bytes, newline), and an empty line after each
// entry.
package export

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
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

// validName reports whether name is a journal field name: 1 to 64
// upper-case letters, digits and underscores, not starting with a digit.
func validName[T string | []byte](name T) bool {
	if len(name) == 0 || len(name) > maxName || name[0] >= '0' && name[0] <= '9' {
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
		if text(f.Value) {
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

// text reports whether v can go in the NAME=value form: UTF-8 without
// control characters.
func text(v []byte) bool {
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(v)
}

// remotePaths are where Debian and others install systemd-journal-remote.
var remotePaths = []string{"/usr/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-remote"}

// ErrNoRemote means systemd-journal-remote is not installed.
var ErrNoRemote = errors.New("systemd-journal-remote is not installed (apt install systemd-journal-remote)")

// Remote returns the path of systemd-journal-remote, which writes journal
// files from this format ("--output=FILE -" reads it on stdin).
func Remote() (string, error) {
	for _, p := range remotePaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoRemote
}

var entryObjects = regexp.MustCompile(`(?m)^Entry objects: (\d+)$`)

// EntryCount returns how many entries the journal file at path holds, as
// its header says (journalctl --header): systemd-journal-remote writes
// each entry shortly after it is read, so this is how a writer learns
// that what it sent can be read.
func EntryCount(ctx context.Context, path string) (int, error) {
	out, err := exec.CommandContext(ctx, "journalctl", "--file="+path, "--header", "--no-pager").Output()
	if err != nil {
		return 0, err
	}
	m := entryObjects.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no entry count in the header of %s", path)
	}
	return strconv.Atoi(string(m[1]))
}

// WaitEntries polls the journal file at path every few milliseconds
// until it holds at least n entries, or ctx ends.
func WaitEntries(ctx context.Context, path string, n int) error {
	for {
		got, err := EntryCount(ctx, path)
		if err == nil && got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %d of %d entries written (%v)", path, got, n, err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
