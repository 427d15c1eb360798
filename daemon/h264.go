package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"kvmd/h264"
	"kvmd/h264/ffmpeg"
	"kvmd/h264/m2m"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/streamer"
)

// The values of --h264-encoder.
const (
	h264Auto     = "auto"
	h264Software = "software"
	h264Hardware = "hardware"
	h264Off      = "off"
)

var h264Encoders = []string{h264Auto, h264Software, h264Hardware, h264Off}

// checkH264 checks the H.264 settings.
func (c *Config) checkH264() error {
	if !slices.Contains(h264Encoders, c.H264Encoder) {
		return fmt.Errorf("--h264-encoder %q: want one of %s", c.H264Encoder, strings.Join(h264Encoders, ", "))
	}
	if c.H264Bitrate < h264.MinBitrate || c.H264Bitrate > h264.MaxBitrate {
		return fmt.Errorf("--h264-bitrate must be from %d to %d (kbit/s)", h264.MinBitrate, h264.MaxBitrate)
	}
	if c.H264GOP < h264.MinGOP || c.H264GOP > h264.MaxGOP {
		return fmt.Errorf("--h264-gop must be from %d to %d", h264.MinGOP, h264.MaxGOP)
	}
	if c.WebRTCMaxPeers < 0 {
		return errors.New("--webrtc-max-peers cannot be negative")
	}
	if c.H264FFmpeg == "" {
		return errors.New("--h264-ffmpeg needs the ffmpeg program (a path, or a name looked up in PATH)")
	}
	for _, u := range c.WebRTCICEServers {
		if !strings.HasPrefix(u, "stun:") && !strings.HasPrefix(u, "stuns:") && !strings.HasPrefix(u, "turn:") && !strings.HasPrefix(u, "turns:") {
			return fmt.Errorf("--webrtc-ice-server %q: not a stun:, stuns:, turn: or turns: URL", u)
		}
	}
	return nil
}

// rawSink is the name of ustreamer's raw sink (--raw-sink: shared memory,
// /dev/shm/kvmd::ustreamer::raw), from which the board's encoder takes
// the captured pictures: it takes no JPEG.
const rawSink = "kvmd::ustreamer::raw"

// rawSinkArgs are ustreamer's options for the raw sink, which it removes
// as it ends.
var rawSinkArgs = []string{"--raw-sink=" + rawSink, "--raw-sink-rm"}

// chooseEncoder picks the encoder --h264-encoder asks for: auto takes the
// board's V4L2 memory-to-memory H.264 encoder where there is one (a Pi 4's
// bcm2835-codec) and the capture gives raw pictures (not a USB dongle's
// MJPEG, which it cannot take), else ffmpeg if it is installed with
// libx264, else none (nil: the picture is MJPEG only). software and
// hardware are taken even when they cannot work here: the state and the
// media endpoints say why.
func chooseEncoder(ctx context.Context, cfg Config, fsys hw.FS, log *slog.Logger) h264.Opener {
	if cfg.H264Encoder == h264Off {
		log.Info("H.264 off (--h264-encoder off): the picture is MJPEG only")
		return nil
	}
	soft := ffmpeg.NewOpener(cfg.H264FFmpeg, log)
	var hard h264.Opener
	m, hardErr := m2m.Detect(fsys, log)
	if hardErr == nil {
		hard = m
	}
	switch cfg.H264Encoder {
	case h264Hardware:
		if hard == nil {
			log.Error("H.264: --h264-encoder hardware, but there is none to use", "err", hardErr)
			return unavailable{name: "hardware", err: hardErr}
		}
		return hard
	case h264Software:
		return soft
	}
	if hard != nil {
		if c, err := streamer.FindCapture(fsys); err == nil && c.Kind == hw.CaptureUSB {
			hard, hardErr = nil, errors.New("the board's encoder takes raw pictures, and the capture is a USB dongle's MJPEG")
		}
	}
	if hard != nil {
		log.Info("H.264 encoder: the board's", "encoder", hard.Name())
		return hard
	}
	if _, err := soft.Probe(ctx); errors.Is(err, h264.ErrUnavailable) {
		log.Warn("no H.264 encoder: the picture is MJPEG only (install ffmpeg for H.264, then restart)", "err", err, "hardware", hardErr)
		return nil
	} else if err != nil {
		// ffmpeg is there but did not answer in time: it is asked again
		// when the first H.264 client comes.
		log.Warn("H.264 encoder: software, ffmpeg not yet checked", "err", err, "hardware", hardErr)
		return soft
	}
	log.Info("H.264 encoder: software", "encoder", soft.Name(), "hardware", hardErr)
	return soft
}

