package testutil

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Proc is a process a test started (a daemon under test), its output
// collected line by line.
type Proc struct {
	Cmd    *exec.Cmd
	Stdout *LineLog
	Stderr *LineLog
	done   chan error
}

// StartProc starts cmd, whose Stdout and Stderr must be unset, and kills
// it when the test ends.
func StartProc(t testing.TB, cmd *exec.Cmd) *Proc {
	t.Helper()
	so, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	se, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, Stdout: NewLineLog(so), Stderr: NewLineLog(se), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// Stop sends SIGTERM and returns the exit error, failing t after 5 s.
func (p *Proc) Stop(t testing.TB) error {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not exit within 5 s of SIGTERM", p.Cmd.Path)
		return nil
	}
}

// A LineLog collects a stream's lines and lets a test wait for one.
type LineLog struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

// NewLineLog reads r's lines until it ends.
func NewLineLog(r io.Reader) *LineLog {
	l := &LineLog{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			l.mu.Unlock()
			select {
			case l.more <- struct{}{}:
			default:
			}
		}
	}()
	return l
}

// String returns the lines read so far.
func (l *LineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Wait returns the first submatch of re in a line (the whole match when
// re has no group), waiting up to 5 s for it.
func (l *LineLog) Wait(t testing.TB, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(5 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if m := rx.FindStringSubmatch(line); m != nil {
				l.mu.Unlock()
				if len(m) > 1 {
					return m[1]
				}
				return m[0]
			}
		}
		l.mu.Unlock()
		select {
		case <-l.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no line matching %q in:\n%s", re, l)
		}
	}
}
