package h264

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/internal/backoff"
)

// Defaults of the Pipeline's Config.
const (
	// DefaultShutdownDelay keeps an encoder this long after its last
	// subscriber left: a page reloaded finds it running.
	DefaultShutdownDelay = 10 * time.Second
	// DefaultKeyInterval is the most time between two key units,
	// whatever the GOP: a peer that lost a key unit and whose request
	// for another was lost too sees a picture again within it.
	DefaultKeyInterval = 5 * time.Second
	// DefaultBitrate and DefaultGOP are the settings until SetSettings:
	// kvmd's default bitrate on a Pi 4 (configs/kvmd/main/v2-hdmi-rpi4.yaml:
	// 5000) and a key unit every two seconds at 30 frames a second.
	DefaultBitrate = 5000
	DefaultGOP     = 60
)

// Limits of the settings: kvmd's (kvmd/validators/kvm.py:
// valid_stream_h264_bitrate, valid_stream_h264_gop).
const (
	MinBitrate, MaxBitrate = 25, 20000
	MinGOP, MaxGOP         = 0, 60
)

// The restart after an encoder or its source failed is the streamer's
// (internal/backoff): 1 s, doubled at each failure that follows within
// 30 s of the start, up to 30 s.
const (
	// keyMinInterval is the least time between two key frames asked of
	// the encoder: a burst of requests (peers joining, a browser's
	// picture-loss reports) makes one key frame, and a client too slow
	// for key frames does not make one of every picture.
	keyMinInterval = 500 * time.Millisecond
	// subQueue is how many units wait for a slow subscriber before it
	// loses units and waits for a key unit.
	subQueue = 30
)

// Config is what New needs; zero values take the defaults.
type Config struct {
	// Opener opens the encoders.
	Opener Opener
	// Source gives the pictures.
	Source Source
	// Bitrate and GOP are the settings until SetSettings.
	Bitrate, GOP int
	// FPS is the frame rate the source is expected to give.
	FPS int

	ShutdownDelay, KeyInterval time.Duration
	// Clock runs the shutdown delay and the restart backoff.
	Clock clockwork.Clock
	Log   *slog.Logger
	// Changed is called (it must not block) when the status changes:
	// an encoder starts or ends, a failure, the settings.
	Changed func()
}

// Pipeline runs the encoder for its subscribers. Create it with New; Run
// runs it.
type Pipeline struct {
	cfg  Config
	log  *slog.Logger
	kick chan struct{}

	mu         sync.Mutex
	subs       map[*Sub]struct{}
	settings   Settings // Bitrate and GOP
	gen        int      // bumped by SetSettings
	keyWanted  bool
	lastKey    time.Time // the last key unit out
	lastForced time.Time // the last key frame asked of the encoder
	retry      bool      // a subscriber came while the last start found no encoder
	status     Status
	window     rateWindow
}

// Status is what the pipeline is doing, for the streamer's state.
type Status struct {
	// Encoder names the encoder kind (Opener.Name); Hardware says it
	// is the board's.
	Encoder  string
	Hardware bool
	// Running says an encoder runs now; Width and Height are its
	// pictures' size, Online whether its last picture was of a signal.
	Running       bool
	Width, Height int
	Online        bool
	// FPS and Bitrate (kbit/s) are what went out in the last second.
	FPS, Bitrate int
	// Settings are the settings encoders open with.
	Settings Settings
	// Subscribers counts the clients taking the units.
	Subscribers int
	// Err is why no encoder runs: the last failure, nil once one runs
	// again. Unavailable says it is one no retry mends (no ffmpeg).
	Err         error
	Unavailable bool
}