// usesRawSink says whether the encoder takes ustreamer's raw sink.
func usesRawSink(o h264.Opener) bool {
	_, ok := o.(*m2m.Opener)
	return ok
}

// unavailable is an encoder that cannot be had: its opens say why.
type unavailable struct {
	name string
	err  error
}

func (u unavailable) Name() string           { return u.name }
func (u unavailable) Hardware() bool         { return u.name == "hardware" }
func (u unavailable) Formats() []h264.Format { return []h264.Format{h264.JPEG} }
func (u unavailable) Check(context.Context) error {
	return h264.Unavailable("", u.err)
}
func (u unavailable) Open(ctx context.Context, _ h264.Settings) (h264.Encoder, error) {
	return nil, u.Check(ctx)
}

// video is the H.264 encoding of the picture: the pipeline, fed with
// the streamer's MJPEG or its raw sink, and the WebRTC sessions over it.
// It is the streamer's H264.
type video struct {
	p   *h264.Pipeline
	rtc webRTC // nil: WebRTC off
	st  atomic.Pointer[streamer.Streamer]
	// rawSink: the encoder takes ustreamer's raw sink (rawSinkArgs).
	rawSink bool
}

// newH264 makes the H.264 encoding of the picture with the encoder
// --h264-encoder picks on the machine; nil without one (the picture is
// MJPEG only, which the demo says on stdout).
func newH264(cfg Config, env Env, m *machine, log *slog.Logger) (*video, error) {
	// The software encoder's probe bounds its asking of ffmpeg itself.
	opener := chooseEncoder(context.Background(), cfg, m.fs, log)
	if opener == nil {
		if cfg.Demo && cfg.H264Encoder == h264Auto {
			fmt.Fprintln(env.Stdout, "  no H.264 (WebRTC, Direct H.264): ffmpeg is not installed (make deps-demo installs it); the console shows MJPEG")
		}
		return nil, nil
	}
	return newVideo(cfg, opener, log)
}

// add runs the encoding under sup, after the streamer st, whose picture
// it encodes (so that it stops before it), and gives httpd its
// endpoints: /api/media and /api/media/ws, and /api/media/whep with
// WebRTC.
func (v *video) add(sup *Supervisor, st *streamer.Streamer, d *httpd.Devices) {
	v.attach(st)
	sup.Add(Child{Name: "h264", Run: Loop(v.p.Run)})
	d.H264 = v.p
	if v.rtc != nil {
		d.WebRTC = v.rtc
		// Stopped before the pipeline: the peers' subscriptions go
		// first.
		sup.Add(Child{Name: "webrtc", Run: Loop(func(ctx context.Context) {
			<-ctx.Done()
			v.rtc.Close()
		})})
	}
}

// webRTC is the WebRTC sessions (package whep's Manager, webrtc.go), which
// a build with -tags nowebrtc has not (webrtc_off.go).
type webRTC interface {
	httpd.WebRTC
	Peers() int
	Close()
}

// newVideo makes the H.264 encoding with opener; the streamer's stream is
// its pictures once attach gives it.
func newVideo(cfg Config, opener h264.Opener, log *slog.Logger) (*video, error) {
	v := &video{rawSink: usesRawSink(opener)}
	var src h264.Source = h264.MJPEGSource{Stream: v.stream}
	if v.rawSink {
		src = h264.SinkSource{Name: rawSink, Hold: v.hold}
	}
	v.p = h264.New(h264.Config{
		Opener: opener, Source: src,
		Bitrate: cfg.H264Bitrate, GOP: cfg.H264GOP, FPS: cfg.StreamerDesiredFPS,
		// One delay for both: the encoder holds the streamer.
		ShutdownDelay: cfg.StreamerShutdownDelay,
		Log:           log, Changed: v.changed,
	})
	if cfg.WebRTCMaxPeers > 0 {
		rtc, err := newWebRTC(cfg, v.p, log, v.changed)
		if err != nil {
			return nil, err
		}
		if rtc != nil {
			v.rtc = rtc
		}
	}
	return v, nil
}

