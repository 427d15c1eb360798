package streamer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/h264"
	"kvmd/hw"
	"kvmd/internal/backoff"
	"kvmd/subsystem"
)

// Defaults of Config's durations. The delays are kvmd's
// (kvmd/apps/_scheme.py: reset_delay 1, shutdown_delay 10, state_poll 1,
// timeout 2, snapshot_timeout 5).
const (
	DefaultShutdownDelay   = 10 * time.Second
	DefaultResetDelay      = time.Second
	DefaultStatePoll       = time.Second
	DefaultRequestTimeout  = 2 * time.Second
	DefaultSnapshotTimeout = 5 * time.Second
	// DefaultStartTimeout bounds how long a client waits for a stopped
	// streamer to start and open its socket: ustreamer does it in tens of
	// milliseconds on a Pi, a second or two under emulation.
	DefaultStartTimeout = 15 * time.Second
	// SocketName is the streamer's socket in Config.Dir.
	SocketName = "ustreamer.sock"
)

// The restart backoff after the streamer died is package backoff's: 1 s,
// doubled at each death that follows within backoff.Stable of its start,
// up to backoff.Max.
const (
	// killAfter is how long a streamer asked to stop (SIGTERM) has before
	// it is killed. It is real time, whatever the clock: it waits for a
	// real process.
	killAfter = 3 * time.Second
	// readyPoll is how often a starting streamer's socket is tried.
	readyPoll = 20 * time.Millisecond
)

// Errors of the streamer's operations.
var (
	// ErrNotRunning means the streamer did not come up in time to answer.
	ErrNotRunning = errors.New("streamer: the streamer is not running")
	// ErrOffline means the picture is not of a signal: no signal, or the
	// streamer's placeholder.
	ErrOffline = errors.New("streamer: no signal: the picture is offline")
	// ErrNoSnapshot means load=1 found no saved snapshot.
	ErrNoSnapshot = errors.New("streamer: no saved snapshot")
	// ErrExited means the streamer ended on its own.
	ErrExited = errors.New("streamer: ustreamer exited")
)

// Config is what New needs; zero durations take the defaults.
type Config struct {
	// Launcher starts the streamer (Exec{Path: "ustreamer"} on a device).
	Launcher Launcher
	// Dir is the directory of the streamer's socket, which only the
	// daemon's user may enter. The socket (SocketName) is the Streamer's:
	// it makes it anew for each streamer and removes it when Run ends;
	// the directory is the caller's.
	Dir string
	// Video is the daemon's own reading of the capture (Machine on a
	// device): the capture device, found at each start, and its signal.
	// Nil: no capture device (ErrNoCapture), the signal not known.
	Video Video

	// The params' defaults and limits (kvmd's streamer section); zero
	// takes kvmd's defaults, and Resolutions DongleResolutions.
	Quality                      int
	DesiredFPS                   int
	DesiredFPSMin, DesiredFPSMax int
	Resolution                   string
	Resolutions                  []string
	// ExtraArgs go after the options Args chooses (kvmd's cmd_append).
	ExtraArgs []string
	// Forever keeps the streamer running without clients (kvmd's
	// streamer.forever).
	Forever bool
	// H264, when set, is the H.264 encoding of the picture: the state's
	// features.h264, its params h264_bitrate and h264_gop (from
	// H264Bitrate, 0 for h264.DefaultBitrate, and H264GOP until
	// set_params changes them), and what it is doing.
	H264                 H264
	H264Bitrate, H264GOP int

	ShutdownDelay, ResetDelay, StatePoll time.Duration
	StartTimeout, RequestTimeout         time.Duration
	SnapshotTimeout                      time.Duration
	// Clock runs the delays: the shutdown delay, the reset delay, the
	// restart backoff and the state poll. Nil: the real clock.
	Clock clockwork.Clock
	Log   *slog.Logger
}

