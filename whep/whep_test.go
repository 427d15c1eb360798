package whep_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"kvmd/h264"
	"kvmd/h264/ffmpeg"
	"kvmd/h264/h264test"
	"kvmd/internal/colorbars"
	"kvmd/internal/testutil"
	"kvmd/whep"
	"kvmd/whep/wheptest"
)

type fixture struct {
	t      *testing.T
	ffmpeg string
	src    *h264test.Source
	enc    *h264test.Counting
	p      *h264.Pipeline
	m      *whep.Manager
}

// newFixture runs a pipeline of real ffmpeg on generated pictures and a
// manager over it; at the end it checks that nothing is left: no
// session, no encoder, no goroutine.
func newFixture(t *testing.T, cfg whep.Config) *fixture {
	t.Helper()
	path := testutil.NeedTool(t, "ffmpeg", "ffmpeg")
	before := runtime.NumGoroutine()
	f := &fixture{t: t, ffmpeg: path, src: h264test.NewSource(320, 240)}
	f.enc = &h264test.Counting{Opener: ffmpeg.NewOpener(path, testutil.Logger(t))}
	f.p = h264.New(h264.Config{Opener: f.enc, Source: f.src, Bitrate: 1000, GOP: 0, ShutdownDelay: 100 * time.Millisecond, Log: testutil.Logger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.p.Run(ctx) }()
	cfg.Source = f.p
	cfg.Log = testutil.Logger(t)
	m, err := whep.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() {
		m.Close()
		if n := m.Peers(); n != 0 {
			t.Errorf("%d sessions after Close", n)
		}
		cancel()
		<-done
		if _, running, _ := f.enc.Counts(); running != 0 {
			t.Errorf("%d encoders left", running)
		}
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines left, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
	})
	return f
}

// signal offers straight to the manager, as the HTTP handler does, with
// life as the session's life and ended counted.
func (f *fixture) signal(life context.Context, ended *atomic.Int32, owner string) wheptest.Signal {
	return func(ctx context.Context, offer string) (string, string, error) {
		s, err := f.m.Offer(ctx, life, offer, owner, func() { ended.Add(1) })
		if err != nil {
			return "", "", err
		}
		return s.Answer, s.ID, nil
	}
}

func (f *fixture) dial(life context.Context, ended *atomic.Int32) *wheptest.Client {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := wheptest.Dial(ctx, f.signal(life, ended, "alice"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}

func next(t *testing.T, c *wheptest.Client) wheptest.Unit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("no unit: %v", err)
	}
	return u
}

// TestPlays: a pion peer gets the picture: a key unit first, every unit
// with the playout delay at 0, 30 pictures that decode into the colour
// bars at the source's size. DELETE ends the session, its subscription
// (the encoder stops) and calls ended once.
func TestPlays(t *testing.T) {
	f := newFixture(t, whep.Config{})
	var ended atomic.Int32
	c := f.dial(context.Background(), &ended)
	if n := f.m.Peers(); n != 1 {
		t.Errorf("Peers = %d", n)
	}
	var stream []byte
	for i := range 30 {
		u := next(t, c)
		if i == 0 && !u.Key {
			t.Error("the first unit is not a key unit")
		}
		if !u.PlayoutZero {
			t.Errorf("unit %d without the playout delay at 0", i)
		}
		stream = append(stream, u.Data...)
	}
	pics, err := h264test.Decode(f.ffmpeg, stream)
	if err != nil {
		t.Fatal(err)
	}
	if len(pics) != 30 {
		t.Errorf("decoded %d pictures of 30 units", len(pics))
	}
	for i, img := range pics {
		if b := img.Bounds(); b.Dx() != 320 || b.Dy() != 240 {
			t.Fatalf("picture %d is %v", i, b)
		}
		if _, err := colorbars.Check(img, [4]float64{0, 0, 320, 240}, 0.3); err != nil {
			t.Errorf("picture %d: %v", i, err)
		}
	}
	if err := f.m.Delete(c.Location, "bob", false); !errors.Is(err, whep.ErrNoSession) {
		t.Errorf("another user's Delete: %v, want ErrNoSession", err)
	}
	if err := f.m.Delete(c.Location, "alice", false); err != nil {
		t.Fatal(err)
	}
	if f.m.Peers() != 0 || ended.Load() != 1 {
		t.Errorf("after Delete: %d peers, ended %d times", f.m.Peers(), ended.Load())
	}
	if err := f.m.Delete(c.Location, "alice", false); !errors.Is(err, whep.ErrNoSession) {
		t.Errorf("second Delete: %v, want ErrNoSession", err)
	}
	testutil.WaitFor(t, 5*time.Second, "the encoder to stop", func() bool { _, r, _ := f.enc.Counts(); return r == 0 })
}

