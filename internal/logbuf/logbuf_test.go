package logbuf

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink is the file behind the buffer: it counts the writes it gets.
type sink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	first  time.Time // of the first write
	fail   error     // returned by the next write, once
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail; err != nil {
		s.fail = nil
		return 0, err
	}
	if s.writes == 0 {
		s.first = time.Now()
	}
	s.writes++
	return s.buf.Write(p)
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

func TestLinesWaitAtMostTheDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := &sink{}
	b := New(s, 4096, delay)
	start := time.Now()
	fmt.Fprintln(b, "one")
	fmt.Fprintln(b, "two")
	deadline := time.Now().Add(10 * time.Second)
	for s.count() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.String(); got != "one\ntwo\n" || s.count() != 1 {
		t.Fatalf("after the delay: %q in %d writes, want both lines in one", got, s.count())
	}
	s.mu.Lock()
	waited := s.first.Sub(start)
	s.mu.Unlock()
	if waited < delay {
		t.Fatalf("written %v after the first line, before the delay of %v", waited, delay)
	}
	// The timer is armed again by the next line after an empty buffer.
	fmt.Fprintln(b, "three")
	for s.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.String(); got != "one\ntwo\nthree\n" {
		t.Fatalf("second batch: %q", got)
	}
}

func TestWarningFlushesEverythingBeforeIt(t *testing.T) {
	s := &sink{}
	b := New(s, 4096, time.Hour)
	log := slog.New(Handler(slog.NewTextHandler(b, nil), b)).With("component", "http")
	log.Info("request", "path", "/api/info")
	if s.String() != "" {
		t.Fatalf("an info line was written at once: %q", s.String())
	}
	log.WithGroup("g").Warn("login failed", "user", "admin")
	got := s.String()
	i, w := strings.Index(got, "msg=request"), strings.Index(got, `msg="login failed"`)
	if i < 0 || w < 0 || i > w || !strings.Contains(got, "component=http g.user=admin") {
		t.Fatalf("after a warning:\n%s", got)
	}
	log.Error("boom")
	if !strings.Contains(s.String(), "msg=boom") {
		t.Fatalf("an error waited in the buffer:\n%s", s.String())
	}
}

func TestFullBufferLosesNothing(t *testing.T) {
	s := &sink{}
	b := New(s, 1024, time.Hour)
	const goroutines, lines = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(b, "g%d line %d %s\n", g, i, strings.Repeat("x", g*10+1))
			}
		}()
	}
	wg.Wait()
	// Larger than the buffer: written through, after what was buffered.
	big := strings.Repeat("y", 3000) + "\n"
	b.Write([]byte(big))
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(s.String(), "\n"), "\n")
	if len(got) != goroutines*lines+1 || got[len(got)-1]+"\n" != big {
		t.Fatalf("%d lines, want %d, the long one last", len(got), goroutines*lines+1)
	}
	next := make([]int, goroutines)
	for _, l := range got[:len(got)-1] {
		var g, i int
		var pad string
		if _, err := fmt.Sscanf(l, "g%d line %d %s", &g, &i, &pad); err != nil || g < 0 || g >= goroutines {
			t.Fatalf("torn line %q: %v", l, err)
		}
		if i != next[g] || len(pad) != g*10+1 {
			t.Fatalf("line %q out of order or torn (want line %d of g%d)", l, next[g], g)
		}
		next[g]++
	}
	if n := s.count(); n > goroutines*lines/4 {
		t.Errorf("%d writes for %d lines: not batched", n, goroutines*lines)
	}
}

func TestWriteErrorDoesNotStickForEver(t *testing.T) {
	s := &sink{fail: errors.New("no space left on device")}
	b := New(s, 4096, time.Hour)
	fmt.Fprintln(b, "lost")
	if err := b.Flush(); err == nil {
		t.Fatal("the failed write was not reported")
	}
	fmt.Fprintln(b, "after")
	if err := b.Flush(); err != nil {
		t.Fatalf("the error stuck: %v", err)
	}
	if got := s.String(); got != "after\n" {
		t.Fatalf("got %q, want the line written after the failure", got)
	}
}
