package journal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/internal/procgroup"
	"kvmd/journal/export"
)

// Config says where the journal is and what to show of it.
type Config struct {
	// Journalctl is the journalctl binary, looked up on PATH when it has
	// no slash. Default "journalctl".
	Journalctl string
	// Dir, when set, is a directory of journal files read instead of the
	// system journal (journalctl --directory).
	Dir string
	// Units are the unit name patterns (path.Match syntax, which is also
	// what journalctl's --unit globs accept) whose entries are shown. They
	// must be full unit names ("kvmd.service", not "kvmd"). Default
	// "kvmd.service", "kvmd-*.service".
	Units []string
	// MaxFollowers bounds the streams open with follow. Default 20.
	MaxFollowers int
	// Location is the time zone of the timestamps. Default time.Local.
	Location *time.Location
	// WriteTimeout drops a stream whose single write blocks this long,
	// when Copy is given a way to set write deadlines. Default 60 s.
	WriteTimeout time.Duration
	// Stdbuf is coreutils' stdbuf, through which journalctl runs with a
	// large output buffer (see outputBuffer), looked up on PATH when it
	// has no slash. Default "stdbuf"; "-": run journalctl directly.
	// Without a working stdbuf journalctl runs directly.
	Stdbuf string
}

// Reader opens streams of log lines from the journal. It is safe for
// concurrent use.
type Reader struct {
	cfg        Config
	sem        chan struct{}
	badPattern *Error
	systemDirs []string // where the system journal lives

	stdbufOnce sync.Once
	stdbuf     string // the working stdbuf binary, or ""
}

// readyTimeout bounds how long Open waits to see whether journalctl
// starts cleanly (see doc.go); after it, the stream is returned anyway.
const readyTimeout = 2 * time.Second

// New returns a Reader for cfg, with defaults for its zero fields.
func New(cfg Config) *Reader {
	if cfg.Journalctl == "" {
		cfg.Journalctl = "journalctl"
	}
	if len(cfg.Units) == 0 {
		cfg.Units = []string{"kvmd.service", "kvmd-*.service"}
	}
	cfg.Units = append([]string(nil), cfg.Units...)
	if cfg.MaxFollowers <= 0 {
		cfg.MaxFollowers = 20
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 60 * time.Second
	}
	if cfg.Stdbuf == "" {
		cfg.Stdbuf = "stdbuf"
	}
	r := &Reader{
		cfg:        cfg,
		sem:        make(chan struct{}, cfg.MaxFollowers),
		systemDirs: []string{"/run/log/journal", "/var/log/journal"},
	}
	for _, p := range cfg.Units {
		if _, err := path.Match(p, ""); err != nil || strings.HasPrefix(p, "-") {
			r.badPattern = unavailable(nil, "bad unit pattern %q", p)
		}
	}
	return r
}

// Open starts reading the current boot's entries of the configured units,
// from seek back (0: the whole boot), and with follow also the entries
// written after that, until ctx ends or the stream is closed. The caller
// must Close the stream.
//
// Errors are an *Error (ErrTooManyFollowers, or ErrUnavailable with the
// reason), or ctx's error.
func (r *Reader) Open(ctx context.Context, seek time.Duration, follow bool) (*Stream, error) {
	if seek < 0 {
		return nil, fmt.Errorf("journal: negative seek %v", seek)
	}
	if r.badPattern != nil {
		return nil, r.badPattern
	}
	var release func()
	if follow {
		select {
		case r.sem <- struct{}{}:
			release = func() { <-r.sem }
		default:
			return nil, tooManyFollowers
		}
	}
	s, err := r.open(ctx, seek, follow)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	s.release = release
	return s, nil
}

// Followers returns the number of streams open with follow now.
func (r *Reader) Followers() int { return len(r.sem) }

