package slogtext

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/slogtest"
	"time"
)

// both logs the same calls through a Handler and through
// slog.TextHandler and returns the two outputs.
func both(t testing.TB, with func(h slog.Handler) slog.Handler, log func(l *slog.Logger)) (got, want string) {
	t.Helper()
	var g, w bytes.Buffer
	var gh, wh slog.Handler = New(&g), slog.NewTextHandler(&w, nil)
	if with != nil {
		gh, wh = with(gh), with(wh)
	}
	log(slog.New(fixedTime{gh}))
	log(slog.New(fixedTime{wh}))
	return g.String(), w.String()
}

// fixedTime gives every record one time, so that two handlers' lines of
// the same calls can be compared.
type fixedTime struct{ slog.Handler }

func (f fixedTime) Handle(ctx context.Context, r slog.Record) error {
	r.Time = time.Date(2026, 11, 26, 17, 16, 0, 682_999_999, time.Local)
	return f.Handler.Handle(ctx, r)
}

func (f fixedTime) WithAttrs(as []slog.Attr) slog.Handler { return fixedTime{f.Handler.WithAttrs(as)} }
func (f fixedTime) WithGroup(name string) slog.Handler    { return fixedTime{f.Handler.WithGroup(name)} }

type stringer struct{}

func (stringer) String() string { return "a stringer" }

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("from a valuer") }

// TestSameAsTextHandler: every kind of attribute, strings that need
// quoting and some that do not, levels, WithAttrs and WithGroup; each
// line as TextHandler writes it, whichever of the two paths wrote it.
func TestSameAsTextHandler(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 16, 0, 682_999_999, time.FixedZone("X", 3600+1800))
	strs := []string{"", "plain", "two words", "a=b", `q"uote`, `back\slash`, "tab\there", "new\nline", "\x7f", "\x00",
		"é", "\u00a0", "\u2028", "\ufffd", "\xff", "x\xc3", "日本", "/api/auth/check", "127.0.0.1", "[::1]", "45µs"}
	cases := []struct {
		name string
		with func(slog.Handler) slog.Handler
		log  func(l *slog.Logger)
	}{
		{"kinds", nil, func(l *slog.Logger) {
			l.Info("msg", "s", "x", "i", -42, "u", uint64(math.MaxUint64), "f", 1.5e-7, "f2", math.Inf(-1), "b", true,
				"d", 45*time.Microsecond, "d0", time.Duration(0), "t", at, "t0", time.Time{})
		}},
		{"strings", nil, func(l *slog.Logger) {
			for _, s := range strs {
				l.Info(s, s, s)
			}
		}},
		{"levels", nil, func(l *slog.Logger) {
			l.Warn("w")
			l.Error("e", "err", errors.New("boom"))
			l.Log(context.Background(), slog.LevelInfo+2, "info+2")
			l.Debug("not shown")
		}},
		{"any", nil, func(l *slog.Logger) {
			l.Info("m", "a", "first", "err", errors.New("an error"), "s", stringer{}, "v", valuer{}, "nil", nil,
				"bytes", []byte("hi"), "g", slog.GroupValue(slog.Int("x", 1)), "", "empty key", "after", 1)
		}},
		{"empty attr", nil, func(l *slog.Logger) { l.Info("m", slog.Attr{}, "x", 1) }},
		{"with", func(h slog.Handler) slog.Handler {
			return h.WithAttrs([]slog.Attr{slog.String("component", "http"), slog.Int("n", 3)})
		}, func(l *slog.Logger) {
			l.Info("http", "addr", "127.0.0.1", "status", 200, "dur", 12*time.Millisecond)
			l.With("more", "x y").Info("again", "err", io.EOF)
		}},
		{"with any", func(h slog.Handler) slog.Handler {
			return h.WithAttrs([]slog.Attr{slog.Any("err", io.EOF)})
		}, func(l *slog.Logger) { l.Info("m", "x", 1) }},
		{"group", func(h slog.Handler) slog.Handler {
			return h.WithAttrs([]slog.Attr{slog.String("a", "b")}).WithGroup("g")
		}, func(l *slog.Logger) { l.Info("m", "x", 1, "y", "two words") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := both(t, c.with, c.log)
			if got != want {
				t.Errorf("lines differ\n got: %q\nwant: %q", got, want)
			}
		})
	}

	// The record's time, in a zone and at the edges of the millisecond,
	// through one handler (which keeps the second's text) and a new one.
	kept := New(io.Discard)
	for _, ts := range []time.Time{at, at.Add(1), at.Truncate(time.Millisecond), at.Add(-at.Sub(at.Truncate(time.Second))),
		at.Truncate(time.Second).Add(time.Second - 1), at.In(time.UTC), at.Add(time.Second), time.Unix(0, 0).UTC(), time.Unix(-1, 5e8).UTC(),
		time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), at.Add(time.Millisecond)} {
		var g, n, w bytes.Buffer
		r := slog.NewRecord(ts, slog.LevelInfo, "m", 0)
		kept.out.w = &g
		kept.Handle(context.Background(), r)
		New(&n).Handle(context.Background(), r)
		slog.NewTextHandler(&w, nil).Handle(context.Background(), r)
		if g.String() != w.String() || n.String() != w.String() {
			t.Errorf("time %v: got %q (new handler %q), want %q", ts, g.String(), n.String(), w.String())
		}
	}
}

