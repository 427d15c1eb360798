package whep

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pion/sdp/v3"
)

// Errors of an offer: each is the client's, answered with a 4xx.
var (
	// ErrBadOffer is an offer that is not an SDP session description,
	// or has no video to receive.
	ErrBadOffer = errors.New("whep: bad offer")
	// ErrNoH264 is an offer whose video takes no H.264 this daemon can
	// send: packetization mode 1 of the Constrained Baseline or Baseline
	// profile (profile-level-id 42e0xx or 4200xx).
	ErrNoH264 = errors.New("whep: the offer has no H.264 the daemon can send")
)

// maxOffer bounds an offer: a browser's is 3 to 8 KiB.
const maxOffer = 64 << 10

// checkOffer says whether offer is an SDP offer with a video section
// that receives H.264 in packetization mode 1 of a baseline profile.
func checkOffer(offer string) error {
	if len(offer) > maxOffer {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadOffer, len(offer), maxOffer)
	}
	var d sdp.SessionDescription
	if err := d.UnmarshalString(offer); err != nil {
		return fmt.Errorf("%w: not an SDP session description: %w", ErrBadOffer, err)
	}
	video := false
	for _, m := range d.MediaDescriptions {
		if m.MediaName.Media != "video" || m.MediaName.Port.Value == 0 {
			continue
		}
		if _, sendonly := m.Attribute("sendonly"); sendonly {
			continue
		}
		if _, inactive := m.Attribute("inactive"); inactive {
			continue
		}
		video = true
		if h264Offered(m) {
			return nil
		}
	}
	if !video {
		return fmt.Errorf("%w: no video section that receives", ErrBadOffer)
	}
	return ErrNoH264
}

// h264Offered looks for an H.264 payload type of m with packetization
// mode 1 and a Baseline or Constrained Baseline profile.
func h264Offered(m *sdp.MediaDescription) bool {
	h264 := map[string]bool{}
	for _, a := range m.Attributes {
		if a.Key != "rtpmap" {
			continue
		}
		pt, enc, ok := strings.Cut(a.Value, " ")
		if ok && strings.HasPrefix(strings.ToLower(enc), "h264/") {
			h264[pt] = true
		}
	}
	for _, a := range m.Attributes {
		if a.Key != "fmtp" {
			continue
		}
		pt, params, ok := strings.Cut(a.Value, " ")
		if !ok || !h264[pt] {
			continue
		}
		mode, plid := "0", ""
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(k) {
			case "packetization-mode":
				mode = v
			case "profile-level-id":
				plid = strings.ToLower(v)
			}
		}
		if mode == "1" && (strings.HasPrefix(plid, "42e0") || strings.HasPrefix(plid, "4200")) {
			return true
		}
	}
	return false
}