func (r *Reader) open(ctx context.Context, seek time.Duration, follow bool) (*Stream, error) {
	bin, err := r.preflight()
	if err != nil {
		return nil, err
	}
	q := Query{Follow: follow, Boot: BootCurrent, Units: true}
	if seek > 0 {
		q.Since = time.Now().Add(-seek)
		if q.Since.Unix() <= 0 {
			q.Since = time.Time{} // further back than the epoch: everything
		}
	}
	for {
		s, err := r.start(ctx, r.argv(bin, r.Args(q)), follow)
		if err != nil {
			return nil, unavailable(err, "starting journalctl: %v", err)
		}
		err = s.awaitReady(ctx)
		if err == nil {
			s.stop = context.AfterFunc(ctx, s.interrupt)
			return s, nil
		}
		s.Close()
		var xe *exitError
		if !errors.As(err, &xe) {
			return nil, err
		}
		// Two failures of journalctl mean "nothing yet", not "broken":
		switch {
		case q.Boot != "" && r.cfg.Dir != "" && errors.Is(xe, ErrNoSuchBoot):
			// --boot in a directory means its last boot, and a directory
			// without entries has none. Every entry to come is new.
			// (--follow implies --boot: Args adds --merge to undo that.)
			q.Boot = ""
		case q.Units && errors.Is(xe, ErrNoUnitEntries):
			// No unit in the journal matches the patterns (only globs
			// were given). Read every entry and filter here instead,
			// which also catches units that appear later.
			q.Units = false
		default:
			return nil, unavailable(xe, "%v", xe)
		}
	}
}

// preflight checks what makes journalctl fail in ways worth a clear
// message, and returns the binary's path.
func (r *Reader) preflight() (string, error) {
	bin, err := exec.LookPath(r.cfg.Journalctl)
	if err != nil {
		return "", unavailable(err, "%v", err)
	}
	if r.cfg.Dir != "" {
		return bin, checkDir(r.cfg.Dir)
	}
	found := false
	for _, d := range r.systemDirs {
		err := checkDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		found = true
	}
	if !found {
		return "", unavailable(nil, "no system journal (none of %s exists)", strings.Join(r.systemDirs, ", "))
	}
	return bin, nil
}

// checkDir checks that dir is a readable directory and, if it holds
// journal files (directly or in machine-ID subdirectories, where
// journalctl looks), that this process can open at least one: journalctl
// skips the files it may not read without failing, so a daemon outside
// the systemd-journal group would otherwise show an empty log.
func checkDir(dir string) error {
	files, readable, err := scanDir(dir, true)
	if err != nil {
		return unavailable(err, "%v", err)
	}
	if files > 0 && !readable {
		return unavailable(nil, "permission denied reading the journal files in %s (uid %d; journal readers need the systemd-journal group)",
			dir, os.Getuid())
	}
	return nil
}

func scanDir(dir string, top bool) (files int, readable bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return 0, false, err
	} else if !fi.IsDir() {
		return 0, false, fmt.Errorf("%s is not a directory", dir)
	}
	names, err := f.Readdirnames(1024)
	if err != nil && err != io.EOF {
		return 0, false, fmt.Errorf("reading %s: %w", dir, err)
	}
	for _, name := range names {
		p := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, ".journal") || strings.HasSuffix(name, ".journal~"):
			files++
			if jf, err := os.Open(p); err == nil {
				jf.Close()
				return files, true, nil
			}
		case top && isID128(name):
			n, ok, err := scanDir(p, false)
			if ok {
				return files + n, true, nil
			}
			files += n
			if errors.Is(err, fs.ErrPermission) {
				files++ // an unreadable machine directory counts as unreadable files
			}
		}
	}
	return files, false, nil
}