// TestOwnPath checks that the records the handler formats itself do not
// go to TextHandler: the test above would pass, and the package be
// useless, if everything did.
func TestOwnPath(t *testing.T) {
	h := New(io.Discard).WithAttrs([]slog.Attr{slog.String("component", "http")}).(*Handler)
	h.slow = panicHandler{}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "http", 0)
	r.AddAttrs(slog.String("addr", "127.0.0.1"), slog.Int("status", 200), slog.Duration("dur", time.Millisecond))
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { h.Handle(context.Background(), r) }); n > 1 {
		t.Errorf("%v allocations a line, want at most 1 (the duration's text)", n)
	}
}

// TestHandleText: a line whose attributes come as text (AppendString
// and literal keys) is the line TextHandler writes for the same record;
// after WithGroup the handler declines and writes nothing.
func TestHandleText(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 16, 0, 682_999_999, time.FixedZone("X", 3600))
	for _, s := range []string{"", "plain", "two words", "a=b", `q"uote`, "new\nline", "\xff", "日本", "\u00a0", "[::1]"} {
		var g, w bytes.Buffer
		h := New(&g).WithAttrs([]slog.Attr{slog.String("component", "http")}).(*Handler)
		attrs := AppendString([]byte(" path="), s)
		attrs = append(append(attrs, " status="...), "200"...)
		attrs = append(AppendString(append(attrs, ' '), s), '=')
		attrs = AppendString(attrs, s)
		if ok, err := h.HandleText(at, slog.LevelWarn, s, attrs); !ok || err != nil {
			t.Fatalf("HandleText: %v, %v", ok, err)
		}
		r := slog.NewRecord(at, slog.LevelWarn, s, 0)
		r.AddAttrs(slog.String("path", s), slog.Int("status", 200), slog.String(s, s))
		slog.NewTextHandler(&w, nil).WithAttrs([]slog.Attr{slog.String("component", "http")}).Handle(context.Background(), r)
		if s != "" && g.String() != w.String() { // TextHandler drops an attribute with an empty key
			t.Errorf("%q: got %q, want %q", s, g.String(), w.String())
		}
	}
	var g bytes.Buffer
	grouped := New(&g).WithGroup("g").(*Handler)
	if ok, _ := grouped.HandleText(at, slog.LevelInfo, "m", []byte(" x=1")); ok || g.Len() != 0 {
		t.Errorf("after WithGroup: HandleText reported %v and wrote %q", ok, g.String())
	}
}

type panicHandler struct{ slog.Handler }

func (panicHandler) Handle(context.Context, slog.Record) error { panic("went to TextHandler") }

func TestSlogtest(t *testing.T) {
	var buf bytes.Buffer
	results := func() []map[string]any {
		var ms []map[string]any
		for line := range strings.Lines(buf.String()) {
			ms = append(ms, parseLine(t, strings.TrimSuffix(line, "\n")))
		}
		return ms
	}
	if err := slogtest.TestHandler(New(&buf), results); err != nil {
		t.Error(err)
	}
}

// parseLine reads a line of unquoted key=value pairs, a dotted key as
// nested groups (enough for slogtest's records).
func parseLine(t *testing.T, line string) map[string]any {
	m := map[string]any{}
	for kv := range strings.FieldsSeq(line) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("no = in %q of %q", kv, line)
		}
		if k == "time" {
			tm, err := time.Parse(time.RFC3339, v)
			if err != nil {
				t.Fatal(err)
			}
			m[k] = tm
			continue
		}
		cur := m
		keys := strings.Split(k, ".")
		for _, g := range keys[:len(keys)-1] {
			sub, _ := cur[g].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				cur[g] = sub
			}
			cur = sub
		}
		cur[keys[len(keys)-1]] = v
	}
	return m
}

// FuzzSameAsTextHandler: any message, key and string value gives
// TextHandler's line.
func FuzzSameAsTextHandler(f *testing.F) {
	for _, s := range []string{"", "a b", "x=y", "é\u2028", "\xff\x00", `"q"`} {
		f.Add(s, "key", s, int64(7))
		f.Add(s, "k", s, int64(1_795_000_000_123_456_789))
		f.Add(s, "k", s, int64(1_795_000_000_999_000_000))
	}
	kept := New(io.Discard)
	f.Fuzz(func(t *testing.T, msg, key, val string, n int64) {
		// n is also the time, within some thousand years of 1970, in a
		// zone: the kept second's text must not show in another.
		ts := time.Unix(0, 0).Add(time.Duration(n)).In(time.FixedZone("", int(n%50_000)))
		r := slog.NewRecord(ts, slog.LevelInfo, msg, 0)
		r.AddAttrs(slog.String(key, val), slog.Int64("n", n), slog.String("k2", key))
		var g, w bytes.Buffer
		kept.out.w = &g
		if err := kept.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		slog.NewTextHandler(&w, nil).Handle(context.Background(), r)
		if g.String() != w.String() {
			t.Errorf("got %q, want %q", g.String(), w.String())
		}
	})
}

// BenchmarkAccessLine is kvmd's access line through this handler and
// through TextHandler.
func BenchmarkAccessLine(b *testing.B) {
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{{"slogtext", New(io.Discard)}, {"TextHandler", slog.NewTextHandler(io.Discard, nil)}} {
		b.Run(c.name, func(b *testing.B) {
			h := c.h.WithAttrs([]slog.Attr{slog.String("component", "http")})
			b.ReportAllocs()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "http", 0)
				r.AddAttrs(slog.String("addr", "127.0.0.1"), slog.String("method", "GET"), slog.String("path", "/api/auth/check"),
					slog.Int("status", 200), slog.Int64("bytes", 23), slog.String("user", "bench"), slog.String("auth", "cookie"),
					slog.Duration("dur", 45*time.Microsecond))
				h.Handle(context.Background(), r)
			}
		})
	}
}