// Streamer runs ustreamer on demand and answers for it. Create it with
// New; Run runs it.
type Streamer struct {
	cfg  Config
	sock string
	hc   *http.Client // to the streamer's socket
	log  *slog.Logger
	kick chan struct{} // wakes Run
	note chan struct{} // wakes the state watcher

	mu       sync.Mutex
	refs     int // holders of Acquire
	viewers  int // WebSocket stream clients
	params   Params
	cur      *instance
	changed  chan struct{} // closed and replaced when cur or lastErr change
	lastErr  error         // why the last start failed, or how the last streamer ended
	attempts int           // start attempts so far
	retry    bool          // a new client came while a start failed: try again now
	resetReq bool
	program  *Program
	capture  Capture // the last one found
	saved    *Snapshot
	last     map[string]any // the last state published
	preview  previewCache

	// The changes of the "streamer" and "clients" subsystems.
	changes subsystem.Sink[map[string]any]
	clients subsystem.Sink[Clients]
}

// instance is one run of the streamer.
type instance struct {
	proc    Process
	started time.Time
	ready   chan struct{} // closed when its socket accepts connections
	exited  chan struct{} // closed when it ended; err is then set
	err     error
	// leaving says the daemon decided to stop it (a reset, new params,
	// the shutdown delay over, the daemon's end): it serves on while it
	// ends, but no client that comes is given it. Guarded by Streamer.mu.
	leaving bool
}

// New returns a streamer for cfg.
func New(cfg Config) *Streamer {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.ShutdownDelay, DefaultShutdownDelay)
	def(&cfg.ResetDelay, DefaultResetDelay)
	def(&cfg.StatePoll, DefaultStatePoll)
	def(&cfg.StartTimeout, DefaultStartTimeout)
	def(&cfg.RequestTimeout, DefaultRequestTimeout)
	def(&cfg.SnapshotTimeout, DefaultSnapshotTimeout)
	if cfg.Quality == 0 {
		cfg.Quality = DefaultQuality
	}
	if cfg.DesiredFPS == 0 && cfg.DesiredFPSMax == 0 {
		cfg.DesiredFPS = DefaultDesiredFPS
	}
	if cfg.DesiredFPSMax == 0 {
		cfg.DesiredFPSMin, cfg.DesiredFPSMax = DefaultDesiredFPSMin, DefaultDesiredFPSMax
	}
	if len(cfg.Resolutions) == 0 {
		cfg.Resolutions = DongleResolutions
	}
	if cfg.Resolution == "" {
		cfg.Resolution = cfg.Resolutions[0]
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Video == nil {
		cfg.Video = noVideo{}
	}
	if cfg.H264Bitrate == 0 {
		cfg.H264Bitrate = h264.DefaultBitrate
	}

	s := &Streamer{
		cfg:     cfg,
		sock:    filepath.Join(cfg.Dir, SocketName),
		log:     cfg.Log,
		kick:    make(chan struct{}, 1),
		note:    make(chan struct{}, 1),
		changed: make(chan struct{}),
		params: Params{Quality: cfg.Quality, DesiredFPS: cfg.DesiredFPS, Resolution: cfg.Resolution,
			H264Bitrate: cfg.H264Bitrate, H264GOP: cfg.H264GOP},
	}
	if cfg.H264 != nil {
		cfg.H264.SetSettings(cfg.H264Bitrate, cfg.H264GOP)
	}
	s.hc = &http.Client{Transport: &http.Transport{
		DialContext: s.dial,
		// One connection per request: a restarted streamer leaves no
		// pooled connection to the old one behind.
		DisableKeepAlives: true,
		// ustreamer sends a stream's headers with its first frame, within
		// a second even of a placeholder.
		ResponseHeaderTimeout: cfg.StartTimeout,
		DisableCompression:    true,
	}}
	return s
}

// H264 is the H.264 encoding the state reports (Config.H264).
type H264 interface {
	// SetSettings gives the encoder new settings (set_params).
	SetSettings(bitrate, gop int)
	// Status is what the encoding is doing.
	Status() h264.Status
	// State is this daemon's "h264" key of the state: the encoder and
	// its clients (package httpd's shape).
	State() any
}

