package export

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every entry of in, values whole, until the first error.
func readAll(rd *Reader) ([][]Field, error) {
	var entries [][]Field
	var cur []Field
	for {
		name, err := rd.Next()
		if err != nil {
			if err == io.EOF && cur != nil {
				err = errors.New("io.EOF inside an entry")
			}
			return entries, err
		}
		if name == nil {
			if cur == nil {
				cur = []Field{}
			}
			entries, cur = append(entries, cur), nil
			continue
		}
		f := Field{Name: string(name)}
		var n int64
		if f.Value, n, err = rd.Value([]byte{}, math.MaxInt); err != nil {
			return entries, err
		}
		if n != int64(len(f.Value)) {
			return entries, fmt.Errorf("%s: size %d for %d bytes", f.Name, n, len(f.Value))
		}
		cur = append(cur, f)
	}
}

func show(entries [][]Field) string {
	var b strings.Builder
	for _, e := range entries {
		for _, f := range e {
			fmt.Fprintf(&b, "%s=%q ", f.Name, f.Value)
		}
		b.WriteString("|")
	}
	return b.String()
}

// captured is `journalctl --output=export` of systemd 252 (Debian 12):
// an entry written with two MESSAGE values by systemd-journal-remote, the
// second in the binary form, and one with a tab (printed as text).
const captured = "__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=7;b=6b766d64746573740000000000000001;m=3ee;t=617633a34bd86;x=8f059a99687f3f37\n" +
	"__REALTIME_TIMESTAMP=1714564806000006\n__MONOTONIC_TIMESTAMP=1006\n_BOOT_ID=6b766d64746573740000000000000001\n" +
	"_SYSTEMD_UNIT=kvmd.service\nMESSAGE=first\nMESSAGE\n\x07\x00\x00\x00\x00\x00\x00\x00second\n\n\n" +
	"__CURSOR=s=3beb79fa847c488194cd1440cbc2de67;i=3;b=6b766d64746573740000000000000001;m=3ea;t=6176339f7b482;x=7b7eb3212f7988df\n" +
	"__REALTIME_TIMESTAMP=1714564802000002\n__MONOTONIC_TIMESTAMP=1002\n_BOOT_ID=6b766d64746573740000000000000001\n" +
	"_SYSTEMD_UNIT=kvmd.service\nMESSAGE=Привет, ✓ 🎉 \"quoted\" \\ back\tslash\n\n"