func isID128(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Argv returns the command line a whole-boot read (seek 0, no follow)
// runs, or Open's error when it would fail: journalctl alone doing the
// stream's work, for a benchmark to compare against.
func (r *Reader) Argv() ([]string, error) {
	if r.badPattern != nil {
		return nil, r.badPattern
	}
	bin, err := r.preflight()
	if err != nil {
		return nil, err
	}
	return r.argv(bin, r.Args(Query{Boot: BootCurrent, Units: true})), nil
}

// outputBuffer is journalctl's stdout buffer under stdbuf, and pipeSize
// the pipe's capacity. By default stdio buffers a pipe in 4 KiB, and a
// seek through a million entries is some 70,000 writes, each waking the
// daemon: those wake-ups cost the daemon more CPU time than parsing the
// entries, and contend with journalctl for the cores. Written 256 KiB at
// a time into a pipe that holds as much, journalctl goes on with the next
// 256 KiB while the daemon reads the last (a larger buffer through Linux's
// default 64 KiB pipe gained less: journalctl then waits for the daemon to
// drain each write). Measured on make bench's journal of a million
// entries: a sixth of the daemon's context switches and a third of its
// CPU time (perf stat: 105,000 and 2.2 s before), and the whole seek as
// fast as journalctl alone under the same stdbuf. A follow loses nothing:
// journalctl flushes its output whenever it waits for new entries.
const (
	outputBuffer = "256K"
	pipeSize     = 256 << 10
)

// argv is the command line that runs journalctl (bin) with args: through
// stdbuf when it works, which execs journalctl in the same process.
func (r *Reader) argv(bin string, args []string) []string {
	r.stdbufOnce.Do(func() {
		if r.cfg.Stdbuf == "-" {
			return
		}
		sb, err := exec.LookPath(r.cfg.Stdbuf)
		if err != nil {
			return
		}
		// stdbuf works by preloading a library of its own: make sure it
		// is there.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if exec.CommandContext(ctx, sb, "-o"+outputBuffer, "true").Run() == nil {
			r.stdbuf = sb
		}
	})
	if r.stdbuf == "" {
		return append([]string{bin}, args...)
	}
	return append([]string{r.stdbuf, "-o" + outputBuffer, bin}, args...)
}

// start runs argv (journalctl, or stdbuf running it) with its output on a
// pipe the stream reads.
func (r *Reader) start(ctx context.Context, argv []string, follow bool) (*Stream, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// Best effort: past the user's pipe quota (fs.pipe-user-pages-soft)
	// the kernel refuses, and the pipe keeps its 64 KiB.
	unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, pipeSize)
	cmd := exec.Command(argv[0], argv[1:]...)
	// English messages: Classify recognises some of them.
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "SYSTEMD_PAGER=")
	cmd.Stdout = pw
	stderr := &headBuffer{max: 4096}
	cmd.Stderr = stderr
	cmd.SysProcAttr = procgroup.Attr() // Close kills the group; the kernel, if the daemon dies first
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(pr, readBuffer)
	return &Stream{
		r:      r,
		ctx:    ctx,
		follow: follow,
		cmd:    cmd,
		pr:     pr,
		br:     br,
		rd:     export.NewReader(br),
		stderr: stderr,

		flushEvery: flushEvery,
	}, nil
}

// exitError is journalctl exiting with a failure before any output.
type exitError struct {
	err    error // from exec.Cmd.Wait
	stderr string
}

// Is reports whether journalctl's complaint is target's kind (Classify).
func (e *exitError) Is(target error) bool {
	k := Classify(e.stderr)
	return k != nil && k == target
}

func (e *exitError) Error() string {
	if msg := cleanStderr(e.stderr); msg != "" {
		return "journalctl: " + msg
	}
	return "journalctl: " + e.err.Error()
}

// cleanStderr makes journalctl's complaint fit an error message: its first
// two lines, printable, at most 200 bytes.
func cleanStderr(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r == 0xfffd {
				return -1
			}
			return r
		}, l))
		if l != "" {
			lines = append(lines, l)
		}
		if len(lines) == 2 {
			break
		}
	}
	msg := strings.Join(lines, "; ")
	if len(msg) > 200 {
		cut := 200
		for cut > 0 && msg[cut]&0xc0 == 0x80 {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	b   []byte
	max int
}

func (h *headBuffer) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string { return string(h.b) }