// Changed says the H.264 encoding's status changed: the state watcher
// looks at once rather than at its next poll.
func (s *Streamer) Changed() { s.wake(s.note) }

// dial connects to the streamer's socket, whatever the address asked.
func (s *Streamer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", s.sock)
}

// Socket is the path of the streamer's unix socket.
func (s *Streamer) Socket() string { return s.sock }

func (s *Streamer) wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Acquire says a client needs the streamer: it starts, if it is not
// running, and stays until every Acquire has been released and the
// shutdown delay has passed with none.
func (s *Streamer) Acquire() (release func()) {
	s.mu.Lock()
	s.refs++
	s.retry = true
	s.mu.Unlock()
	s.wake(s.kick)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.refs--
			s.mu.Unlock()
			s.wake(s.kick)
		})
	}
}

// AddViewer counts a WebSocket client that asked for the stream (kvmd's
// stream=1): it holds the streamer as Acquire does, and the "clients"
// subsystem's event carries the count.
func (s *Streamer) AddViewer() (remove func()) {
	release := s.Acquire()
	s.mu.Lock()
	s.viewers++
	n := s.viewers
	s.mu.Unlock()
	s.clients.Send(Clients{Count: n})
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.viewers--
			n := s.viewers
			s.mu.Unlock()
			release()
			s.clients.Send(Clients{Count: n})
		})
	}
}

// Viewers is the count of WebSocket stream clients.
func (s *Streamer) Viewers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.viewers
}

// Reset restarts the streamer if it runs (kvmd's /streamer/reset): it
// stops at once and starts again after the reset delay. A client that
// comes once Reset has returned waits for the new one.
func (s *Streamer) Reset() {
	s.mu.Lock()
	s.resetReq = true
	s.mu.Unlock()
	s.wake(s.kick)
}

// Running reports the process id of the running streamer, 0 when none.
func (s *Streamer) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return 0
	}
	select {
	case <-s.cur.exited:
		return 0
	default:
		return s.cur.proc.Pid()
	}
}

// setCur records the running instance, or none and why.
func (s *Streamer) setCur(inst *instance, err error) {
	s.mu.Lock()
	s.cur, s.lastErr = inst, err
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.wake(s.note)
}

// usable says whether a client that comes now may be given inst: it runs
// and the daemon has not decided to stop it, nor been asked to (a reset
// Run has not taken yet). Called with s.mu held.
func (s *Streamer) usable(inst *instance) bool {
	return inst != nil && !inst.leaving && !s.resetReq
}

// leaveIfUnwanted marks inst leaving if no client wants the streamer, in
// one step with the look at the clients: one that comes after it waits
// for the next streamer, rather than being given this one as it stops.
func (s *Streamer) leaveIfUnwanted(inst *instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs > 0 || s.cfg.Forever {
		return false
	}
	inst.leaving = true
	return true
}

