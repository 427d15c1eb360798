// Package ffmpeg is the software H.264 encoder: ffmpeg (Debian's 5.1)
// with libx264, run as a child process for each encoder the pipeline
// opens.
//
// Pictures go to ffmpeg's standard input as a Matroska stream (mkv.go),
// each with a timestamp; the encoded pictures come back on its standard
// output as FLV (flv.go), one tag each, with its key-frame flag. libx264
// runs tuned for latency: no B-frames, no lookahead, one picture out for
// each picture in, as soon as it is encoded (-tune zerolatency).
//
// ffmpeg takes no command while it runs, so a key frame is asked for
// through the timestamps: a picture the daemon wants as a key frame goes
// with an odd number of milliseconds, every other with an even one, and
// ffmpeg's -force_key_frames expression makes an IDR picture of each odd
// one (-forced-idr). The encoder's time base is the input's
// (-enc_time_base -1), so no rounding hides the parity.
package ffmpeg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"kvmd/h264"
	"kvmd/internal/procgroup"
)

// DefaultPreset is libx264's preset: the fastest, which a Raspberry Pi 5
// encodes 1080p at 30 frames a second with.
const DefaultPreset = "ultrafast"

// DefaultCRF is the constant rate factor: the quality aimed at while the
// bitrate stays under Settings.Bitrate. libx264's own default; a desktop
// that barely changes costs little more than its changes.
const DefaultCRF = 23

// stopWait is how long ffmpeg has to end after its input closed before
// it is killed.
const stopWait = 2 * time.Second

// Opener opens ffmpeg encoders.
type Opener struct {
	// Path is the ffmpeg program: a path, or a name looked up in PATH.
	Path string
	// Preset is libx264's preset (DefaultPreset when empty).
	Preset string
	// CRF is libx264's constant rate factor (DefaultCRF when 0).
	CRF int
	// Log receives ffmpeg's own output, a line each, and the starts and
	// ends of the encoders.
	Log *slog.Logger

	probe *probeOnce
}

// probeOnce keeps Probe's answer: ffmpeg with libx264 found, or not
// (ErrUnavailable). A failure to ask (ffmpeg too slow, as on a loaded
// board at boot, or killed) is no answer: the next Probe asks again.
type probeOnce struct {
	mu   sync.Mutex
	done bool
	path string
	err  error
}

// NewOpener returns an Opener of the ffmpeg at path.
func NewOpener(path string, log *slog.Logger) *Opener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Opener{Path: path, Log: log, probe: &probeOnce{}}
}

// Name names the encoder.
func (o *Opener) Name() string { return "libx264 (ffmpeg)" }

// Hardware is false: ffmpeg encodes on the CPU.
func (o *Opener) Hardware() bool { return false }

// Formats are the pictures ffmpeg decodes itself: JPEG first, what the
// streamer gives.
func (o *Opener) Formats() []h264.Format {
	return []h264.Format{h264.JPEG, h264.YUYV, h264.UYVY, h264.NV12, h264.I420}
}

// Check finds ffmpeg and checks that it has libx264 (Probe).
func (o *Opener) Check(ctx context.Context) error {
	_, err := o.Probe(ctx)
	return err
}

// Probe finds ffmpeg and checks that it has libx264, once it has an
// answer: the error wraps h264.ErrUnavailable when it has not, or there
// is no ffmpeg; any other error (ffmpeg could not be asked in time) is
// asked again at the next call.
func (o *Opener) Probe(ctx context.Context) (string, error) {
	if o.probe == nil {
		o.probe = &probeOnce{}
	}
	p := o.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.path, p.err
	}
	path, err := probe(ctx, o.Path)
	if err == nil || errors.Is(err, h264.ErrUnavailable) {
		p.done, p.path, p.err = true, path, err
	}
	return path, err
}

// probeTimeout bounds one asking of ffmpeg for its encoders.
const probeTimeout = 60 * time.Second

func probe(ctx context.Context, name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", h264.Unavailable(fmt.Sprintf("ffmpeg is not installed (%s)", name), err)
	}
	// Debian's ffmpeg loads some sixty libraries: seconds on a board
	// starting up, more than 10 s in the booted test's emulated arm64 on
	// a loaded host.
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-hide_banner", "-encoders")
	cmd.SysProcAttr = procgroup.Attr()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ffmpeg: %s -encoders: %w", path, err)
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "libx264" {
			return path, nil
		}
	}
	return "", h264.Unavailable(path+" has no libx264 encoder", nil)
}

