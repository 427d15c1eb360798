package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"kvmd/internal/procgroup"
)

// child is a server process started by the driver, its output going to a
// log file.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time // just before exec
	done    chan struct{}
	waitErr error
}

// children tracks every child still running so that each exit path of the
// driver (error, Ctrl-C, panic unwinding through defers) can end them.
type children struct {
	mu  sync.Mutex
	set map[*child]struct{}
}

func (cs *children) start(name, path string, args []string, logPath string) (*child, error) {
	return cs.startEnv(name, path, args, nil, logPath)
}

// startEnv starts a child with env added to this process's environment.
func (cs *children) startEnv(name, path string, args, env []string, logPath string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = procgroup.Attr()
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	cs.mu.Lock()
	if cs.set == nil {
		cs.set = make(map[*child]struct{})
	}
	cs.set[c] = struct{}{}
	cs.mu.Unlock()
	return c, nil
}

// stop ends c: SIGTERM, then SIGKILL if it is still there after grace.
func (cs *children) stop(c *child, grace time.Duration) {
	cs.mu.Lock()
	delete(cs.set, c)
	cs.mu.Unlock()
	c.stop(grace)
}

// stopAll ends every child still running, all at once.
func (cs *children) stopAll(grace time.Duration) {
	cs.mu.Lock()
	list := make([]*child, 0, len(cs.set))
	for c := range cs.set {
		list = append(list, c)
	}
	clear(cs.set)
	cs.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range list {
		wg.Go(func() { c.stop(grace) })
	}
	wg.Wait()
}

func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// exitError describes how c ended, with the tail of its log.
func (c *child) exitError() error {
	return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", c.name, c.waitErr, c.logPath, logTail(c.logPath, 20))
}

// logTail returns the last n lines of a log file, indented, for error messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (" + err.Error() + ")"
	}
	defer f.Close()
	const maxTail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		_, _ = f.Seek(st.Size()-maxTail, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, maxTail))
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "    (empty)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// Readiness polling (start-to-listening).
const (
	pollEvery   = 2 * time.Millisecond
	pollTimeout = 5 * time.Second
)

// waitListening polls addr until a GET /api/auth/check gets any HTTP
// response, and returns the time from c's exec to that response.
func waitListening(ctx context.Context, c *child, addr string) (time.Duration, error) {
	return waitAnswer(ctx, c, addr, rawRequest("GET", "/api/auth/check", addr, nil, nil), pollTimeout)
}

// waitAnswer polls addr with req until it gets any HTTP response, and
// returns the time from c's exec to that response. It gives up timeout
// after the exec.
func waitAnswer(ctx context.Context, c *child, addr string, req []byte, timeout time.Duration) (time.Duration, error) {
	giveUp := c.started.Add(timeout)
	for attempt := 0; attempt < int(timeout/pollEvery)+1; attempt++ {
		if _, err := probe(addr, req, giveUp); err == nil {
			return time.Since(c.started), nil
		}
		if c.exited() {
			return 0, c.exitError()
		}
		if time.Now().After(giveUp) {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
	return 0, fmt.Errorf("%s not answering on %s after %v; last lines of %s:\n%s",
		c.name, addr, timeout, c.logPath, logTail(c.logPath, 20))
}

// probe sends one request on a fresh connection and returns the status of
// the response.
func probe(addr string, req []byte, deadline time.Time) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, err
	}
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	resp, err := newRespReader(conn).read()
	return resp.Status, err
}

// readVmRSS returns the resident set size of process pid in bytes.
func readVmRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseVmRSS(io.LimitReader(f, 64<<10))
}

// parseVmRSS reads the "VmRSS:   1234 kB" line of a /proc/PID/status file.
func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line")
}
