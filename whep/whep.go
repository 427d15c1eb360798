// Package whep sends the daemon's H.264 to WebRTC peers, signalled by
// WHEP (the IETF's WebRTC-HTTP Egress Protocol, RFC 9725's sibling for
// playback): a client POSTs an SDP offer and gets the answer, with the
// daemon's ICE candidates in it (no trickle), and the URL of its session,
// which a DELETE ends. It is built on pion/webrtc, as JetKVM and NanoKVM
// are.
//
// Each session is a PeerConnection with one send-only H.264 track fed
// from the encoder's pipeline (a subscription of its own, package h264).
// ICE uses the host's own addresses (host candidates, no mDNS), and the
// STUN and TURN servers of the configuration (none by default), so that
// a KVM on a LAN needs no outside server. A peer's picture-loss reports
// (RTCP PLI, FIR) ask the encoder for a key frame; the RTP packets carry
// the playout-delay extension at 0 where the peer offered it, so that a
// browser shows each picture as soon as it is decoded.
//
// A session ends on DELETE, when its peer's connection fails or closes,
// when it never connects (ConnectTimeout), when its context ends (the
// credential that made it was revoked) and on Close; at most MaxPeers run
// at once.
package whep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media"

	"kvmd/h264"
)

// DefaultMaxPeers is the default of Config.MaxPeers: a few viewers of
// one KVM, each encoder's output copied to each, well within a Pi's
// network and CPU.
const DefaultMaxPeers = 10

// DefaultConnectTimeout ends a session whose peer has not connected
// within it: a client that POSTed and went.
const DefaultConnectTimeout = 30 * time.Second

// Errors of the Manager's operations.
var (
	// ErrTooManyPeers refuses a session beyond MaxPeers.
	ErrTooManyPeers = errors.New("whep: too many WebRTC peers")
	// ErrNoSession is a session id that is not (or no more) a session.
	ErrNoSession = errors.New("whep: no such session")
	// ErrClosed refuses a session once the manager is closed.
	ErrClosed = errors.New("whep: closed")
	// ErrNoCandidates is an answer the daemon could put none of its
	// addresses in: no network interface it may read (a sandbox without
	// route netlink), none up.
	ErrNoCandidates = errors.New("whep: no address of the daemon's to offer the peer")
)

// offerErrors are pion's errors of an offer that is the client's fault:
// parseable SDP (checkOffer parsed it) without what a WebRTC offer needs.
var offerErrors = []error{
	webrtc.ErrSessionDescriptionNoFingerprint, webrtc.ErrSessionDescriptionInvalidFingerprint,
	webrtc.ErrSessionDescriptionConflictingFingerprints, webrtc.ErrSessionDescriptionMissingIceUfrag,
	webrtc.ErrSessionDescriptionMissingIcePwd, webrtc.ErrSessionDescriptionConflictingIceUfrag,
	webrtc.ErrSessionDescriptionConflictingIcePwd,
}

// offerError says whether err of SetRemoteDescription is the offer's
// fault (ErrBadOffer) or the daemon's.
func offerError(err error) error {
	for _, e := range offerErrors {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", ErrBadOffer, err)
		}
	}
	return fmt.Errorf("whep: %w", err)
}

// Source gives the H.264 units (package h264's Pipeline).
type Source interface {
	Subscribe() *h264.Sub
}

// ICEServer is a STUN or TURN server given to ICE (and to the client,
// in the answer's Link headers).
type ICEServer struct {
	URLs                 []string
	Username, Credential string
}

// Config is what New needs.
type Config struct {
	Source Source
	// MaxPeers bounds the sessions at once (0: DefaultMaxPeers).
	MaxPeers int
	// ICEServers are the STUN and TURN servers; none: host candidates
	// only.
	ICEServers []ICEServer
	// ConnectTimeout: see DefaultConnectTimeout.
	ConnectTimeout time.Duration
	Log            *slog.Logger
	// Changed is called (it must not block) when a session starts or
	// ends.
	Changed func()

	// interfaces keeps the network interfaces ICE may use (tests: none).
	interfaces func(name string) bool
}

// Manager holds the WHEP sessions.
type Manager struct {
	cfg Config
	api *webrtc.API
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	wg       sync.WaitGroup
}

// The H.264 the daemon sends: packetization mode 1 of the Constrained
// Baseline profile, offered also as Baseline (of which Constrained
// Baseline is the part every decoder has), so that a peer offering
// either takes it. pion matches the profile's first two bytes.
var codecs = []webrtc.RTPCodecParameters{
	{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", RTCPFeedback: feedback}, PayloadType: 102},
	{RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f", RTCPFeedback: feedback}, PayloadType: 104},
}

// feedback is the RTCP the daemon takes: retransmission requests (NACK),
// and picture-loss reports and full intra requests, each a key frame.
var feedback = []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: "ccm", Parameter: "fir"}}