func TestReaderCaptured(t *testing.T) {
	want := `__CURSOR="s=3beb79fa847c488194cd1440cbc2de67;i=7;b=6b766d64746573740000000000000001;m=3ee;t=617633a34bd86;x=8f059a99687f3f37" ` +
		`__REALTIME_TIMESTAMP="1714564806000006" __MONOTONIC_TIMESTAMP="1006" _BOOT_ID="6b766d64746573740000000000000001" ` +
		`_SYSTEMD_UNIT="kvmd.service" MESSAGE="first" MESSAGE="second\n" |` +
		`__CURSOR="s=3beb79fa847c488194cd1440cbc2de67;i=3;b=6b766d64746573740000000000000001;m=3ea;t=6176339f7b482;x=7b7eb3212f7988df" ` +
		`__REALTIME_TIMESTAMP="1714564802000002" __MONOTONIC_TIMESTAMP="1002" _BOOT_ID="6b766d64746573740000000000000001" ` +
		`_SYSTEMD_UNIT="kvmd.service" MESSAGE="Привет, ✓ 🎉 \"quoted\" \\ back\tslash" |`
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(captured),
		"byte a read": iotest.OneByteReader(strings.NewReader(captured)),
	} {
		got, err := readAll(NewReader(r))
		if err != io.EOF || show(got) != want {
			t.Errorf("%s: %v\n got %s\nwant %s", name, err, show(got), want)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	bin := func(name string, size uint64, rest string) string {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], size)
		return name + "\n" + string(n[:]) + rest
	}
	for _, tc := range []struct {
		name, in string
		entries  string // what is read before the error
		err      error
	}{
		{"empty", "", "", io.EOF},
		{"empty entries", "\n\nA=1\n\n", `||A="1" |`, io.EOF},
		{"no empty line at the end", "A=1\n", "", io.ErrUnexpectedEOF},
		{"cut in a text value", "A=1\n\nB=abc", `A="1" |`, io.ErrUnexpectedEOF},
		{"cut in a name", "A=1\n\nB", `A="1" |`, io.ErrUnexpectedEOF},
		{"cut in a length", "A\n\x01\x00\x00", "", io.ErrUnexpectedEOF},
		{"cut in a binary value", bin("A", 5, "ab"), "", io.ErrUnexpectedEOF},
		{"cut before the newline of a binary value", bin("A", 2, "ab"), "", io.ErrUnexpectedEOF},
		{"binary value with newlines", bin("A", 5, "a\n\nb\n\n\n"), `A="a\n\nb\n" |`, io.EOF},
		{"lower-case name", "a=1\n\n", "", ErrSyntax},
		{"name starting with a digit", "1A=1\n\n", "", ErrSyntax},
		{"empty name", "=1\n\n", "", ErrSyntax},
		{"name of 65 bytes", strings.Repeat("A", 65) + "=1\n\n", "", ErrSyntax},
		{"binary name of 65 bytes", bin(strings.Repeat("A", 65), 1, "a\n\n"), "", ErrSyntax},
		{"no newline after a binary value", bin("A", 1, "ab\n\n"), "", ErrSyntax},
		{"length past int64", bin("A", math.MaxUint64, "a\n\n"), "", ErrSyntax},
		{"text line with no name", "hello world\n\n", "", ErrSyntax},
		{"long line with no name", strings.Repeat("x", 100<<10) + "\n\n", "", ErrSyntax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := NewReader(strings.NewReader(tc.in))
			got, err := readAll(rd)
			if !errors.Is(err, tc.err) || show(got) != tc.entries {
				t.Errorf("read %s then %v, want %s then %v", show(got), err, tc.entries, tc.err)
			}
			if _, again := rd.Next(); again != err {
				t.Errorf("Next after %v: %v", err, again)
			}
		})
	}
}

