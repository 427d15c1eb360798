package whep

import (
	"github.com/pion/interceptor"
	"github.com/pion/rtp"
)

// playoutDelayURI is the RTP header extension that tells a browser how
// long it may hold a picture before showing it
// (webrtc.googlesource.com/src/+/main/docs/native-code/rtp-hdrext/playout-delay).
const playoutDelayURI = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"

// playoutDelayFactory makes the interceptor that puts the playout delay,
// minimum and maximum 0, on every outgoing packet of a stream whose peer
// offered the extension: a KVM's picture is shown at once, never
// buffered for smoothness.
type playoutDelayFactory struct{}

func (playoutDelayFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &playoutDelay{}, nil
}

type playoutDelay struct {
	interceptor.NoOp
}

func (*playoutDelay) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	var id uint8
	for _, e := range info.RTPHeaderExtensions {
		if e.URI == playoutDelayURI {
			id = uint8(e.ID)
		}
	}
	if id == 0 {
		return w
	}
	ext, err := (&rtp.PlayoutDelayExtension{MinDelay: 0, MaxDelay: 0}).Marshal()
	if err != nil {
		return w
	}
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		if err := h.SetExtension(id, ext); err != nil {
			return 0, err
		}
		return w.Write(h, payload, a)
	})
}
