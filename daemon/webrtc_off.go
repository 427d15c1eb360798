//go:build nowebrtc

package daemon

import (
	"log/slog"

	"kvmd/h264"
)

// newWebRTC says this build has no WebRTC: built with -tags nowebrtc,
// without pion, whose 3.5 MiB the smallest builds leave out. Direct
// H.264 (/api/media/ws) and MJPEG remain.
func newWebRTC(cfg Config, p *h264.Pipeline, log *slog.Logger, changed func()) (webRTC, error) {
	log.Info("this build has no WebRTC (-tags nowebrtc): H.264 goes over /api/media/ws only")
	return nil, nil
}
