package journal

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzParseEntry checks that parseEntry never panics, that whatever it
// accepts formats as one valid UTF-8 line, and that on every valid
// single-line JSON object it agrees with encoding/json read by the rules
// of the decoder's doc comment.
func FuzzParseEntry(f *testing.F) {
	for _, tc := range captured {
		f.Add([]byte(tc.line))
	}
	for _, s := range []string{
		`{"__REALTIME_TIMESTAMP":"1","MESSAGE":[[104,105],"x"],"_SYSTEMD_UNIT":["a","b"]}`,
		`{"__REALTIME_TIMESTAMP":"1","MESSAGE":"\ud83c\udf89\ud800\u0041","A":{"b":[1e5,{"c":"]"}]}}`,
		`{"__REALTIME_TIMESTAMP":"1","MESSAGE":[1,2,300],"MESSAGE":[-1]}`,
		`{"__REALTIME_TIMESTAMP":"1","MESSAGE":"a\u0000\u001b\u0085 "}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseEntry(line)
		if err == nil {
			var b bytes.Buffer
			if err := writeLine(&b, &e, time.UTC); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !utf8.ValidString(out) || !strings.HasSuffix(out, "\r\n") || strings.Count(out, "\r") != 1 {
				t.Fatalf("bad line %q", out)
			}
		}
		if bytes.IndexByte(line, '\n') >= 0 || !utf8.Valid(line) || !json.Valid(line) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var obj map[string]any
		if d.Decode(&obj) != nil {
			return // valid JSON, not an object
		}
		wantTS, tsOK := refValue(obj["__REALTIME_TIMESTAMP"], true)
		usec, usecOK := parseUsec(field{b: []byte(wantTS), set: tsOK})
		if !usecOK {
			if err == nil {
				t.Fatalf("accepted without a valid timestamp (%q)", wantTS)
			}
			return
		}
		if err != nil {
			t.Fatalf("rejected a valid entry: %v", err)
		}
		if e.usec != usec {
			t.Errorf("timestamp %d, want %d", e.usec, usec)
		}
		for _, c := range []struct {
			key string
			got field
		}{{"MESSAGE", e.message}, {"_SYSTEMD_UNIT", e.unit}} {
			want, ok := refValue(obj[c.key], true)
			if ok != c.got.set || (ok && len(want) <= c.got.max && want != string(c.got.b)) {
				t.Errorf("%s: got (%q, %v), want (%q, %v)", c.key, c.got.b, c.got.set, want, ok)
			}
		}
	})
}

// refValue reads a value the way the decoder's doc comment says: a
// string, an array of plain integers 0-255, or the first of several such
// values.
func refValue(v any, top bool) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []any:
		if len(v) == 0 {
			return "", true
		}
		if _, isNum := v[0].(json.Number); !isNum {
			if !top {
				return "", false
			}
			return refValue(v[0], false)
		}
		b := make([]byte, 0, len(v))
		for _, x := range v {
			n, ok := x.(json.Number)
			if !ok {
				return "", false
			}
			i, err := strconv.Atoi(string(n))
			if err != nil || i < 0 || i > 255 || strconv.Itoa(i) != string(n) {
				return "", false
			}
			b = append(b, byte(i))
		}
		return string(b), true
	}
	return "", false
}
