package journal

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"kvmd/journal/export"
)

// Entries captured from journalctl 252 (Debian 12) with the command line
// Open runs (--output=export --output-fields=_SYSTEMD_UNIT,MESSAGE, with
// --directory), on entries written by systemd-journal-remote 252: the
// cases the JSON output used to be tested with.
var captured = []struct {
	name, export string
	usec         int64
	unit         string // "-": no _SYSTEMD_UNIT
	message      string // "-": no MESSAGE
}{
	{"plain",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=1;b=6b766d64746573740000000000000001;m=3e8;t=6176339d93000;x=2ab8c21e283041ce\n__REALTIME_TIMESTAMP=1714564800000000\n__MONOTONIC_TIMESTAMP=1000\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\nMESSAGE=INFO --- Started HTTP server  \n\n",
		1714564800000000, "kvmd.service", "INFO --- Started HTTP server  "},
	{"multi-line",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=2;b=6b766d64746573740000000000000001;m=3e9;t=6176339e87241;x=277c29e581e1a193\n__REALTIME_TIMESTAMP=1714564801000001\n__MONOTONIC_TIMESTAMP=1001\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd-otg.service\nMESSAGE\n\x1d\x00\x00\x00\x00\x00\x00\x00Traceback:\n  line 1\n  line 2\n\n\n",
		1714564801000001, "kvmd-otg.service", "Traceback:\n  line 1\n  line 2\n"},
	{"utf-8 and tab",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=3;b=6b766d64746573740000000000000001;m=3ea;t=6176339f7b482;x=7b7eb3212f7988df\n__REALTIME_TIMESTAMP=1714564802000002\n__MONOTONIC_TIMESTAMP=1002\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\nMESSAGE=Привет, ✓ 🎉 \"quoted\" \\ back\tslash\n\n",
		1714564802000002, "kvmd.service", "Привет, ✓ 🎉 \"quoted\" \\ back\tslash"},
	{"binary",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=4;b=6b766d64746573740000000000000001;m=3eb;t=617633a06f6c3;x=8798fe80c89ae95d\n__REALTIME_TIMESTAMP=1714564803000003\n__MONOTONIC_TIMESTAMP=1003\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\nMESSAGE\n\x0c\x00\x00\x00\x00\x00\x00\x00bin \xff\xfe ok \xe2\x82\n\n",
		1714564803000003, "kvmd.service", "bin \xff\xfe ok \xe2\x82"},
	{"control characters",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=5;b=6b766d64746573740000000000000001;m=3ec;t=617633a163904;x=89ded511c022fbcd\n__REALTIME_TIMESTAMP=1714564804000004\n__MONOTONIC_TIMESTAMP=1004\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\nMESSAGE\n\x0c\x00\x00\x00\x00\x00\x00\x00\x1b[31mred\x1b[0m\n\n",
		1714564804000004, "kvmd.service", "\x1b[31mred\x1b[0m"},
	{"no message",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=6;b=6b766d64746573740000000000000001;m=3ed;t=617633a257b45;x=ccf2f8c19c39c9fd\n__REALTIME_TIMESTAMP=1714564805000005\n__MONOTONIC_TIMESTAMP=1005\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\n\n",
		1714564805000005, "kvmd.service", "-"},
	{"two values",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=7;b=6b766d64746573740000000000000001;m=3ee;t=617633a34bd86;x=8f059a99687f3f37\n__REALTIME_TIMESTAMP=1714564806000006\n__MONOTONIC_TIMESTAMP=1006\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=kvmd.service\nMESSAGE=first\nMESSAGE\n\x07\x00\x00\x00\x00\x00\x00\x00second\n\n\n",
		1714564806000006, "kvmd.service", "first"},
	{"pid 1",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=8;b=6b766d64746573740000000000000001;m=3ef;t=617633a43ffc7;x=386dfdb51e35890d\n__REALTIME_TIMESTAMP=1714564807000007\n__MONOTONIC_TIMESTAMP=1007\n_BOOT_ID=6b766d64746573740000000000000001\n_SYSTEMD_UNIT=init.scope\nMESSAGE=Started kvmd.service - PiKVM daemon.\n\n",
		1714564807000007, "init.scope", "Started kvmd.service - PiKVM daemon."},
	{"no unit",
		"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=9;b=6b766d64746573740000000000000001;m=3f0;t=617633a534208;x=5fc00151ae90ddac\n__REALTIME_TIMESTAMP=1714564808000008\n__MONOTONIC_TIMESTAMP=1008\n_BOOT_ID=6b766d64746573740000000000000001\nMESSAGE=no unit\n\n",
		1714564808000008, "-", "no unit"},
}

func show(f field) string {
	if !f.set {
		return "-"
	}
	return string(f.b)
}

func TestReadEntryCaptured(t *testing.T) {
	check := func(t *testing.T, rd *export.Reader, i int) {
		t.Helper()
		tc := captured[i]
		var e entry
		if err := readEntry(rd, &e); err != nil {
			t.Fatalf("%s: readEntry: %v", tc.name, err)
		}
		if e.usec != tc.usec || show(e.unit) != tc.unit || show(e.message) != tc.message {
			t.Errorf("%s: got (%d, %q, %q), want (%d, %q, %q)", tc.name, e.usec, show(e.unit), show(e.message), tc.usec, tc.unit, tc.message)
		}
	}
	for i, tc := range captured {
		t.Run(tc.name, func(t *testing.T) {
			rd := export.NewReader(strings.NewReader(tc.export))
			check(t, rd, i)
			if err := readEntry(rd, &entry{}); err != io.EOF {
				t.Errorf("after the entry: %v, want io.EOF", err)
			}
		})
	}
	// The whole output, one byte per read: one entry struct reused.
	var all strings.Builder
	for _, tc := range captured {
		all.WriteString(tc.export)
	}
	rd := export.NewReader(iotest.OneByteReader(strings.NewReader(all.String())))
	for i := range captured {
		check(t, rd, i)
	}
	if err := readEntry(rd, &entry{}); err != io.EOF {
		t.Errorf("at the end: %v, want io.EOF", err)
	}
}

func TestReadEntry(t *testing.T) {
	const ts = "__REALTIME_TIMESTAMP=1\n"
	for _, tc := range []struct {
		name, in      string
		unit, message string // "-": unset
		err           error
	}{
		{"minimal", ts + "\n", "-", "-", nil},
		{"first timestamp wins", ts + "__REALTIME_TIMESTAMP=x\nMESSAGE=m\n\n", "-", "m", nil},
		{"first unit wins", ts + "_SYSTEMD_UNIT=a\n_SYSTEMD_UNIT=b\n\n", "a", "-", nil},
		{"empty message", ts + "MESSAGE=\n\n", "-", "", nil},
		{"empty binary message", ts + "MESSAGE\n\x00\x00\x00\x00\x00\x00\x00\x00\n\n", "-", "", nil},
		{"other fields skipped", "A\n\x03\x00\x00\x00\x00\x00\x00\x00a\nb\nMESSAGE2=no\n" + ts + "MESSAGE=m\n\n", "-", "m", nil},

		{"no timestamp", "MESSAGE=a\n\n", "", "", errNoTime},
		{"empty entry", "\n", "", "", errNoTime},
		{"signed timestamp", "__REALTIME_TIMESTAMP=-1\n\n", "", "", errNoTime},
		{"huge timestamp", "__REALTIME_TIMESTAMP=99999999999999999999\n\n", "", "", errNoTime},
		{"empty input", "", "", "", io.EOF},
		{"cut inside an entry", ts + "MESSAGE=abc", "", "", io.ErrUnexpectedEOF},
		{"no end of entry", ts, "", "", io.ErrUnexpectedEOF},
		{"bad name", ts + "message=a\n\n", "", "", export.ErrSyntax},
		{"no newline after a binary value", ts + "MESSAGE\n\x01\x00\x00\x00\x00\x00\x00\x00ab\n\n", "", "", export.ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e entry
			err := readEntry(export.NewReader(strings.NewReader(tc.in)), &e)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v (%q, %q), want %v", err, show(e.unit), show(e.message), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("readEntry: %v", err)
			}
			if show(e.unit) != tc.unit || show(e.message) != tc.message {
				t.Errorf("got (%q, %q), want (%q, %q)", show(e.unit), show(e.message), tc.unit, tc.message)
			}
		})
	}
}