// New returns a pipeline for cfg.
func New(cfg Config) *Pipeline {
	if cfg.ShutdownDelay <= 0 {
		cfg.ShutdownDelay = DefaultShutdownDelay
	}
	if cfg.KeyInterval <= 0 {
		cfg.KeyInterval = DefaultKeyInterval
	}
	if cfg.Bitrate == 0 {
		cfg.Bitrate = DefaultBitrate
	}
	if cfg.FPS <= 0 {
		cfg.FPS = 30
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	p := &Pipeline{
		cfg: cfg, log: cfg.Log, kick: make(chan struct{}, 1), subs: map[*Sub]struct{}{},
		settings: Settings{Bitrate: cfg.Bitrate, GOP: cfg.GOP, FPS: cfg.FPS},
	}
	p.status.Encoder, p.status.Hardware = cfg.Opener.Name(), cfg.Opener.Hardware()
	return p
}

func (p *Pipeline) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Sub is a subscriber: it receives every unit from the first key unit
// on. One that falls behind by more than its queue loses units until the
// next key unit, which it asks for.
type Sub struct {
	p *Pipeline
	c chan Unit
	// waitKey: drop units until a key unit (under p.mu).
	waitKey bool
	lost    int
	once    sync.Once
}

// C is the subscriber's units.
func (s *Sub) C() <-chan Unit { return s.c }

// RequestKey asks for a key unit: a WebRTC peer's picture-loss report, a
// Direct H.264 client's key request.
func (s *Sub) RequestKey() { s.p.RequestKey() }

// Lost counts the units the subscriber lost for being slow.
func (s *Sub) Lost() int {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.lost
}

// Close ends the subscription; the encoder stops after the shutdown
// delay when it was the last.
func (s *Sub) Close() {
	s.once.Do(func() {
		s.p.mu.Lock()
		delete(s.p.subs, s)
		s.p.status.Subscribers = len(s.p.subs)
		s.p.mu.Unlock()
		s.p.wake()
		s.p.cfg.Changed()
	})
}

// Subscribe adds a subscriber, starting the encoder if none runs. Close
// it when done.
func (p *Pipeline) Subscribe() *Sub {
	s := &Sub{p: p, c: make(chan Unit, subQueue), waitKey: true}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.status.Subscribers = len(p.subs)
	p.keyWanted = true
	p.retry = true
	p.mu.Unlock()
	p.wake()
	p.cfg.Changed()
	return s
}

// RequestKey asks the encoder for a key unit, at most one every
// keyMinInterval.
func (p *Pipeline) RequestKey() {
	p.mu.Lock()
	p.keyWanted = true
	p.mu.Unlock()
}

// SetSettings changes the bitrate and GOP: a running encoder is replaced
// by one with the new settings at the next picture.
func (p *Pipeline) SetSettings(bitrate, gop int) {
	p.mu.Lock()
	changed := p.settings.Bitrate != bitrate || p.settings.GOP != gop
	p.settings.Bitrate, p.settings.GOP = bitrate, gop
	if changed {
		p.gen++
	}
	p.mu.Unlock()
	if changed {
		p.log.Info("H.264 settings changed", "bitrate_kbps", bitrate, "gop", gop)
		p.cfg.Changed()
	}
}

// Unavailable is why no encoder can run here (no ffmpeg, no device:
// an error wrapping ErrUnavailable), as the last start found; nil when
// one can, or none was tried yet.
func (p *Pipeline) Unavailable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status.Unavailable {
		return p.status.Err
	}
	return nil
}

// Status returns what the pipeline is doing.
func (p *Pipeline) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.status
	st.Settings = p.settings
	st.FPS, st.Bitrate = p.window.rates(p.cfg.Clock.Now())
	return st
}

func (p *Pipeline) setStatus(f func(*Status)) {
	p.mu.Lock()
	f(&p.status)
	p.mu.Unlock()
	p.cfg.Changed()
}

