package imagetest

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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// image is the cached Debian system that rootfs.sh built.
type image struct {
	dir                  string
	base, kernel, initrd string
}

// machine is one qemu-system-aarch64 running the image: its serial
// console (ttyAMA0, what a user sees on a device's serial port) read into
// console, a root shell on the virtio console hvc0, and the guest's port
// 443 forwarded to port on the host's loopback, its port usbredirGuestPort
// to usbredirPort and vncGuestPort to vncPort.
type machine struct {
	cmd          *exec.Cmd
	console      *transcript
	shell        *shell
	port         int
	usbredirPort int
	vncPort      int
	// trace is qemu's trace file (the pl061's output lines).
	trace   string
	started time.Time
	exited  chan struct{}
	waitErr error
}

// machineConfig is how to boot: the kernel's command line beyond the
// root and console, and a host directory shared read-only over virtio-9p
// with the tag kvmd.
type machineConfig struct {
	overlay  string
	cmdline  string
	share    string
	noReboot bool
	// sockDir holds the shell's unix socket (its path must stay short).
	sockDir string
	// log, when set, also gets the console as it comes.
	log string
}

// qemuCPU is the emulated CPU: the Cortex-A53 of a Raspberry Pi 3 and Zero
// 2 W (and the oldest 64-bit Pi), cheap to emulate with TCG.
const qemuCPU = "cortex-a53"

// bootMachine starts qemu; the caller must stop it.
func bootMachine(t *testing.T, img image, cfg machineConfig) *machine {
	t.Helper()
	port, usbredirPort, vncPort := freePort(t), freePort(t), freePort(t)
	args := []string{
		"-M", "virt", "-cpu", qemuCPU, "-smp", "2", "-m", "1024",
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
		"-kernel", img.kernel, "-initrd", img.initrd,
		"-append", "root=/dev/vda rw console=ttyAMA0 panic=-1 " + cfg.cmdline,
		"-drive", "if=none,id=root,format=qcow2,file=" + cfg.overlay,
		"-device", "virtio-blk-device,drive=root",
		"-netdev", fmt.Sprintf("user,id=net,hostfwd=tcp:127.0.0.1:%d-:443,hostfwd=tcp:127.0.0.1:%d-:%d,hostfwd=tcp:127.0.0.1:%d-:%d",
			port, usbredirPort, usbredirGuestPort, vncPort, vncGuestPort),
		"-device", "virtio-net-device,netdev=net",
		"-device", "virtio-rng-device",
		"-serial", "stdio",
		"-chardev", "socket,id=shell,server=on,wait=off,path=" + filepath.Join(cfg.sockDir, "shell"),
		"-device", "virtio-serial-device",
		"-device", "virtconsole,chardev=shell",
		// The far side of the GPIO chip: qemu's trace of the pl061's
		// output lines (testRedfish), with the time of each.
		"-trace", "pl061_set_output", "-D", filepath.Join(cfg.sockDir, "qemu-trace.log"), "-msg", "timestamp=on",
	}
	if cfg.share != "" {
		args = append(args,
			"-fsdev", "local,id=share,security_model=none,readonly=on,path="+cfg.share,
			"-device", "virtio-9p-device,fsdev=share,mount_tag=kvmd")
	}
	if cfg.noReboot {
		args = append(args, "-no-reboot")
	}
	cmd := exec.Command("qemu-system-aarch64", args...)
	cmd.Stdin = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	m := &machine{cmd: cmd, console: newTranscript(), port: port, usbredirPort: usbredirPort, vncPort: vncPort, exited: make(chan struct{}),
		trace: filepath.Join(cfg.sockDir, "qemu-trace.log")}
	m.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	var console io.Writer = m.console
	var logFile *os.File
	if cfg.log != "" {
		if logFile, err = os.Create(cfg.log); err != nil {
			t.Fatal(err)
		}
		console = io.MultiWriter(m.console, logFile)
	}
	go func() {
		io.Copy(console, out)
		if logFile != nil {
			logFile.Close()
		}
		m.waitErr = cmd.Wait()
		if stderr.Len() > 0 {
			m.console.Write([]byte("\n[qemu stderr] " + stderr.String()))
		}
		m.console.close()
		close(m.exited)
	}()
	m.shell = &shell{path: filepath.Join(cfg.sockDir, "shell")}
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			t.Logf("serial console (last 6000 bytes):\n%s", tail(m.console.String(), 6000))
		}
	})
	return m
}

func (m *machine) kill() {
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Kill()
		<-m.exited
	}
	m.shell.close()
}