// Run runs the streamer while it is wanted, and watches its state for the
// "streamer" subsystem's changes, until ctx ends; then it stops the
// streamer and returns. It says at once whether there is a streamer
// program to run.
func (s *Streamer) Run(ctx context.Context) {
	if p, err := s.cfg.Launcher.Probe(ctx); err != nil {
		s.log.Warn("no video streamer: the streamer endpoints answer 503 until one is installed", "err", err)
	} else {
		s.log.Info("video streamer", "version", p.Version, "socket", s.sock)
	}
	watchDone := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	go func() { defer close(watchDone); s.watch(wctx) }()
	defer func() { stopWatch(); <-watchDone }()

	var (
		cur          *instance
		stopT, waitT backoff.Timer
		restarts     backoff.Backoff
	)
	defer func() {
		stopT.Stop()
		waitT.Stop()
		if cur != nil {
			s.stop(cur, "the daemon is stopping")
			s.setCur(nil, nil)
		}
		// The socket is the streamer's alone: removed here before
		// each start (start), and at the end.
		if err := os.Remove(s.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("the streamer's socket could not be removed", "socket", s.sock, "err", err)
		}
	}()
	for {
		s.mu.Lock()
		want := s.refs > 0 || s.cfg.Forever
		reset, retry := s.resetReq, s.retry
		s.resetReq, s.retry = false, false
		if reset && cur != nil {
			// Marked with the request taken, so that no client is given
			// it between the two.
			cur.leaving = true
		}
		permanent := errors.Is(s.lastErr, ErrNotInstalled) || errors.Is(s.lastErr, ErrNoCapture)
		s.mu.Unlock()

		if reset && cur != nil {
			s.stop(cur, "reset")
			cur = nil
			s.setCur(nil, nil)
			stopT.Stop()
			waitT.Stop()
			waitT.Start(s.cfg.Clock, s.cfg.ResetDelay)
		}
		if want && stopT.Set() {
			stopT.Stop()
			s.log.Info("streamer stop cancelled: a client came")
		}
		if retry && permanent && cur == nil {
			// A client now, where the last start found no program or
			// no capture device: look again at once.
			waitT.Stop()
		}
		if want && cur == nil && !waitT.Set() {
			inst, err := s.start(ctx)
			if err != nil {
				d := restarts.Ended(0)
				s.log.Warn("streamer not started", "err", err, "retry_in", d.String())
				s.setCur(nil, err)
				waitT.Start(s.cfg.Clock, d)
			} else {
				cur = inst
				s.setCur(inst, nil)
			}
		}
		if !want && cur != nil && !stopT.Set() {
			s.log.Info("no streamer clients: stopping the streamer after the shutdown delay", "delay", s.cfg.ShutdownDelay.String())
			stopT.Start(s.cfg.Clock, s.cfg.ShutdownDelay)
		}
		if !want && cur == nil {
			// Nobody waits for a restart: none until a client comes.
			waitT.Stop()
			restarts.Reset()
		}

		var exited <-chan struct{}
		if cur != nil {
			exited = cur.exited
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-stopT.C():
			stopT.Fired()
			if cur != nil && s.leaveIfUnwanted(cur) {
				s.stop(cur, "no clients")
				cur = nil
				s.setCur(nil, nil)
				restarts.Reset()
			}
		case <-waitT.C():
			waitT.Fired()
		case <-exited:
			ran := s.cfg.Clock.Since(cur.started)
			d := restarts.Ended(ran)
			s.log.Warn("streamer exited", "pid", cur.proc.Pid(), "err", cur.err, "ran", ran.Round(time.Millisecond).String(), "restart_in", d.String())
			err := fmt.Errorf("%w: %v", ErrExited, cur.err)
			cur = nil
			s.setCur(nil, err)
			stopT.Stop()
			waitT.Stop()
			waitT.Start(s.cfg.Clock, d)
		}
	}
}

// start starts a streamer.
func (s *Streamer) start(ctx context.Context) (*instance, error) {
	s.mu.Lock()
	s.attempts++
	prog := s.program
	s.mu.Unlock()
	if prog == nil {
		p, err := s.cfg.Launcher.Probe(ctx)
		if err != nil {
			return nil, err
		}
		s.log.Info("streamer program", "version", p.Version, "features", featureList(p.Features))
		prog = &p
		s.mu.Lock()
		s.program = prog
		s.mu.Unlock()
	}
	c, err := s.cfg.Video.Capture()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.capture = c
	params := s.params
	s.mu.Unlock()
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("streamer: socket directory: %w", err)
	}
	// A socket left by a streamer that was killed would pass the
	// readiness check before the new one listens.
	if err := os.Remove(s.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("streamer: removing the old socket: %w", err)
	}
	args := Args(*prog, c, params, s.sock, s.cfg.ExtraArgs)
	inst := &instance{started: s.cfg.Clock.Now(), ready: make(chan struct{}), exited: make(chan struct{})}
	var pid atomic.Int64
	proc, err := s.cfg.Launcher.Launch(args, func(line string) { s.logLine(int(pid.Load()), line) })
	if err != nil {
		return nil, err
	}
	pid.Store(int64(proc.Pid()))
	inst.proc = proc
	s.log.Info("streamer started", "pid", proc.Pid(), "device", c.Device, "kind", c.Kind, "cmd", strings.Join(args, " "))
	go func() {
		inst.err = proc.Wait()
		close(inst.exited)
		s.wake(s.kick)
	}()
	go s.waitSocket(inst)
	return inst, nil
}