// iceCredentials reads --webrtc-ice-credentials-file: the username and
// credential of the turn: servers.
func iceCredentials(cfg Config) (user, cred string, err error) {
	if cfg.WebRTCICECredentialsFile == "" {
		return "", "", nil
	}
	b, err := os.ReadFile(cfg.WebRTCICECredentialsFile)
	if err != nil {
		return "", "", fmt.Errorf("--webrtc-ice-credentials-file: %w", err)
	}
	user, cred, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok {
		return "", "", errors.New("--webrtc-ice-credentials-file: want username:credential")
	}
	return user, cred, nil
}

func (v *video) attach(st *streamer.Streamer) { v.st.Store(st) }

func (v *video) changed() {
	if st := v.st.Load(); st != nil {
		st.Changed()
	}
}

// stream opens the streamer's MJPEG stream with its per-picture headers:
// it holds the streamer, as any stream client does, until closed.
func (v *video) stream(ctx context.Context) (io.ReadCloser, error) {
	st := v.st.Load()
	if st == nil {
		return nil, errors.New("h264: no streamer")
	}
	resp, release, err := st.Stream(ctx, "extra_headers=1")
	if err != nil {
		return nil, streamerErr(err)
	}
	return &releaseBody{resp: resp, release: release}, nil
}

// hold holds the streamer for a reader of its raw sink.
func (v *video) hold(ctx context.Context) (func(), error) {
	st := v.st.Load()
	if st == nil {
		return nil, errors.New("h264: no streamer")
	}
	release, err := st.Hold(ctx)
	if err != nil {
		return nil, streamerErr(err)
	}
	return release, nil
}

// streamerErr marks the streamer's failures that no retry mends until it
// finds what it lacks.
func streamerErr(err error) error {
	if errors.Is(err, streamer.ErrNotInstalled) || errors.Is(err, streamer.ErrNoCapture) {
		return h264.Unavailable("", err)
	}
	return err
}

type releaseBody struct {
	resp    *http.Response
	release func()
	once    sync.Once
}

func (b *releaseBody) Read(p []byte) (int, error) { return b.resp.Body.Read(p) }

func (b *releaseBody) Close() error {
	err := b.resp.Body.Close()
	b.once.Do(b.release)
	return err
}

// SetSettings gives the encoder new settings (set_params).
func (v *video) SetSettings(bitrate, gop int) { v.p.SetSettings(bitrate, gop) }

// Status is the pipeline's.
func (v *video) Status() h264.Status { return v.p.Status() }

// State is this daemon's "h264" key of /api/streamer.
func (v *video) State() any {
	st := v.p.Status()
	m := map[string]any{
		"encoder": st.Encoder, "hardware": st.Hardware, "running": st.Running,
		"resolution": nil, "online": st.Online, "fps": st.FPS, "kbps": st.Bitrate,
		"clients": st.Subscribers, "webrtc": nil, "error": nil,
	}
	if st.Running {
		m["resolution"] = map[string]int{"width": st.Width, "height": st.Height}
	}
	if v.rtc != nil {
		m["webrtc"] = map[string]int{"peers": v.rtc.Peers(), "max_peers": v.rtc.MaxPeers()}
	}
	if st.Err != nil {
		m["error"] = h264Problem(st.Err)
	}
	return m
}

// h264Problem says in words why no encoder runs.
func h264Problem(err error) string {
	const none = "no H.264 encoder runs"
	switch {
	case errors.Is(err, streamer.ErrNotInstalled):
		return none + ": ustreamer is not installed"
	case errors.Is(err, streamer.ErrNoCapture):
		return none + ": no video capture device was found"
	case errors.Is(err, h264.ErrUnavailable):
		return none + ": " + h264.Why(err)
	}
	return none + " now: it failed and is restarted"
}