// Run runs encoders while there are subscribers, until ctx ends.
func (p *Pipeline) Run(ctx context.Context) {
	var (
		sess         *session
		stopT, waitT backoff.Timer
		restarts     backoff.Backoff
	)
	defer func() {
		stopT.Stop()
		waitT.Stop()
		if sess != nil {
			sess.stop()
		}
	}()
	for {
		p.mu.Lock()
		want := len(p.subs) > 0
		retry := p.retry
		p.retry = false
		unavailable := p.status.Unavailable
		p.mu.Unlock()
		if want && stopT.Set() {
			stopT.Stop()
		}
		if retry && unavailable && sess == nil {
			waitT.Stop() // a new subscriber looks again at once
		}
		if want && sess == nil && !waitT.Set() {
			sess = p.start(ctx)
		}
		if !want && sess != nil && !stopT.Set() {
			stopT.Start(p.cfg.Clock, p.cfg.ShutdownDelay)
		}
		if !want && sess == nil {
			waitT.Stop()
			restarts.Reset()
		}
		var ended <-chan struct{}
		if sess != nil {
			ended = sess.done
		}
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-stopT.C():
			stopT.Fired()
			p.mu.Lock()
			want = len(p.subs) > 0
			p.mu.Unlock()
			if !want && sess != nil {
				p.log.Info("no H.264 clients: stopping the encoder")
				sess.stop()
				sess = nil
				restarts.Reset()
			}
		case <-waitT.C():
			waitT.Fired()
		case <-ended:
			ran := p.cfg.Clock.Since(sess.started)
			d := restarts.Ended(ran)
			err := sess.err
			sess = nil
			stopT.Stop()
			p.log.Warn("H.264 encoding stopped", "err", err, "ran", ran.Round(time.Millisecond).String(), "retry_in", d.String())
			unavailable := errors.Is(err, ErrUnavailable)
			p.setStatus(func(s *Status) { s.Running, s.Err, s.Unavailable = false, err, unavailable })
			waitT.Start(p.cfg.Clock, d)
		}
	}
}

// session is one run: the source's stream and the encoders opened for
// it, one at a time.
type session struct {
	p       *Pipeline
	cancel  context.CancelFunc
	done    chan struct{}
	err     error
	started time.Time
}

func (p *Pipeline) start(ctx context.Context) *session {
	ctx, cancel := context.WithCancel(ctx)
	s := &session{p: p, cancel: cancel, done: make(chan struct{}), started: p.cfg.Clock.Now()}
	go func() {
		defer close(s.done)
		s.err = s.run(ctx)
	}()
	return s
}

// stop ends the session and waits for its end: no encoder outlives it.
func (s *session) stop() {
	s.cancel()
	<-s.done
	s.p.setStatus(func(st *Status) { st.Running = false })
}

// errSourceEnded is a source whose stream ended (ustreamer restarted).
var errSourceEnded = errors.New("h264: the picture stream ended")

// run reads the source and encodes its pictures until ctx ends or
// something fails.
func (s *session) run(ctx context.Context) error {
	p := s.p
	if err := p.cfg.Opener.Check(ctx); err != nil {
		return err
	}
	pics, err := p.cfg.Source.Open(ctx)
	if err != nil {
		return fmt.Errorf("h264: opening the pictures: %w", err)
	}
	// The newest picture, waiting for the encoder: one that comes while
	// the encoder is busy replaces it.
	latest := make(chan Frame, 1)
	readErr := make(chan error, 1)
	go func() {
		for {
			f, err := pics.Next()
			if err != nil {
				readErr <- err
				return
			}
			select {
			case latest <- f:
			default:
				select {
				case <-latest:
				default:
				}
				latest <- f
			}
		}
	}()
	defer func() {
		pics.Close() // ends the reader
	}()

	var enc *encoderRun
	defer func() {
		if enc != nil {
			enc.close()
		}
	}()
	for {
		var encEnded <-chan struct{}
		if enc != nil {
			encEnded = enc.done
		}
		var f Frame
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", errSourceEnded, err)
		case <-encEnded:
			return enc.err()
		case f = <-latest:
		}
		p.mu.Lock()
		settings, gen := p.settings, p.gen
		p.mu.Unlock()
		settings.Width, settings.Height, settings.Format = f.Width, f.Height, f.Format
		if enc != nil && (enc.settings != settings || enc.gen != gen) {
			p.log.Info("H.264 encoder replaced", "size", fmt.Sprintf("%dx%d", f.Width, f.Height), "bitrate_kbps", settings.Bitrate, "gop", settings.GOP)
			enc.close()
			enc = nil
		}
		if enc == nil {
			if !slices.Contains(p.cfg.Opener.Formats(), f.Format) {
				return Unavailable(fmt.Sprintf("%s takes no %v pictures", p.cfg.Opener.Name(), f.Format), nil)
			}
			e, err := p.cfg.Opener.Open(ctx, settings)
			if err != nil {
				return err
			}
			enc = p.runEncoder(e, settings, gen)
			p.setStatus(func(st *Status) {
				st.Running, st.Err, st.Unavailable = true, nil, false
				st.Width, st.Height = f.Width, f.Height
			})
		}
		if p.wantKey() {
			enc.e.ForceKey()
		}
		if err := enc.e.Encode(f); err != nil {
			<-enc.done
			if e := enc.e.Err(); e != nil {
				return e // why it ended, rather than the write that found it
			}
			return err
		}
		p.mu.Lock()
		online := p.status.Online != f.Online
		p.status.Online = f.Online
		p.mu.Unlock()
		if online {
			p.cfg.Changed()
		}
	}
}