func featureList(f map[string]bool) string {
	var names []string
	for k, on := range f {
		if on {
			names = append(names, "+"+k)
		} else {
			names = append(names, "-"+k)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// waitSocket marks inst ready once its socket accepts a connection.
func (s *Streamer) waitSocket(inst *instance) {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		if c, err := net.DialTimeout("unix", s.sock, time.Second); err == nil {
			c.Close()
			close(inst.ready)
			s.log.Info("streamer ready", "pid", inst.proc.Pid(), "socket", s.sock)
			s.wake(s.note)
			return
		}
		select {
		case <-inst.exited:
			return
		case <-t.C:
		}
	}
}

// stop ends inst and waits for its end: never two streamers at once.
func (s *Streamer) stop(inst *instance, why string) {
	s.mu.Lock()
	inst.leaving = true
	s.mu.Unlock()
	s.log.Info("stopping the streamer", "pid", inst.proc.Pid(), "why", why)
	inst.proc.Stop()
	select {
	case <-inst.exited:
	case <-time.After(killAfter):
		s.log.Warn("the streamer did not stop in time: killing it", "pid", inst.proc.Pid())
		inst.proc.Kill()
		<-inst.exited
	}
}

// logLine logs one line of the streamer's output at its level: ustreamer
// writes "-- LEVEL [uptime thread] -- message" (src/libs/logging.h).
func (s *Streamer) logLine(pid int, line string) {
	level := slog.LevelInfo
	msg := line
	if rest, ok := strings.CutPrefix(line, "-- "); ok {
		name, after, _ := strings.Cut(rest, " ")
		switch name {
		case "ERROR":
			level = slog.LevelError
		case "INFO":
		default: // VERBOSE, DEBUG, PERF
			level = slog.LevelDebug
		}
		if _, m, ok := strings.Cut(after, "] -- "); ok {
			msg = m
		}
	}
	if strings.TrimSpace(msg) == "" || strings.Trim(msg, "=") == "" {
		return // ustreamer's separator lines
	}
	s.log.Log(context.Background(), level, "ustreamer: "+msg, "pid", pid)
}

// waitReady waits until a streamer runs and answers on its socket, for at
// most the start timeout: never one the daemon is stopping. A start that
// found no program or no capture device ends the wait at once with its
// error.
func (s *Streamer) waitReady(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	s.mu.Lock()
	since := s.attempts
	s.mu.Unlock()
	for {
		s.mu.Lock()
		cur, changed, lastErr, attempts := s.cur, s.changed, s.lastErr, s.attempts
		if cur != nil && !s.usable(cur) {
			// Stopping: the next one will do, once Run has
			// replaced it (changed).
			cur = nil
		}
		s.mu.Unlock()
		var ready <-chan struct{}
		if cur != nil {
			ready = cur.ready
		} else if attempts > since && (errors.Is(lastErr, ErrNotInstalled) || errors.Is(lastErr, ErrNoCapture)) {
			return nil, lastErr
		}
		select {
		case <-ready:
			return cur, nil
		case <-changed:
		case <-ctx.Done():
			if lastErr != nil {
				return nil, fmt.Errorf("%w: %w", ErrNotRunning, lastErr)
			}
			return nil, fmt.Errorf("%w (waited %v)", ErrNotRunning, s.cfg.StartTimeout)
		}
	}
}

// signalAbsent says whether the daemon's own reading says the capture
// sees nothing showable: no signal, no lock, out of range.
func signalAbsent(v *hw.Video) bool {
	if v == nil {
		return false
	}
	switch v.Status {
	case hw.VideoNoSignal, hw.VideoNoLock, hw.VideoOutOfRange:
		return true
	}
	return false
}
