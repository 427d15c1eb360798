// Package journaltest writes real journal files for tests, through
// systemd-journal-remote reading the journal export format, so that
// tests read them with the real journalctl (--directory).
//
// Write makes a whole file at once; Start keeps systemd-journal-remote
// running so a test can Append entries while a follower reads them. An
// appended entry is in the file, and seen by `journalctl --follow`,
// within a millisecond or so (systemd 252): journal-remote writes each
// entry as soon as its terminating empty line arrives, and its writes
// wake journalctl's inotify watch. Sync waits for that explicitly.
package journaltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/internal/testutil"
	jexport "kvmd/journal/export"
)

// Remote is where Debian's systemd-journal-remote package puts the binary.
const Remote = "/usr/lib/systemd/systemd-journal-remote"

// DefaultBoot is the boot ID of entries that do not give one.
const DefaultBoot = "6b766d64746573740000000000000001"

// Entry is one journal entry to write.
type Entry struct {
	// Time is __REALTIME_TIMESTAMP; zero means time.Now(). The entry's
	// __MONOTONIC_TIMESTAMP is derived from it (microseconds since the
	// epoch), so entries of one boot keep their order across files.
	Time time.Time
	// Unit is _SYSTEMD_UNIT; empty means none.
	Unit string
	// Message is MESSAGE, any bytes: values with control characters or
	// invalid UTF-8 are written in the export format's binary form.
	// Empty means the entry has no MESSAGE.
	Message string
	// Boot is _BOOT_ID, 32 hex digits; empty means DefaultBoot. Keep it
	// constant within a boot.
	Boot string
	// Fields are more fields (such as _PID, UNIT), written after the
	// above in name order. A name the above also writes gives the entry
	// a second value of that field.
	Fields map[string]string
}

// Available tells whether systemd-journal-remote is installed.
func Available() bool {
	fi, err := os.Stat(Remote)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Require skips the test when systemd-journal-remote is not installed
// (apt-get install systemd-journal-remote), or fails it when
// testutil.Required, as make test has it.
func Require(t testing.TB) {
	t.Helper()
	if !Available() {
		testutil.Missing(t, fmt.Sprintf("journaltest: %s is missing (apt-get install systemd-journal-remote)", Remote))
	}
}

var (
	fieldName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,63}$`)
	bootID    = regexp.MustCompile(`^[0-9a-f]{32}$`)
)

// AppendExport appends e in the journal export format to dst.
func AppendExport(dst []byte, e Entry) ([]byte, error) {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	us := max(t.UnixMicro(), 1)
	boot := strings.ToLower(strings.ReplaceAll(e.Boot, "-", ""))
	if boot == "" {
		boot = DefaultBoot
	}
	if !bootID.MatchString(boot) {
		return dst, fmt.Errorf("journaltest: boot ID %q is not 32 hex digits", e.Boot)
	}
	fields := []jexport.Field{
		jexport.F("__REALTIME_TIMESTAMP", strconv.FormatInt(us, 10)),
		jexport.F("__MONOTONIC_TIMESTAMP", strconv.FormatInt(us, 10)),
		jexport.F("_BOOT_ID", boot),
	}
	if e.Unit != "" {
		fields = append(fields, jexport.F("_SYSTEMD_UNIT", e.Unit))
	}
	if e.Message != "" {
		fields = append(fields, jexport.F("MESSAGE", e.Message))
	}
	names := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !fieldName.MatchString(k) || strings.HasPrefix(k, "__") {
			return dst, fmt.Errorf("journaltest: bad field name %q", k)
		}
		fields = append(fields, jexport.F(k, e.Fields[k]))
	}
	b := bytes.NewBuffer(dst)
	if err := jexport.Write(b, fields); err != nil {
		return dst, fmt.Errorf("journaltest: %w", err)
	}
	return b.Bytes(), nil
}

func export(entries []Entry) ([]byte, error) {
	var b []byte
	for _, e := range entries {
		var err error
		if b, err = AppendExport(b, e); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Path returns the journal file that name stands for in dir.
func Path(dir, name string) string {
	if !strings.HasSuffix(name, ".journal") {
		name += ".journal"
	}
	return filepath.Join(dir, name)
}

func remote(path string) *exec.Cmd {
	return exec.Command(Remote, "--output="+path, "--split-mode=none", "--seal=no", "--compress=yes", "-")
}

// Write writes entries to a new journal file dir/name.journal and returns
// its path. It skips t (see Require) when systemd-journal-remote is
// missing.
func Write(t testing.TB, dir, name string, entries []Entry) string {
	t.Helper()
	Require(t)
	data, err := export(entries)
	if err != nil {
		t.Fatal(err)
	}
	p := Path(dir, name)
	cmd := remote(p)
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("journaltest: writing %s: %v: %s", p, err, out)
	}
	return p
}

// Writer is a running systemd-journal-remote writing one journal file.
type Writer struct {
	t      testing.TB
	path   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testutil.SyncBuffer

	mu   sync.Mutex
	n    int // entries appended
	once sync.Once
}

// Start starts systemd-journal-remote writing dir/name.journal, which
// exists once the first entry is appended. The writer is closed when the
// test ends, if not before.
func Start(t testing.TB, dir, name string) *Writer {
	t.Helper()
	Require(t)
	w := &Writer{t: t, path: Path(dir, name), stderr: &testutil.SyncBuffer{}}
	w.cmd = remote(w.path)
	w.cmd.Stderr = w.stderr
	in, err := w.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.stdin = in
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("journaltest: starting %s: %v", Remote, err)
	}
	t.Cleanup(w.Close)
	return w
}

// Path returns the journal file's path.
func (w *Writer) Path() string { return w.path }

// Append sends entries to the writer. They are visible to journalctl
// very shortly after (see the package comment), not necessarily when
// Append returns: use Sync for that. Append may be called from any
// goroutine.
func (w *Writer) Append(entries ...Entry) {
	data, err := export(entries)
	if err != nil {
		w.t.Error(err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.stdin.Write(data); err != nil {
		w.t.Errorf("journaltest: appending to %s: %v (%s)", w.path, err, strings.TrimSpace(w.stderr.String()))
		return
	}
	w.n += len(entries)
}

// Sync waits until every appended entry is in the file, by polling the
// file's header with journalctl, for at most 10 s.
func (w *Writer) Sync() {
	w.t.Helper()
	w.mu.Lock()
	want := w.n
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jexport.WaitEntries(ctx, w.path, want); err != nil {
		w.t.Fatalf("journaltest: %v (%s)", err, strings.TrimSpace(w.stderr.String()))
	}
}

// Close ends the input, which makes systemd-journal-remote finish the
// file (offline, like a rotated journal file) and exit. It fails the
// test if it does not exit cleanly within 10 s. Close may be called more
// than once.
func (w *Writer) Close() {
	w.once.Do(func() {
		w.mu.Lock()
		w.stdin.Close()
		w.mu.Unlock()
		done := make(chan error, 1)
		go func() { done <- w.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				w.t.Errorf("journaltest: %s: %v (%s)", Remote, err, strings.TrimSpace(w.stderr.String()))
			}
		case <-time.After(10 * time.Second):
			w.cmd.Process.Kill()
			<-done
			w.t.Errorf("journaltest: %s did not exit", Remote)
		}
	})
}