// TestPictureLoss: the peer's picture-loss report brings a key unit.
func TestPictureLoss(t *testing.T) {
	f := newFixture(t, whep.Config{})
	var ended atomic.Int32
	c := f.dial(context.Background(), &ended)
	next(t, c)
	time.Sleep(600 * time.Millisecond) // past the encoder's least time between key frames
	for len(c.Units) > 0 {
		<-c.Units // what came meanwhile
	}
	for range 5 {
		if next(t, c).Key {
			t.Fatal("a key unit nobody asked for")
		}
	}
	if err := c.RequestKey(); err != nil {
		t.Fatal(err)
	}
	for i := 0; !next(t, c).Key; i++ {
		if i > 15 {
			t.Fatal("no key unit within 15 units of the picture-loss report")
		}
	}
}

// TestTooManyPeers: past MaxPeers an offer is refused with
// ErrTooManyPeers (and its ended called); a place freed is taken again.
func TestTooManyPeers(t *testing.T) {
	f := newFixture(t, whep.Config{MaxPeers: 2})
	var ended atomic.Int32
	a := f.dial(context.Background(), &ended)
	f.dial(context.Background(), &ended)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := wheptest.Dial(ctx, f.signal(context.Background(), &ended, "alice"))
	if !errors.Is(err, whep.ErrTooManyPeers) {
		t.Fatalf("third peer: %v, want ErrTooManyPeers", err)
	}
	if ended.Load() != 1 {
		t.Errorf("ended called %d times for the refused offer", ended.Load())
	}
	if err := f.m.Delete(a.Location, "alice", false); err != nil {
		t.Fatal(err)
	}
	next(t, f.dial(context.Background(), &ended))
}