// Args returns ffmpeg's command line (without the program) for an
// encoder of s.
func Args(s h264.Settings, preset string, crf int) []string {
	if preset == "" {
		preset = DefaultPreset
	}
	if crf == 0 {
		crf = DefaultCRF
	}
	rate := strconv.Itoa(s.Bitrate) + "k"
	a := []string{
		"-hide_banner", "-nostdin", "-nostats", "-loglevel", "error",
		// Start at the first picture: no probing beyond the header,
		// which says all there is to know.
		"-probesize", "32", "-analyzeduration", "0",
		// One decoding thread: frame threads would hold pictures back.
		"-threads", "1",
		"-f", "matroska", "-i", "pipe:0",
		"-map", "0:v:0", "-an", "-sn", "-dn",
		// Every picture, as it comes, with its own timestamp.
		// (ffmpeg subtracts the first timestamp from all: it is 0, so
		// that their parity stays.)
		"-fps_mode", "passthrough", "-enc_time_base", "-1",
		"-c:v", "libx264", "-preset", preset, "-tune", "zerolatency",
		// Constrained Baseline: what every WebRTC peer and WebCodecs
		// decoder takes (profile-level-id 42e0xx).
		"-profile:v", "baseline", "-pix_fmt", "yuv420p", "-bf", "0",
		// What the pictures are, said in full in the stream: a JPEG's
		// BT.601 colours at studio range (the conversion to 4:2:0 makes
		// it). With the matrix alone, WebCodecs took the primaries and
		// transfer for BT.709's and drew the colour bars a tenth off.
		"-color_range", "tv", "-colorspace", "smpte170m", "-color_primaries", "smpte170m", "-color_trc", "smpte170m",
		"-crf", strconv.Itoa(crf), "-maxrate", rate, "-bufsize", rate,
		// Key frames only when asked, or every GOP pictures: no scene-cut
		// detection, whose key frames a window opening on a desktop would
		// bring, each a burst of bits.
		"-sc_threshold", "0",
		"-forced-idr", "1", "-force_key_frames", "expr:eq(mod(round(t*1000),2),1)",
	}
	if s.GOP > 0 {
		a = append(a, "-g", strconv.Itoa(s.GOP))
	} else {
		a = append(a, "-x264-params", "keyint=infinite")
	}
	return append(a, "-flush_packets", "1", "-f", "flv", "pipe:1")
}

// Open starts ffmpeg for pictures of s.
func (o *Opener) Open(ctx context.Context, s h264.Settings) (h264.Encoder, error) {
	path, err := o.Probe(ctx)
	if err != nil {
		return nil, err
	}
	if s.Width <= 0 || s.Height <= 0 {
		return nil, fmt.Errorf("ffmpeg: no picture size (%dx%d)", s.Width, s.Height)
	}
	hdr, err := mkvHeader(s.Format, s.Width, s.Height)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	args := Args(s, o.Preset, o.CRF)
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = procgroup.Attr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = ew
	if err := cmd.Start(); err != nil {
		ew.Close()
		er.Close()
		return nil, fmt.Errorf("ffmpeg: %w", err)
	}
	ew.Close()
	e := &encoder{
		s: s, cmd: cmd, in: stdin, log: log.With("pid", cmd.Process.Pid),
		units: make(chan h264.Unit, 1), done: make(chan struct{}), stderrDone: make(chan struct{}),
		times: map[uint32]time.Time{},
	}
	e.log.Info("H.264 encoder started", "encoder", o.Name(), "size", fmt.Sprintf("%dx%d", s.Width, s.Height),
		"input", s.Format.String(), "bitrate_kbps", s.Bitrate, "gop", s.GOP, "cmd", path+" "+strings.Join(args, " "))
	go e.readStderr(er)
	go e.run(stdout)
	if _, err := stdin.Write(hdr); err != nil {
		e.Close()
		return nil, fmt.Errorf("ffmpeg: writing the stream header: %w", err)
	}
	return e, nil
}

// encoder is one ffmpeg.
type encoder struct {
	s   h264.Settings
	cmd *exec.Cmd
	in  io.WriteCloser
	log *slog.Logger

	units      chan h264.Unit
	done       chan struct{} // closed when ffmpeg has ended and units is closed
	stderrDone chan struct{}
	closing    atomic.Bool
	forceKey   atomic.Bool
	closeOnce  sync.Once

	encMu sync.Mutex // Encode's
	start time.Time
	last  uint64 // the last timestamp written, ms
	first bool

	mu    sync.Mutex
	times map[uint32]time.Time // a picture's Time by its timestamp, until its unit comes
	err   error
	tail  []string // ffmpeg's last lines, for the error
}

func (e *encoder) Units() <-chan h264.Unit { return e.units }

func (e *encoder) ForceKey() { e.forceKey.Store(true) }

// Err is set before Units is closed (run), so a reader that saw the
// channel closed finds it.
func (e *encoder) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// ErrEnded is Encode's error once the encoder has ended.
var ErrEnded = errors.New("ffmpeg: the encoder has ended")

// Encode writes f to ffmpeg with its timestamp: the milliseconds since
// the first picture (0), at least one more than the last, odd for a key
// frame and even for any other.
func (e *encoder) Encode(f h264.Frame) error {
	if err := e.s.Fits(f); err != nil {
		return err
	}
	select {
	case <-e.done:
		return ErrEnded
	default:
	}
	e.encMu.Lock()
	defer e.encMu.Unlock()
	now := time.Now()
	key := e.forceKey.Swap(false)
	var ms uint64
	if !e.first {
		// The first picture is a key frame whatever its timestamp, and
		// its timestamp is 0.
		e.first, e.start, key = true, now, false
	} else {
		ms = max(uint64(now.Sub(e.start).Milliseconds()), e.last+1)
		if (ms%2 == 1) != key {
			ms++
		}
	}
	e.last = ms
	t := f.Time
	if t.IsZero() {
		t = now
	}
	e.mu.Lock()
	e.times[uint32(ms)] = t
	e.mu.Unlock()
	if err := writeBlock(e.in, ms, f.Data); err != nil {
		if key {
			e.forceKey.Store(true)
		}
		return fmt.Errorf("%w: %w", ErrEnded, err)
	}
	return nil
}