// New returns a manager for cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Changed == nil {
		cfg.Changed = func() {}
	}
	m := &webrtc.MediaEngine{}
	for _, c := range codecs {
		if err := m.RegisterCodec(c, webrtc.RTPCodecTypeVideo); err != nil {
			return nil, fmt.Errorf("whep: %w", err)
		}
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: playoutDelayURI}, webrtc.RTPCodecTypeVideo); err != nil {
		return nil, fmt.Errorf("whep: %w", err)
	}
	ir := &interceptor.Registry{}
	// Retransmissions of what a peer missed (the NACK responder keeps
	// the last packets), sender reports, and the playout delay.
	if err := webrtc.ConfigureNack(m, ir); err != nil {
		return nil, fmt.Errorf("whep: %w", err)
	}
	if err := webrtc.ConfigureRTCPReports(ir); err != nil {
		return nil, fmt.Errorf("whep: %w", err)
	}
	ir.Add(playoutDelayFactory{})
	var se webrtc.SettingEngine
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6})
	// mDNS candidates hide the host's address behind a name a peer must
	// resolve by multicast: a KVM's peers come by its address.
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if cfg.interfaces != nil {
		se.SetInterfaceFilter(cfg.interfaces)
	}
	se.LoggerFactory = logFactory{cfg.Log}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(ir), webrtc.WithSettingEngine(se))
	return &Manager{cfg: cfg, api: api, log: cfg.Log, sessions: map[string]*session{}}, nil
}

// Peers counts the sessions.
func (m *Manager) Peers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// MaxPeers is the most sessions at once.
func (m *Manager) MaxPeers() int { return m.cfg.MaxPeers }

// ICEServers are the configured STUN and TURN servers.
func (m *Manager) ICEServers() []ICEServer { return m.cfg.ICEServers }

// Session is a new session's answer and id.
type Session struct {
	ID     string
	Answer string
}

// Offer starts a session for an SDP offer and returns its answer, with
// the daemon's candidates. ctx bounds the call; life bounds the session
// (the credential that made it), which ends besides on Delete and as the
// package comment says. ended is called exactly once: when the session
// has ended (its PeerConnection closed), or before Offer returns an
// error. owner names who made it, for Delete.
func (m *Manager) Offer(ctx, life context.Context, offer, owner string, ended func()) (Session, error) {
	if ended == nil {
		ended = func() {}
	}
	if err := checkOffer(offer); err != nil {
		ended()
		return Session{}, err
	}
	id, err := newID()
	if err != nil {
		ended()
		return Session{}, err
	}
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		ended()
		return Session{}, ErrClosed
	case len(m.sessions) >= m.cfg.MaxPeers:
		n := len(m.sessions)
		m.mu.Unlock()
		ended()
		return Session{}, fmt.Errorf("%w: %d of %d", ErrTooManyPeers, n, m.cfg.MaxPeers)
	}
	s := &session{m: m, id: id, owner: owner, ended: ended, done: make(chan struct{}), connected: make(chan struct{}),
		log: m.log.With("session", id[:8])}
	m.sessions[id] = s
	m.wg.Add(1)
	m.mu.Unlock()
	answer, err := s.start(ctx, life, offer)
	if err != nil {
		s.close("the offer failed: " + err.Error())
		<-s.done
		return Session{}, err
	}
	m.cfg.Changed()
	return Session{ID: id, Answer: answer}, nil
}

// Delete ends a session (WHEP's DELETE) of owner's; admin may end
// anyone's.
func (m *Manager) Delete(id, owner string, admin bool) error {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil || (!admin && s.owner != owner) {
		return ErrNoSession
	}
	s.close("deleted by the client")
	<-s.done
	return nil
}

// Close ends every session and refuses new ones; it returns when all
// have ended.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.close("the daemon is stopping")
	}
	m.wg.Wait()
}

func newID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// session is one peer.
type session struct {
	m     *Manager
	id    string
	owner string
	ended func()
	log   *slog.Logger

	// mu guards what start makes, which close ends: a session may be
	// closed (Close, its credential) while start is still making it.
	mu      sync.Mutex
	closing bool
	pc      *webrtc.PeerConnection
	sub     *h264.Sub
	stop    context.CancelFunc

	closeOnce sync.Once
	done      chan struct{} // closed when the session has ended
	connected chan struct{}
	connOnce  sync.Once
}

// errClosing is start's error for a session closed while it was made.
var errClosing = errors.New("whep: the session was ended while it started")

