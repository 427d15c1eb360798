package streamer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"kvmd/internal/procgroup"
)

// ErrNotInstalled means there is no ustreamer to run.
var ErrNotInstalled = errors.New("streamer: ustreamer is not installed")

// Launcher starts the streamer program. Exec runs ustreamer; the demo and
// tests have one that serves generated pictures (streamertest).
type Launcher interface {
	// Probe returns the program's version and features, or an error
	// wrapping ErrNotInstalled when there is none.
	Probe(ctx context.Context) (Program, error)
	// Launch starts the program with args. Each line it prints goes to
	// line, from a goroutine of the launcher's, until it ends.
	Launch(args []string, line func(string)) (Process, error)
}

// Process is a started streamer.
type Process interface {
	// Pid is its process id (0 for one that is not a process).
	Pid() int
	// Stop asks it to end (SIGTERM).
	Stop()
	// Kill ends it and whatever it started, at once (SIGKILL).
	Kill()
	// Wait waits for its end and returns how it ended; it is called once.
	Wait() error
}

// Prober asks the streamer program of a Launcher what it is, for
// /api/info's system.streamer (info.StreamerProgram).
type Prober struct {
	Launcher Launcher
}

// Program returns the program's version and features.
func (p Prober) Program(ctx context.Context) (string, map[string]bool, error) {
	prog, err := p.Launcher.Probe(ctx)
	return prog.Version, prog.Features, err
}

// Exec runs the ustreamer at Path (a path, or a name looked up in PATH).
type Exec struct {
	Path string
}

// Probe runs ustreamer --version and --features.
func (e Exec) Probe(ctx context.Context) (Program, error) {
	path, err := exec.LookPath(e.Path)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return Program{}, fmt.Errorf("%w (%s): %w", ErrNotInstalled, e.Path, err)
		}
		return Program{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	run := func(arg string) (string, error) {
		cmd := exec.CommandContext(ctx, path, arg)
		cmd.SysProcAttr = procgroup.Attr()
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("streamer: %s %s: %w", path, arg, err)
		}
		return string(out), nil
	}
	v, err := run("--version")
	if err != nil {
		return Program{}, err
	}
	f, err := run("--features")
	if err != nil {
		return Program{}, err
	}
	return parseProgram(v, f)
}

// Launch starts ustreamer in a process group of its own, killed by the
// kernel should the daemon die first; its standard output and error both
// go to line.
func (e Exec) Launch(args []string, line func(string)) (Process, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.Path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = procgroup.Attr()
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotInstalled, err)
		}
		return nil, err
	}
	p := &execProcess{cmd: cmd, out: make(chan struct{})}
	go func() {
		defer close(p.out)
		defer r.Close()
		procgroup.Lines(r, line)
	}()
	return p, nil
}

type execProcess struct {
	cmd *exec.Cmd
	out chan struct{} // closed when its output ended
}

func (p *execProcess) Pid() int { return p.cmd.Process.Pid }
func (p *execProcess) Stop()    { p.cmd.Process.Signal(syscall.SIGTERM) }
func (p *execProcess) Kill()    { procgroup.Kill(p.cmd.Process) }

// Wait waits for the process, then for the last of its output (for at
// most a second: a grandchild that kept the pipe open must not hold it).
func (p *execProcess) Wait() error {
	err := p.cmd.Wait()
	select {
	case <-p.out:
	case <-time.After(time.Second):
	}
	return err
}