// wait waits for qemu to exit on its own.
func (m *machine) wait(d time.Duration) error {
	select {
	case <-m.exited:
		return m.waitErr
	case <-time.After(d):
		return fmt.Errorf("qemu still running after %v", d)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// transcript is everything the serial console printed, searchable while
// it grows.
type transcript struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	grew   chan struct{} // closed and replaced on every write
	closed bool
}

func newTranscript() *transcript { return &transcript{grew: make(chan struct{})} }

func (c *transcript) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(bytes.ReplaceAll(p, []byte("\r"), nil))
	close(c.grew)
	c.grew = make(chan struct{})
	return len(p), nil
}

func (c *transcript) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	close(c.grew)
	c.grew = make(chan struct{})
}

func (c *transcript) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Len is a mark: expect from a mark looks only at what came after it.
func (c *transcript) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Len()
}

// expect waits until what the console printed after the mark from matches
// re and returns the submatches.
func (c *transcript) expect(from int, re *regexp.Regexp, d time.Duration) ([]string, error) {
	deadline := time.After(d)
	for {
		c.mu.Lock()
		s := c.buf.String()[from:]
		grew, closed := c.grew, c.closed
		c.mu.Unlock()
		if m := re.FindStringSubmatch(s); m != nil {
			return m, nil
		}
		if closed {
			return nil, fmt.Errorf("qemu exited before the console showed %q", re)
		}
		select {
		case <-grew:
		case <-deadline:
			return nil, fmt.Errorf("the console did not show %q within %v", re, d)
		}
	}
}

// shell runs commands in the root shell on hvc0: each command's output
// (stdout and stderr) between two markers, and its exit status.
type shell struct {
	path string
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	seq  int
}

func (s *shell) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// errNoShell is a command whose end marker did not come in time.
var errNoShell = errors.New("no answer from the shell")

// ready waits until the shell answers (after a boot it starts with
// sysinit.target, before most services).
func (s *shell) ready(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		_, _, err := s.runTimeout("stty -echo </dev/tty", 5*time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("root shell on hvc0: %w", err)
		}
		time.Sleep(time.Second)
	}
}

// run runs cmd and returns its output, failing t when the shell does not
// answer.
func (s *shell) run(t *testing.T, cmd string) (string, int) {
	t.Helper()
	out, status, err := s.runTimeout(cmd, 2*time.Minute)
	if err != nil {
		t.Fatalf("guest: %s: %v", cmd, err)
	}
	return out, status
}

// must runs cmd and fails t unless it exits with 0.
func (s *shell) must(t *testing.T, cmd string) string {
	t.Helper()
	out, status := s.run(t, cmd)
	if status != 0 {
		t.Fatalf("guest: %s: exit status %d:\n%s", cmd, status, out)
	}
	return out
}

// runTimeout runs cmd in a subshell (so that exit or cd do not touch the
// shell itself) with markers around its output; the markers are printed
// by printf from its format, so the echoed command line (the tty echoes
// it until ready turns echo off) never matches them.
func (s *shell) runTimeout(cmd string, d time.Duration) (string, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		c, err := net.Dial("unix", s.path)
		if err != nil {
			return "", 0, err
		}
		s.conn, s.r = c, bufio.NewReader(c)
	}
	s.seq++
	n := s.seq
	line := fmt.Sprintf("printf '\\n@@begin %%d@@\\n' %d; ( %s ) </dev/null 2>&1; printf '\\n@@end %%d %%d@@\\n' %d $?\n", n, cmd, n)
	if len(line) > 3500 {
		return "", 0, fmt.Errorf("command too long for the tty's line buffer")
	}
	s.conn.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(s.conn, line); err != nil {
		s.conn.Close()
		s.conn = nil
		return "", 0, err
	}
	begin := fmt.Sprintf("@@begin %d@@", n)
	endPrefix := fmt.Sprintf("@@end %d ", n)
	var out strings.Builder
	in := false
	for {
		l, err := s.r.ReadString('\n')
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				// Leave the connection: a late answer is skipped by the
				// next command's markers.
				return out.String(), 0, fmt.Errorf("%w within %v (output so far: %q)", errNoShell, d, tail(out.String(), 500))
			}
			s.conn.Close()
			s.conn = nil
			return "", 0, err
		}
		l = strings.TrimRight(l, "\r\n")
		switch {
		case !in && strings.HasSuffix(l, begin):
			in = true
		case in && strings.Contains(l, endPrefix):
			i := strings.Index(l, endPrefix)
			out.WriteString(l[:i])
			st, err := strconv.Atoi(strings.TrimSuffix(l[i+len(endPrefix):], "@@"))
			if err != nil {
				return "", 0, fmt.Errorf("bad end marker %q", l)
			}
			return strings.TrimRight(out.String(), "\n"), st, nil
		case in:
			out.WriteString(l + "\n")
		}
	}
}

// waitFor polls cond every step until it holds or d passes.
func waitFor(ctx context.Context, d, step time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(step)
	}
}