// start makes the PeerConnection and the answer, and starts the
// session's goroutines.
func (s *session) start(ctx, life context.Context, offer string) (string, error) {
	var ice []webrtc.ICEServer
	for _, srv := range s.m.cfg.ICEServers {
		ice = append(ice, webrtc.ICEServer{URLs: srv.URLs, Username: srv.Username, Credential: srv.Credential})
	}
	pc, err := s.m.api.NewPeerConnection(webrtc.Configuration{ICEServers: ice})
	if err != nil {
		return "", fmt.Errorf("whep: %w", err)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		pc.Close()
		return "", errClosing
	}
	s.pc = pc
	s.mu.Unlock()
	track, err := webrtc.NewTrackLocalStaticSample(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000}, "video", "kvmd")
	if err != nil {
		return "", fmt.Errorf("whep: %w", err)
	}
	tr, err := pc.AddTransceiverFromTrack(track, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendonly})
	if err != nil {
		return "", fmt.Errorf("whep: %w", err)
	}
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		s.log.Debug("WebRTC peer", "state", st.String())
		switch st {
		case webrtc.PeerConnectionStateConnected:
			s.connOnce.Do(func() { close(s.connected) })
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			go s.close("the peer's connection " + st.String())
		}
	})
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return "", offerError(err)
	}
	answer, err := pc.CreateAnswer(nil)
	if err != nil {
		return "", fmt.Errorf("whep: %w", err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(answer); err != nil {
		return "", fmt.Errorf("whep: %w", err)
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if tr.Sender() == nil || len(tr.Sender().GetParameters().Codecs) == 0 {
		return "", ErrNoH264
	}
	if !strings.Contains(pc.LocalDescription().SDP, "a=candidate:") {
		return "", ErrNoCandidates
	}
	// The encoder starts now, while the peer connects.
	sctx, stop := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		stop()
		return "", errClosing
	}
	s.sub = s.m.cfg.Source.Subscribe()
	s.stop = stop
	sub := s.sub
	s.mu.Unlock()
	go s.readRTCP(tr.Sender(), sub)
	go s.send(sctx, track, sub)
	go func() {
		select {
		case <-life.Done():
			s.close("its credential ended")
		case <-sctx.Done():
		}
	}()
	go func() {
		t := time.NewTimer(s.m.cfg.ConnectTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			s.close("the peer did not connect within " + s.m.cfg.ConnectTimeout.String())
		case <-s.connected:
		case <-sctx.Done():
		}
	}()
	s.log.Info("WebRTC peer added", "owner", s.owner, "peers", s.m.Peers())
	return pc.LocalDescription().SDP, nil
}

// send writes the units to the track once the peer is connected,
// starting at a key unit asked for then.
func (s *session) send(ctx context.Context, track *webrtc.TrackLocalStaticSample, sub *h264.Sub) {
	select {
	case <-s.connected:
	case <-ctx.Done():
		return
	}
	sub.RequestKey()
	started := false
	var last time.Time
	for {
		var u h264.Unit
		select {
		case <-ctx.Done():
			return
		case u = <-sub.C():
		}
		if !started && !u.Key {
			continue
		}
		started = true
		now := time.Now()
		d := time.Second / 30
		if !last.IsZero() {
			d = max(now.Sub(last), time.Millisecond)
		}
		last = now
		if err := track.WriteSample(media.Sample{Data: u.Data, Duration: d}); err != nil {
			s.log.Debug("WebRTC write", "err", err)
		}
	}
}

// readRTCP reads the peer's RTCP: a picture-loss report or a full intra
// request asks the encoder for a key frame. It ends with the connection.
func (s *session) readRTCP(snd *webrtc.RTPSender, sub *h264.Sub) {
	for {
		pkts, _, err := snd.ReadRTCP()
		if err != nil {
			return
		}
		for _, p := range pkts {
			switch p.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				sub.RequestKey()
			}
		}
	}
}

// close ends the session once: the PeerConnection closed, the
// subscription ended, the manager told.
func (s *session) close(why string) {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		pc, sub, stop := s.pc, s.sub, s.stop
		s.mu.Unlock()
		go func() {
			defer s.m.wg.Done()
			if stop != nil {
				stop()
			}
			if pc != nil {
				if err := pc.Close(); err != nil {
					s.log.Debug("closing the WebRTC peer", "err", err)
				}
			}
			if sub != nil {
				sub.Close()
			}
			s.m.mu.Lock()
			delete(s.m.sessions, s.id)
			n := len(s.m.sessions)
			s.m.mu.Unlock()
			s.log.Info("WebRTC peer ended", "why", why, "peers", n)
			s.ended()
			close(s.done)
			s.m.cfg.Changed()
		}()
	})
}
