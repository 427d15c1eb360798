// Package benchmd edits BENCHMARKS.md's measured sections. The file is
// written by make bench (tools/cmd/kvmbench), which measures most of it,
// and by tests that measure what make bench cannot (the booted system, the
// revocation of open streams). Each of those writes its own section between
// two marker lines, <!-- NAME:begin --> and <!-- NAME:end -->, and make
// bench keeps every such section when it rewrites the rest.
package benchmd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"kvmd/internal/atomicfile"
)

// Begin and End are the marker lines of the section name.
func Begin(name string) string { return "<!-- " + name + ":begin -->" }
func End(name string) string   { return "<!-- " + name + ":end -->" }

// WriteSection puts section (markers included) in place of the file's
// section name, or at its end when it has none, and writes the file
// atomically. A file with one marker of the pair and not the other is an
// error: something edited it by hand.
func WriteSection(path, name, section string) error {
	return atomicfile.Update(path, 0o644, func(old []byte) ([]byte, error) {
		begin, end := []byte(Begin(name)), []byte(End(name))
		i, j := bytes.Index(old, begin), bytes.Index(old, end)
		sec := bytes.TrimSuffix([]byte(section), []byte("\n"))
		var out []byte
		switch {
		case i >= 0 && j > i:
			out = append(append(append(out, old[:i]...), sec...), old[j+len(end):]...)
		case i >= 0 || j >= 0:
			return nil, fmt.Errorf("%s has one of %s and %s without the other", path, begin, end)
		default:
			if len(old) > 0 {
				out = append(bytes.TrimRight(old, "\n"), "\n\n"...)
			}
			out = append(out, sec...)
		}
		if !bytes.HasSuffix(out, []byte("\n")) {
			out = append(out, '\n')
		}
		return out, nil
	})
}

var beginLine = regexp.MustCompile(`<!-- ([a-z0-9-]+):begin -->`)

// Kept returns the marked sections of the file at path, in the file's
// order, each with its markers and separated by a blank line; nil when the
// file does not exist or has none. A begin marker without its end after it
// is skipped.
func Kept(path string) ([]byte, error) {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []byte
	for rest := old; ; {
		m := beginLine.FindSubmatchIndex(rest)
		if m == nil {
			return out, nil
		}
		end := []byte(End(string(rest[m[2]:m[3]])))
		j := bytes.Index(rest[m[1]:], end)
		if j < 0 {
			rest = rest[m[1]:]
			continue
		}
		j += m[1] + len(end)
		if out != nil {
			out = append(out, "\n\n"...)
		}
		out = append(out, rest[m[0]:j]...)
		rest = rest[j:]
	}
}
