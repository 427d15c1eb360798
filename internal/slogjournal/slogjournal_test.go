package slogjournal

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// recorder keeps what a Handler sends.
type recorder struct {
	entries []Entry
	err     error // what send returns
}

func (r *recorder) send(e Entry) error {
	r.entries = append(r.entries, e)
	return r.err
}

// TestSlogtest checks the Handler against slog's rules. Groups are in an
// Entry's keys ("G.H.e"); the results nest them as slogtest wants.
func TestSlogtest(t *testing.T) {
	rec := &recorder{}
	h := New(rec.send, slog.NewTextHandler(&bytes.Buffer{}, nil))
	results := func() []map[string]any {
		var out []map[string]any
		for _, e := range rec.entries {
			m := map[string]any{slog.LevelKey: e.Level, slog.MessageKey: e.Msg}
			if !e.Time.IsZero() {
				m[slog.TimeKey] = e.Time
			}
			for _, a := range e.Attrs {
				g := m
				path := strings.Split(a.Key, ".")
				for _, name := range path[:len(path)-1] {
					sub, ok := g[name].(map[string]any)
					if !ok {
						sub = map[string]any{}
						g[name] = sub
					}
					g = sub
				}
				g[path[len(path)-1]] = a.Value
			}
			out = append(out, m)
		}
		return out
	}
	if err := slogtest.TestHandler(h, results); err != nil {
		t.Error(err)
	}
}

// TestEntry pins the MESSAGE text, fields and priority journald gets, for
// the daemon's own kinds of records.
func TestEntry(t *testing.T) {
	for _, tt := range []struct {
		name   string
		log    func(*slog.Logger)
		msg    string
		fields map[string]string
		pri    journal.Priority
	}{{
		name: "audit failure",
		log: func(l *slog.Logger) {
			l.With("component", "auth").Warn("auth failed", "user", "admin", "method", "basic", "addr", "127.0.0.1", "reason", "wrong user or password")
		},
		msg: `auth failed component=auth user=admin method=basic addr=127.0.0.1 reason="wrong user or password"`,
		fields: map[string]string{"KVMD_COMPONENT": "auth", "KVMD_USER": "admin", "KVMD_METHOD": "basic",
			"KVMD_ADDR": "127.0.0.1", "KVMD_REASON": "wrong user or password"},
		pri: journal.PriWarning,
	}, {
		name: "quoting",
		log: func(l *slog.Logger) {
			l.Error("listen", "err", `a "b"`, "empty", "", "eq", "a=b", "tab", "a\tb", "n", 3, "d", 1500*time.Millisecond)
		},
		msg:    `listen err="a \"b\"" empty="" eq="a=b" tab="a\tb" n=3 d=1.5s`,
		fields: map[string]string{"KVMD_ERR": `a "b"`, "KVMD_EMPTY": "", "KVMD_EQ": "a=b", "KVMD_TAB": "a\tb", "KVMD_N": "3", "KVMD_D": "1.5s"},
		pri:    journal.PriErr,
	}, {
		name:   "field names",
		log:    func(l *slog.Logger) { l.Info("x", "local_users", "a,b", "cache-ttl", "1m", "v4l2", "ok") },
		msg:    "x local_users=a,b cache-ttl=1m v4l2=ok",
		fields: map[string]string{"KVMD_LOCAL_USERS": "a,b", "KVMD_CACHE_TTL": "1m", "KVMD_V4L2": "ok"},
		pri:    journal.PriInfo,
	}, {
		// Attributes added before a group stay outside it.
		name:   "With then WithGroup",
		log:    func(l *slog.Logger) { l.With("component", "http").WithGroup("req").Info("request", "user", "admin") },
		msg:    "request component=http req.user=admin",
		fields: map[string]string{"KVMD_COMPONENT": "http", "KVMD_REQ_USER": "admin"},
		pri:    journal.PriInfo,
	}, {
		name:   "group attribute",
		log:    func(l *slog.Logger) { l.Debug("d", slog.Group("tls", "version", "1.3"), slog.Group("", "inline", "y")) },
		msg:    "d tls.version=1.3 inline=y",
		fields: map[string]string{"KVMD_TLS_VERSION": "1.3", "KVMD_INLINE": "y"},
		pri:    journal.PriDebug,
	}, {
		name:   "no attributes",
		log:    func(l *slog.Logger) { l.Info("shutting down") },
		msg:    "shutting down",
		fields: map[string]string{},
		pri:    journal.PriInfo,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			tt.log(slog.New(New(rec.send, slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			if len(rec.entries) != 1 {
				t.Fatalf("%d entries, want 1", len(rec.entries))
			}
			e := rec.entries[0]
			if got := e.Message(); got != tt.msg {
				t.Errorf("MESSAGE\n got %s\nwant %s", got, tt.msg)
			}
			if got := e.Fields("KVMD_"); !maps.Equal(got, tt.fields) {
				t.Errorf("fields %q, want %q", got, tt.fields)
			}
			if got := e.Priority(); got != tt.pri {
				t.Errorf("priority %d, want %d", got, tt.pri)
			}
		})
	}
}

// TestFallback: without tee the fallback handler gets only what journald
// refused; with tee it gets everything, groups and attributes intact.
func TestFallback(t *testing.T) {
	var text bytes.Buffer
	rec := &recorder{}
	l := slog.New(New(rec.send, slog.NewTextHandler(&text, nil))).With("component", "auth")
	l.Info("sent")
	if text.Len() != 0 {
		t.Errorf("fallback got a record journald took: %q", text.String())
	}
	rec.err = errors.New("journald gone")
	l.Info("refused", "user", "admin")
	if !strings.Contains(text.String(), "msg=refused component=auth user=admin") {
		t.Errorf("fallback: %q, want the refused record", text.String())
	}

	text.Reset()
	rec = &recorder{}
	l = slog.New(NewTee(rec.send, slog.NewTextHandler(&text, nil))).WithGroup("req")
	l.Info("both", "user", "admin")
	if len(rec.entries) != 1 || rec.entries[0].Message() != "both req.user=admin" {
		t.Errorf("tee sent %+v", rec.entries)
	}
	if !strings.Contains(text.String(), "msg=both req.user=admin") {
		t.Errorf("tee's next handler: %q", text.String())
	}

	// Debug: only when the fallback wants it.
	h := New(rec.send, slog.NewTextHandler(&text, nil))
	if h.Enabled(context.Background(), slog.LevelDebug) || !h.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("Enabled: want Info and above only, as the fallback")
	}
}