// run reads ffmpeg's output until it ends, then waits for it.
func (e *encoder) run(stdout io.Reader) {
	err := e.read(stdout)
	if err != nil && !e.closing.Load() {
		e.log.Warn("H.264 encoder output", "err", err)
	}
	// ffmpeg may still be writing to a pipe no one reads: end it.
	if err != nil {
		procgroup.Kill(e.cmd.Process)
	}
	io.Copy(io.Discard, stdout)
	werr := e.cmd.Wait()
	select {
	case <-e.stderrDone:
	case <-time.After(time.Second):
	}
	e.mu.Lock()
	if !e.closing.Load() {
		switch {
		case werr != nil:
			e.err = fmt.Errorf("ffmpeg: %w%s", werr, e.tailLocked())
		case err != nil:
			e.err = fmt.Errorf("ffmpeg: %w", err)
		default:
			e.err = fmt.Errorf("ffmpeg: ended on its own%s", e.tailLocked())
		}
	}
	e.mu.Unlock()
	e.log.Info("H.264 encoder ended", "err", e.err)
	close(e.units)
	close(e.done)
}

func (e *encoder) tailLocked() string {
	if len(e.tail) == 0 {
		return ""
	}
	return ": " + strings.Join(e.tail, "; ")
}

// read turns ffmpeg's FLV tags into Units.
func (e *encoder) read(stdout io.Reader) error {
	fr := newFLVReader(stdout)
	var params []byte // the SPS and PPS, Annex B, put before each key unit
	var seq uint64
	for {
		tag, err := fr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if tag.typ != 9 {
			continue
		}
		p, err := parseAVC(tag.data)
		if err != nil {
			return err
		}
		switch {
		case p.end:
			continue
		case p.config:
			sps, pps, err := parseAVCConfig(p.payload)
			if err != nil {
				return err
			}
			params = params[:0]
			for _, n := range append(sps, pps...) {
				params = h264.AppendNAL(params, n)
			}
			continue
		}
		var data []byte
		if p.key {
			data = append(data, params...)
		}
		b := p.payload
		for len(b) > 0 {
			if len(b) < 4 {
				return fmt.Errorf("%w: a NAL unit's length cut short", errFLV)
			}
			n := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
			if n > len(b)-4 {
				return fmt.Errorf("%w: a NAL unit of %d bytes in %d", errFLV, n, len(b)-4)
			}
			data = h264.AppendNAL(data, b[4:4+n])
			b = b[4+n:]
		}
		e.mu.Lock()
		t, ok := e.times[tag.ms]
		delete(e.times, tag.ms)
		if len(e.times) > 256 { // pictures ffmpeg dropped (one it could not decode)
			for k := range e.times {
				if k < tag.ms {
					delete(e.times, k)
				}
			}
		}
		e.mu.Unlock()
		if !ok {
			t = time.Now()
		}
		seq++
		e.units <- h264.Unit{Data: data, Key: p.key, Width: e.s.Width, Height: e.s.Height, Time: t, Seq: seq}
	}
}

// readStderr logs ffmpeg's lines and keeps the last few for the error.
func (e *encoder) readStderr(r io.ReadCloser) {
	defer close(e.stderrDone)
	defer r.Close()
	procgroup.Lines(r, func(line string) {
		if strings.TrimSpace(line) == "" {
			return
		}
		e.log.Warn("ffmpeg: " + line)
		e.mu.Lock()
		e.tail = append(e.tail, line)
		if len(e.tail) > 3 {
			e.tail = e.tail[1:]
		}
		e.mu.Unlock()
	})
}

// Close closes ffmpeg's input, which ends it once it has encoded what it
// holds, and kills it if it has not ended within stopWait. The units
// not yet read are dropped.
func (e *encoder) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true)
		// Not under encMu: an Encode blocked on a full pipe returns
		// when its end closes.
		e.in.Close()
		// Nobody may be reading the units any more.
		go func() {
			for range e.units {
			}
		}()
		select {
		case <-e.done:
		case <-time.After(stopWait):
			e.log.Warn("the H.264 encoder did not end in time: killing it")
			procgroup.Kill(e.cmd.Process)
			<-e.done
		}
	})
	return nil
}

// Pid is ffmpeg's process id, for tests that end it as a crash would.
func (e *encoder) Pid() int { return e.cmd.Process.Pid }

// Signal sends sig to ffmpeg.
func (e *encoder) Signal(sig syscall.Signal) error { return e.cmd.Process.Signal(sig) }