// TestBadOffers: what is not an offer to receive H.264 is refused with
// its reason, and leaves nothing behind.
func TestBadOffers(t *testing.T) {
	f := newFixture(t, whep.Config{})
	vp8 := offerWith(t, func(m *webrtc.MediaEngine) error {
		return m.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, PayloadType: 96}, webrtc.RTPCodecTypeVideo)
	}, webrtc.RTPCodecTypeVideo)
	high := offerWith(t, func(m *webrtc.MediaEngine) error {
		return m.RegisterCodec(webrtc.RTPCodecParameters{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
			SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=640032"}, PayloadType: 112}, webrtc.RTPCodecTypeVideo)
	}, webrtc.RTPCodecTypeVideo)
	audio := offerWith(t, func(m *webrtc.MediaEngine) error { return m.RegisterDefaultCodecs() }, webrtc.RTPCodecTypeAudio)
	good := offerWith(t, func(m *webrtc.MediaEngine) error { return m.RegisterDefaultCodecs() }, webrtc.RTPCodecTypeVideo)
	var noPrint []string
	for _, l := range strings.Split(good, "\r\n") {
		if !strings.HasPrefix(l, "a=fingerprint:") {
			noPrint = append(noPrint, l)
		}
	}
	for _, tc := range []struct {
		name, offer string
		want        error
	}{
		{"empty", "", whep.ErrBadOffer},
		{"not SDP", "hello\r\n", whep.ErrBadOffer},
		{"too long", strings.Repeat("a=x\r\n", 20000), whep.ErrBadOffer},
		{"audio only", audio, whep.ErrBadOffer},
		{"VP8 only", vp8, whep.ErrNoH264},
		{"H.264 High only", high, whep.ErrNoH264},
		{"no DTLS fingerprint", strings.Join(noPrint, "\r\n"), whep.ErrBadOffer},
	} {
		var ended atomic.Int32
		_, err := f.m.Offer(context.Background(), context.Background(), tc.offer, "alice", func() { ended.Add(1) })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if ended.Load() != 1 {
			t.Errorf("%s: ended called %d times", tc.name, ended.Load())
		}
	}
	if n := f.m.Peers(); n != 0 {
		t.Errorf("%d sessions after bad offers", n)
	}
	if opened, _, _ := f.enc.Counts(); opened != 0 {
		t.Errorf("bad offers opened %d encoders", opened)
	}
}

// offerWith is a pion peer's offer to receive kind with the codecs reg
// registers.
func offerWith(t *testing.T, reg func(*webrtc.MediaEngine) error, kind webrtc.RTPCodecType) string {
	t.Helper()
	m := &webrtc.MediaEngine{}
	if err := reg(m); err != nil {
		t.Fatal(err)
	}
	pc, err := webrtc.NewAPI(webrtc.WithMediaEngine(m)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(kind, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	o, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	return o.SDP
}

// TestLifeEnds: the credential that made a session is revoked (its
// context ends): the session ends.
func TestLifeEnds(t *testing.T) {
	f := newFixture(t, whep.Config{})
	var ended atomic.Int32
	life, revoke := context.WithCancel(context.Background())
	c := f.dial(life, &ended)
	next(t, c)
	revoke()
	testutil.WaitFor(t, 5*time.Second, "the session to end", func() bool { return f.m.Peers() == 0 && ended.Load() == 1 })
}

// TestPeerGoes: the peer closes its connection without a DELETE: the
// session ends.
func TestPeerGoes(t *testing.T) {
	f := newFixture(t, whep.Config{})
	var ended atomic.Int32
	c := f.dial(context.Background(), &ended)
	next(t, c)
	c.Close()
	testutil.WaitFor(t, 40*time.Second, "the session to end", func() bool { return f.m.Peers() == 0 && ended.Load() == 1 })
}

// TestNeverConnects: a client that POSTs and never connects is dropped
// after ConnectTimeout.
func TestNeverConnects(t *testing.T) {
	f := newFixture(t, whep.Config{ConnectTimeout: 500 * time.Millisecond})
	var ended atomic.Int32
	offer := offerWith(t, func(m *webrtc.MediaEngine) error { return m.RegisterDefaultCodecs() }, webrtc.RTPCodecTypeVideo)
	if _, err := f.m.Offer(context.Background(), context.Background(), offer, "alice", func() { ended.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if f.m.Peers() != 1 {
		t.Fatal("no session")
	}
	testutil.WaitFor(t, 5*time.Second, "the session to end", func() bool { return f.m.Peers() == 0 && ended.Load() == 1 })
}

// TestEncoderDies: ffmpeg killed mid-stream: the peer keeps its session
// and gets a key unit from the next encoder, after the backoff.
func TestEncoderDies(t *testing.T) {
	f := newFixture(t, whep.Config{})
	var ended atomic.Int32
	c := f.dial(context.Background(), &ended)
	next(t, c)
	pids := f.enc.Pids()
	syscall.Kill(pids[len(pids)-1], syscall.SIGKILL)
	testutil.WaitFor(t, 10*time.Second, "a second encoder", func() bool { o, _, _ := f.enc.Counts(); return o == 2 })
	for i := 0; ; i++ {
		u := next(t, c)
		if u.Key {
			break
		}
		if i > 60 {
			t.Fatal("no key unit after the new encoder started")
		}
	}
	if f.m.Peers() != 1 || ended.Load() != 0 {
		t.Errorf("the session ended with the encoder: %d peers, ended %d", f.m.Peers(), ended.Load())
	}
}