// TestSkipNoTime: an entry without a timestamp costs only that entry.
func TestSkipNoTime(t *testing.T) {
	rd := export.NewReader(strings.NewReader("MESSAGE=one\n\n__REALTIME_TIMESTAMP=2\nMESSAGE=two\n\n"))
	var e entry
	if err := readEntry(rd, &e); err != errNoTime {
		t.Fatalf("first entry: %v, want errNoTime", err)
	}
	if err := readEntry(rd, &e); err != nil || e.usec != 2 || show(e.message) != "two" {
		t.Errorf("second entry: %v (%d, %q)", err, e.usec, show(e.message))
	}
}

func TestMessageCap(t *testing.T) {
	msg := "a" + strings.Repeat("é", maxMessage/2) // the cap falls inside the last é
	for _, form := range []string{"text", "binary"} {
		t.Run(form, func(t *testing.T) {
			m := msg
			if form == "binary" {
				m += "\n" // a newline makes the writer use the binary form
			}
			var in bytes.Buffer
			export.Write(&in, []export.Field{export.F("__REALTIME_TIMESTAMP", "1714564800000000"),
				export.F("_SYSTEMD_UNIT", "kvmd.service"), export.F("MESSAGE", m), export.F("MESSAGE2", "after")})
			if strings.Contains(in.String(), "MESSAGE=") != (form == "text") {
				t.Fatalf("not written in the %s form", form)
			}
			var e entry
			if err := readEntry(export.NewReader(&in), &e); err != nil {
				t.Fatal(err)
			}
			if len(e.message.b) != maxMessage || e.message.dropped != int64(len(m)-maxMessage) {
				t.Fatalf("kept %d dropped %d", len(e.message.b), e.message.dropped)
			}
			var b bytes.Buffer
			writeLine(&b, &e, time.UTC)
			want := "[2024-05-01 12:00:00 kvmd.service] --- a" + strings.Repeat("é", maxMessage/2-1) +
				" [message truncated: " + map[string]string{"text": "1048577", "binary": "1048578"}[form] + " bytes]\r\n"
			if b.String() != want {
				t.Errorf("line ends %q, want it to end %q", tail(b.String()), tail(want))
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-60):] }

func TestWriteLine(t *testing.T) {
	loc := time.FixedZone("X", 5*3600+30*60)
	for _, tc := range []struct {
		name, unit, message, want string
	}{
		{"plain", "kvmd.service", "hello", "[2024-05-01 17:30:00 kvmd.service] --- hello\r\n"},
		{"trailing space", "kvmd.service", "hello \t\n\r\u00a0 ", "[2024-05-01 17:30:00 kvmd.service] --- hello\r\n"},
		{"leading space kept", "kvmd.service", "  hi", "[2024-05-01 17:30:00 kvmd.service] ---   hi\r\n"},
		{"multi-line", "kvmd.service", "a\n  b\t\nc\n", "[2024-05-01 17:30:00 kvmd.service] --- a\n  b\t\nc\r\n"},
		{"utf-8", "kvmd.service", "Привет ✓ 🎉", "[2024-05-01 17:30:00 kvmd.service] --- Привет ✓ 🎉\r\n"},
		{"invalid utf-8", "kvmd.service", "bin \xff\xfe ok \xe2\x82", `[2024-05-01 17:30:00 kvmd.service] --- bin \xff\xfe ok \xe2\x82` + "\r\n"},
		{"control characters", "kvmd.service", "\x1b[31mred\x7f\u0085\r\x00", `[2024-05-01 17:30:00 kvmd.service] --- \x1b[31mred\x7f\xc2\x85\x0d\x00` + "\r\n"},
		{"empty", "kvmd.service", "", "[2024-05-01 17:30:00 kvmd.service] --- \r\n"},
		{"odd unit", "a\x01b", "m", `[2024-05-01 17:30:00 a\x01b] --- m` + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := entry{usec: 1714564800000000}
			e.unit.b, e.unit.set = []byte(tc.unit), true
			e.message.b = []byte(tc.message)
			var b bytes.Buffer
			if err := writeLine(&b, &e, loc); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}

// BenchmarkReadEntry reads and formats entries shaped like the ones
// journalctl prints for kvmbench's log rows.
func BenchmarkReadEntry(b *testing.B) {
	var in bytes.Buffer
	const n = 1000
	for i := range n {
		export.Write(&in, []export.Field{
			export.F("__CURSOR", "s=3beb79fa847c488194cd1440cbc2de67;i=7;b=6b766d64746573740000000000000001;m=3ee;t=617633a34bd86;x=8f059a99687f3f37"),
			export.F("__REALTIME_TIMESTAMP", "1714564806000006"), export.F("__MONOTONIC_TIMESTAMP", "1006"),
			export.F("_BOOT_ID", "6b766d64746573740000000000000001"), export.F("_SYSTEMD_UNIT", "kvmd-otg.service"),
			export.F("MESSAGE", "http addr=192.168.1.7 method=GET path=/api/info status=200 bytes=2090 user=admin entry="+strings.Repeat("7", i%7)),
		})
	}
	data := in.Bytes()
	b.SetBytes(int64(len(data) / n))
	b.ReportAllocs()
	var e entry
	bw := bufio.NewWriterSize(io.Discard, writeBuffer)
	rd := export.NewReader(&cycle{data: data})
	b.ResetTimer()
	for range b.N {
		if err := readEntry(rd, &e); err != nil {
			b.Fatal(err)
		}
		writeLine(bw, &e, time.UTC)
	}
}

// cycle reads data over and over.
type cycle struct {
	data []byte
	off  int
}

func (c *cycle) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

// TestStampReused: the kept text of the last second is not shown for
// another second or zone.
func TestStampReused(t *testing.T) {
	var e entry
	e.unit.b, e.unit.set = []byte("u"), true
	zone := time.FixedZone("X", 3600)
	var got []string
	for _, c := range []struct {
		usec int64
		loc  *time.Location
	}{
		{1714564800000000, time.UTC}, {1714564800999999, time.UTC}, {1714564801000000, time.UTC},
		{1714564801000000, zone}, {1714564800000000, zone},
	} {
		e.usec = c.usec
		var b bytes.Buffer
		writeLine(&b, &e, c.loc)
		got = append(got, b.String()[1:20])
	}
	want := "2024-05-01 12:00:00,2024-05-01 12:00:00,2024-05-01 12:00:01,2024-05-01 13:00:01,2024-05-01 13:00:00"
	if strings.Join(got, ",") != want {
		t.Errorf("got %q, want %s", got, want)
	}
}
