package diag

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"kvmd/hw"
	"kvmd/info"
	"kvmd/journal"
)

// Defaults of Config's limits: JetKVM's diagnostics use the same.
const (
	DefaultProbeTimeout = 2 * time.Second
	DefaultTimeout      = 10 * time.Second
)

// maxFile bounds one file of the bundle before compression: the bundle of
// a busy device stays a size a ticket takes.
const maxFile = 4 << 20

// InfoSource is what /api/info answers from (package info implements it).
type InfoSource interface {
	Result(categories []string, legacy bool) []byte
	Hardware() info.Hardware
}

// AuthCounts counts the failed authentication attempts (package auth's
// Authenticator implements it): the daemon's own count, so that the
// bundle need not read it back from the log.
type AuthCounts interface {
	// FailuresSince returns the failures from t on (the last hour at
	// most).
	FailuresSince(t time.Time) int
}

// Journal says where the service's journal is.
type Journal struct {
	// Journalctl is the binary, looked up on PATH when it has no slash.
	// Default "journalctl".
	Journalctl string
	// Dir, when set, is a directory of journal files read instead of the
	// system journal.
	Dir string
	// Units are the service's unit patterns (full names, globs allowed).
	Units []string
}

// Config is what a bundle is made from.
type Config struct {
	FS   hw.FS
	Info InfoSource
	// V4L2 queries the capture device for the video probe; nil means the
	// real ioctls.
	V4L2    hw.V4L2
	Journal Journal
	Version string
	// Auth, when set, counts the failed logins of the last hour: the
	// daemon's bundle (GET /api/diagnostics) has it, kvmd diag run on its
	// own has not.
	Auth AuthCounts
	// Settings is the effective configuration, as YAML; it is redacted
	// like everything else.
	Settings []byte
	// Redactor removes the secrets; NewRedactor makes it.
	Redactor *Redactor
	// ProbeTimeout bounds each probe, Timeout all of them.
	ProbeTimeout time.Duration
	Timeout      time.Duration
	// Progress, when set, hears of each probe as it ends, one call at a
	// time.
	Progress func(Result)
	Log      *slog.Logger
	Now      func() time.Time
}

// Result is how a probe went.
type Result struct {
	// Name is the probe's name, which is also its file's path in the
	// archive.
	Name string
	Took time.Duration
	// Err is why the probe gave nothing or only part; nil when it went
	// well. A probe cut at its timeout has an error saying so.
	Err error
	// Skipped says why the probe does not apply here ("" when it does).
	Skipped string
}

// errSkip is returned by a probe that does not apply to this root.
type errSkip struct{ why string }

func (e errSkip) Error() string { return "skipped: " + e.why }

var errNotLive = errSkip{"the filesystem root is not this machine's (--root), so its live state is not asked"}

// probe makes one file. It writes what it found to w, even when it
// returns an error: a partial answer is still worth having.
type probe struct {
	name string
	run  func(ctx context.Context, w *bytes.Buffer) error
}

type output struct {
	Result
	data []byte
}

// Bundle is a support bundle being made.
type Bundle struct {
	cfg     Config
	now     time.Time
	journal *journal.Reader // for its journalctl arguments

	mu    sync.Mutex
	facts facts
}

// New returns a Bundle for cfg with defaults for its zero fields.
func New(cfg Config) *Bundle {
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.V4L2 == nil {
		cfg.V4L2 = hw.DeviceV4L2{}
	}
	if cfg.Journal.Journalctl == "" {
		cfg.Journal.Journalctl = "journalctl"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Redactor == nil {
		cfg.Redactor, _ = NewRedactor(Secrets{}, false, "")
	}
	jr := journal.New(journal.Config{Journalctl: cfg.Journal.Journalctl, Dir: cfg.Journal.Dir, Units: cfg.Journal.Units})
	return &Bundle{cfg: cfg, now: cfg.Now().UTC(), journal: jr}
}

// FileName is the bundle's name for a download: the host name (unless
// identities are removed) and the UTC time.
func (b *Bundle) FileName() string {
	host, _ := b.cfg.FS.Hostname()
	host = safeName(host)
	if host == "" || b.cfg.Redactor.Identities() {
		host = "kvmd"
	}
	return fmt.Sprintf("kvmd-diag-%s-%s.zip", host, b.now.Format("20060102T150405Z"))
}

// safeName keeps the characters a file name can hold anywhere.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return -1
	}, s)
}