// TestReaderValue: values are capped, not held; what is not read is
// skipped, in both forms, longer than the buffer or not.
func TestReaderValue(t *testing.T) {
	big := strings.Repeat("0123456789", 20<<10) // 200 KiB, over the 64 KiB buffer
	var in bytes.Buffer
	Write(&in, []Field{F("A", big), F("SKIPPED", big), F("B", big+"\n"), F("SKIPPED", big+"\n"), F("C", "c"), F("D", "")})
	if !bytes.Contains(in.Bytes(), []byte("A="+big)) || !bytes.Contains(in.Bytes(), []byte("B\n")) {
		t.Fatal("not written in the expected forms")
	}
	rd := NewReader(&in)
	for _, want := range []struct {
		name  string
		max   int // -1: not read
		value string
		size  int64
	}{
		{"A", 10, big[:10], int64(len(big))},
		{"SKIPPED", -1, "", 0},
		{"B", 70 << 10, big[:70<<10], int64(len(big)) + 1},
		{"SKIPPED", -1, "", 0},
		{"C", math.MaxInt, "c", 1},
		{"D", 5, "", 0},
	} {
		name, err := rd.Next()
		if err != nil || string(name) != want.name {
			t.Fatalf("Next: %q %v, want %s", name, err, want.name)
		}
		if want.max < 0 {
			continue
		}
		v, n, err := rd.Value([]byte("x"), want.max)
		if err != nil || n != want.size || string(v) != "x"+want.value {
			t.Errorf("%s: Value %d bytes of %d, %v; want %d of %d", want.name, len(v)-1, n, err, len(want.value), want.size)
		}
		if v, n, err := rd.Value(nil, 100); len(v) != 0 || n != 0 || err != nil {
			t.Errorf("%s: second Value: %q %d %v", want.name, v, n, err)
		}
	}
	if name, err := rd.Next(); name != nil || err != nil {
		t.Errorf("end of entry: %q %v", name, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}

func TestReaderReady(t *testing.T) {
	var in bytes.Buffer
	Write(&in, []Field{F("A", "text"), F("B", "bin\nary"), F("C", "")})
	entry := in.String()
	for cut := 0; cut <= len(entry); cut++ {
		rd := NewReader(strings.NewReader(entry[:cut]))
		rd.br.Peek(cut) // fill the buffer with what there is
		if got := rd.Ready(); got != (cut == len(entry)) {
			t.Errorf("Ready with %d of %d bytes: %v", cut, len(entry), got)
		}
	}
	// A length whose entry could not fit in any buffer.
	rd := NewReader(strings.NewReader("A\n\xff\xff\xff\xff\xff\xff\xff\xffabc\n\n"))
	rd.br.Peek(20)
	if rd.Ready() {
		t.Error("Ready with a huge length")
	}
}

// FuzzReader checks the reader against the writer: whatever entries the
// fuzzer's bytes describe are read back as written, through any split of
// the input and with any cap on the values; and the reader, given the
// bytes themselves, never panics, and what it reads survives being
// written and read again.
func FuzzReader(f *testing.F) {
	f.Add([]byte(captured), uint16(100), false)
	f.Add([]byte("\x01\x03abc\x0a\x02\n\x00\x1b\x12\x00"), uint16(1), true)
	f.Add([]byte("\x07\x05\xff\xfea\nb\x03\x03\x7f\t\x80"), uint16(0), false)
	f.Fuzz(func(t *testing.T, data []byte, capValue uint16, oneByte bool) {
		// The bytes as a description of entries, written and read back.
		entries := describe(data)
		var in bytes.Buffer
		for _, e := range entries {
			if err := Write(&in, e); err != nil {
				t.Fatal(err)
			}
		}
		var r io.Reader = bytes.NewReader(in.Bytes())
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		rd := newReaderSize(r, 128) // values over the buffer take every path
		for i, want := range entries {
			for j := 0; ; j++ {
				name, err := rd.Next()
				if err != nil {
					t.Fatalf("entry %d field %d: %v", i, j, err)
				}
				if name == nil {
					if j != len(want) {
						t.Fatalf("entry %d: %d fields, want %d", i, j, len(want))
					}
					break
				}
				if j >= len(want) || string(name) != want[j].Name {
					t.Fatalf("entry %d field %d: %q", i, j, name)
				}
				v, n, err := rd.Value(nil, int(capValue))
				w := want[j].Value
				if err != nil || n != int64(len(w)) || !bytes.Equal(v, w[:min(len(w), int(capValue))]) {
					t.Fatalf("entry %d %s: %q of %d (%v), want %q", i, name, v, n, err, w)
				}
			}
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("after the entries: %v", err)
		}

		// The bytes as input: what is read is written and read back alike.
		got, _ := readAll(newReaderSize(bytes.NewReader(data), 128))
		var again bytes.Buffer
		for _, e := range got {
			if err := Write(&again, e); err != nil {
				t.Fatalf("writing what was read: %v", err)
			}
		}
		back, err := readAll(NewReader(&again))
		if err != io.EOF || show(back) != show(got) {
			t.Fatalf("read %s, written and read again %s (%v)", show(got), show(back), err)
		}
	})
}

// fuzzNames are the field names describe picks from.
var fuzzNames = []string{"MESSAGE", "_SYSTEMD_UNIT", "__REALTIME_TIMESTAMP", "A", "B9_", "_", strings.Repeat("N", 64)}

// describe turns bytes into entries: per field a byte (its low 3 bits
// pick a name or, when 7, end the entry; its high bits are the value's
// length in units of 256), a byte (the length's remainder), the value.
func describe(data []byte) [][]Field {
	var entries [][]Field
	cur := []Field{}
	for len(data) >= 2 {
		op, n := data[0], int(data[0]>>3)<<8|int(data[1])
		data = data[2:]
		if op&7 == 7 {
			entries, cur = append(entries, cur), []Field{}
			continue
		}
		n = min(n, len(data))
		cur = append(cur, Field{Name: fuzzNames[op&7], Value: data[:n]})
		data = data[n:]
	}
	return append(entries, cur)
}
