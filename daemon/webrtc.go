//go:build !nowebrtc

package daemon

import (
	"log/slog"
	"strings"

	"kvmd/h264"
	"kvmd/whep"
)

// newWebRTC makes the WebRTC sessions over p: package whep, on pion.
func newWebRTC(cfg Config, p *h264.Pipeline, log *slog.Logger, changed func()) (webRTC, error) {
	user, cred, err := iceCredentials(cfg)
	if err != nil {
		return nil, err
	}
	var ice []whep.ICEServer
	for _, u := range cfg.WebRTCICEServers {
		s := whep.ICEServer{URLs: []string{u}}
		if strings.HasPrefix(u, "turn") {
			s.Username, s.Credential = user, cred
		}
		ice = append(ice, s)
	}
	return whep.New(whep.Config{Source: p, MaxPeers: cfg.WebRTCMaxPeers, ICEServers: ice, Log: log, Changed: changed})
}