// Write runs the probes and writes the zip archive to w: summary.txt
// first, then one file per probe. Only a failure to write w is an error;
// the probes' own failures are in the bundle.
func (b *Bundle) Write(ctx context.Context, w io.Writer) error {
	outs := b.run(ctx)
	z := zip.NewWriter(w)
	add := func(name string, data []byte) error {
		f, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: b.now})
		if err != nil {
			return err
		}
		_, err = f.Write(b.cfg.Redactor.Bytes(data))
		return err
	}
	if err := add("summary.txt", b.summary(ctx, outs)); err != nil {
		return err
	}
	for _, o := range outs {
		if err := add(o.Name, o.data); err != nil {
			return err
		}
	}
	return z.Close()
}

// run runs the probes, a few at a time, each under its own timeout and
// all under the overall one. A probe still running at its timeout is left
// behind (its commands are killed by the context); what it wrote so far
// is not used, since it may still be writing.
func (b *Bundle) run(ctx context.Context) []output {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	probes := b.probes()
	outs := make([]output, len(probes))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var progress sync.Mutex
	for i, p := range probes {
		wg.Go(func() {
			defer func() {
				if b.cfg.Progress != nil {
					progress.Lock()
					defer progress.Unlock()
					b.cfg.Progress(outs[i].Result)
				}
			}()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				r := Result{Name: p.name, Err: fmt.Errorf("not run: %w", b.overall(ctx))}
				outs[i] = output{Result: r, data: b.note(r)}
				return
			}
			outs[i] = b.runOne(ctx, p)
		})
	}
	wg.Wait()
	return outs
}

func (b *Bundle) runOne(ctx context.Context, p probe) output {
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
	defer cancel()
	type done struct {
		data []byte
		err  error
	}
	ch := make(chan done, 1)
	go func() {
		var buf bytes.Buffer
		err := func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("probe panicked: %v", v)
				}
			}()
			return p.run(pctx, &buf)
		}()
		ch <- done{buf.Bytes(), err}
	}()
	select {
	case d := <-ch:
		o := output{Result: Result{Name: p.name, Took: time.Since(start)}, data: d.data}
		var skip errSkip
		switch {
		case errors.As(d.err, &skip):
			o.Skipped = skip.why
		case d.err != nil && pctx.Err() != nil:
			o.Err = fmt.Errorf("cut at its %v timeout: %w", b.cfg.ProbeTimeout, d.err)
		default:
			o.Err = d.err
		}
		if len(o.data) == 0 && o.Err == nil && o.Skipped == "" {
			o.data = []byte("(nothing found)\n")
		}
		if len(o.data) > maxFile {
			o.data = append(o.data[:maxFile:maxFile], fmt.Sprintf("\n[cut at %d bytes]\n", maxFile)...)
		}
		if o.Err != nil || o.Skipped != "" {
			o.data = append(o.data, b.note(o.Result)...)
		}
		return o
	case <-pctx.Done():
		if ctx.Err() != nil {
			// The bundle's limit, or the client gone: not this probe's fault.
			r := Result{Name: p.name, Took: time.Since(start), Err: fmt.Errorf("cut: %w", b.overall(ctx))}
			return output{Result: r, data: b.note(r)}
		}
		return b.cut(p, time.Since(start), pctx.Err())
	}
}

// overall says why the bundle's context ended.
func (b *Bundle) overall(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the bundle's %v limit was reached", b.cfg.Timeout)
	}
	return ctx.Err()
}

// cut is the output of a probe that did not finish.
func (b *Bundle) cut(p probe, took time.Duration, err error) output {
	r := Result{Name: p.name, Took: took}
	if errors.Is(err, context.DeadlineExceeded) {
		r.Err = fmt.Errorf("cut at its %v timeout", b.cfg.ProbeTimeout)
	} else {
		r.Err = err
	}
	return output{Result: r, data: b.note(r)}
}

// note is the line that ends a file whose probe failed or was skipped, so
// that the file says so itself, not only summary.txt.
func (b *Bundle) note(r Result) []byte {
	if r.Skipped != "" {
		return fmt.Appendf(nil, "\n[kvmd diag: %s %s]\n", r.Name, errSkip{r.Skipped})
	}
	return fmt.Appendf(nil, "\n[kvmd diag: %s failed after %v: %v]\n", r.Name, r.Took.Round(time.Millisecond), r.Err)
}
