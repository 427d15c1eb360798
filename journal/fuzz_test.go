package journal

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"kvmd/journal/export"
)

// FuzzEntryLine checks that whatever journalctl could print, every entry
// readEntry accepts formats as one valid UTF-8 line, and that reading
// stops at an error instead of going round.
func FuzzEntryLine(f *testing.F) {
	for _, tc := range captured {
		f.Add([]byte(tc.export))
	}
	f.Add([]byte("__REALTIME_TIMESTAMP=1\nMESSAGE\n\x03\x00\x00\x00\x00\x00\x00\x00\xe2\x80\x0d\n_SYSTEMD_UNIT=a\x01b\n\n"))
	f.Add([]byte("__REALTIME_TIMESTAMP=1\nMESSAGE=\xc2\x85\xff\x7f\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rd := export.NewReader(bytes.NewReader(in))
		var e entry
		for range len(in) + 1 { // every entry takes at least one byte
			err := readEntry(rd, &e)
			if err == errNoTime {
				continue
			}
			if err != nil {
				return
			}
			var b bytes.Buffer
			if err := writeLine(&b, &e, time.UTC); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !utf8.ValidString(out) || !strings.HasSuffix(out, "\r\n") || strings.Count(out, "\r") != 1 {
				t.Fatalf("bad line %q", out)
			}
		}
		t.Fatalf("more entries than bytes in %q", in)
	})
}