// wantKey says whether the next picture should be a key frame: one was
// asked for and none was forced within keyMinInterval, or none came
// within the key interval.
func (p *Pipeline) wantKey() bool {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if (p.keyWanted && now.Sub(p.lastForced) >= keyMinInterval) || (!p.lastKey.IsZero() && now.Sub(p.lastKey) >= p.cfg.KeyInterval && now.Sub(p.lastForced) >= p.cfg.KeyInterval) {
		p.keyWanted = false
		p.lastForced = now
		return true
	}
	return false
}

// encoderRun is an encoder and the goroutine handing its units out.
type encoderRun struct {
	e        Encoder
	settings Settings
	gen      int
	done     chan struct{} // its units ended
}

func (r *encoderRun) err() error {
	if err := r.e.Err(); err != nil {
		return err
	}
	return errors.New("h264: the encoder ended")
}

func (r *encoderRun) close() {
	r.e.Close()
	<-r.done
}

func (p *Pipeline) runEncoder(e Encoder, s Settings, gen int) *encoderRun {
	r := &encoderRun{e: e, settings: s, gen: gen, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for u := range e.Units() {
			p.deliver(u)
		}
	}()
	return r
}

// deliver gives u to every subscriber that can take it.
func (p *Pipeline) deliver(u Unit) {
	now := p.cfg.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.window.add(now, len(u.Data))
	if u.Key {
		p.lastKey = now
		p.keyWanted = false
	}
	for s := range p.subs {
		if s.waitKey && !u.Key {
			continue
		}
		select {
		case s.c <- u:
			s.waitKey = false
		default:
			// Too slow: what it holds is the past; it starts again at
			// the next key unit.
			s.lost++
			s.waitKey = true
			p.keyWanted = true
		}
	}
}

// rateWindow counts the units and bytes of the last second.
type rateWindow struct {
	sec         time.Time
	units, size int
	lastUnits   int
	lastSize    int
}

func (w *rateWindow) add(now time.Time, n int) {
	w.roll(now)
	w.units++
	w.size += n
}

func (w *rateWindow) roll(now time.Time) {
	s := now.Truncate(time.Second)
	if s.Equal(w.sec) {
		return
	}
	if s.Sub(w.sec) == time.Second {
		w.lastUnits, w.lastSize = w.units, w.size
	} else {
		w.lastUnits, w.lastSize = 0, 0
	}
	w.sec, w.units, w.size = s, 0, 0
}

// rates are the units and kbit/s of the last whole second.
func (w *rateWindow) rates(now time.Time) (fps, kbps int) {
	w.roll(now)
	return w.lastUnits, w.lastSize * 8 / 1000
}
