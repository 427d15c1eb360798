package whep

import (
	"context"
	"errors"
	"testing"

	"github.com/pion/webrtc/v4"
)

// TestNoCandidates: a daemon that can read none of its interfaces (as in
// a sandbox without route netlink, which the booted test found) answers
// no offer: ErrNoCandidates, its session gone, ended called, rather than
// an answer no peer can connect to.
func TestNoCandidates(t *testing.T) {
	m, err := New(Config{Source: nil, interfaces: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	me := &webrtc.MediaEngine{}
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	pc, err := webrtc.NewAPI(webrtc.WithMediaEngine(me)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ended := 0
	_, err = m.Offer(context.Background(), context.Background(), offer.SDP, "alice", func() { ended++ })
	if !errors.Is(err, ErrNoCandidates) {
		t.Errorf("Offer: %v, want ErrNoCandidates", err)
	}
	if m.Peers() != 0 || ended != 1 {
		t.Errorf("%d sessions, ended %d times", m.Peers(), ended)
	}
}
