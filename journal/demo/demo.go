// Package demo makes the journal that kvmd serve --demo reads: real
// journal files written by systemd-journal-remote from a small text source,
// with times relative to the start so that seek windows show something,
// and kept open so that the daemon's own log lines are appended while it
// runs, for a live follow.
//
// Only the demo build of kvmd (-tags demo, make run) and the benchmarks
// import it; cmd/kvmd's release_test.go keeps it out of the release
// binary.
package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kvmd/journal/export"
)

//go:embed journal.txt
var source string

// Journal is a demo journal being written.
type Journal struct {
	Dir string

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	boot  string
	start time.Time
}

func newBootID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Start writes the demo journal into dir and keeps systemd-journal-remote
// running for Append.
func Start(dir string, now time.Time) (*Journal, error) {
	remote, err := export.Remote()
	if err != nil {
		return nil, fmt.Errorf("demo journal: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	j := &Journal{Dir: dir, boot: newBootID(), start: now}
	cmd := exec.Command(remote, "--output="+filepath.Join(dir, "demo.journal"), "-")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo journal: %w", err)
	}
	j.cmd, j.stdin = cmd, in

	var b bytes.Buffer
	n := 0
	prevBoot := newBootID()
	bootStart := now.Add(-6000 * time.Second)
	sc := bufio.NewScanner(strings.NewReader(source))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		boot, start := j.boot, bootStart
		if rest, ok := strings.CutPrefix(line, "prev-boot "); ok {
			line, boot, start = rest, prevBoot, now.Add(-100000*time.Second)
		}
		ago, rest, _ := strings.Cut(line, " ")
		unit, msg, _ := strings.Cut(rest, " ")
		secs, err := strconv.Atoi(ago)
		if err != nil {
			j.Close()
			return nil, fmt.Errorf("demo journal source: %q: %w", line, err)
		}
		entry(&b, now.Add(-time.Duration(secs)*time.Second), start, boot, unit, strings.ReplaceAll(msg, `\n`, "\n"))
		n++
	}
	if _, err := in.Write(b.Bytes()); err != nil {
		j.Close()
		return nil, fmt.Errorf("demo journal: %w: %s", err, stderr.String())
	}
	// Return when all of it can be read: a reader that came earlier could
	// see only the previous boot's entries and take that boot for the
	// current one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := export.WaitEntries(ctx, filepath.Join(dir, "demo.journal"), n); err != nil {
		j.Close()
		return nil, fmt.Errorf("demo journal: %w: %s", err, stderr.String())
	}
	return j, nil
}

func entry(w io.Writer, at, bootStart time.Time, boot, unit, msg string) {
	fields := append(export.Timestamps(at, bootStart),
		export.F("_BOOT_ID", boot), export.F("_SYSTEMD_UNIT", unit),
		export.F("SYSLOG_IDENTIFIER", strings.TrimSuffix(unit, ".service")),
		export.F("PRIORITY", "6"), export.Field{Name: "MESSAGE", Value: []byte(msg)})
	export.Write(w, fields)
}

// Append adds an entry of unit with the current time. Errors are dropped:
// the demo journal is a convenience.
func (j *Journal) Append(unit, msg string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stdin == nil {
		return
	}
	var b bytes.Buffer
	entry(&b, time.Now(), j.start.Add(-6000*time.Second), j.boot, unit, msg)
	j.stdin.Write(b.Bytes())
}

// Close ends the writer: the files stay complete.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stdin == nil {
		return nil
	}
	j.stdin.Close()
	j.stdin = nil
	done := make(chan error, 1)
	go func() { done <- j.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		j.cmd.Process.Kill()
		return <-done
	}
}
