package streamer

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"kvmd/h264"
	"kvmd/hw"
)

// Errors of SetParams, kvmd's names for them in httpd
// (kvmd/apps/kvmd/server.py: StreamerQualityNotSupported, ...).
var (
	// ErrQualityNotSupported: the capture sends its own JPEG (a USB
	// dongle), whose quality ustreamer does not set.
	ErrQualityNotSupported = errors.New("streamer: this streamer does not support quality settings")
	// ErrResolutionNotSupported: the capture's resolution is the signal's
	// (DV timings), not chosen.
	ErrResolutionNotSupported = errors.New("streamer: this streamer does not support resolution settings")
	// ErrH264NotSupported: this daemon has no H.264 encoder
	// (Config.H264 unset: --h264-encoder off, or none found).
	ErrH264NotSupported = errors.New("streamer: this streamer does not support H264")
)

// ParamError is a parameter value that is not valid: it names the
// parameter and why, never echoing the value.
type ParamError struct {
	Param, Why string
}

func (e *ParamError) Error() string { return "streamer: invalid " + e.Param + ": " + e.Why }

// Defaults of kvmd's streamer section (kvmd/apps/_scheme.py): quality 80,
// desired_fps 30 within 0..90.
const (
	DefaultQuality       = 80
	DefaultDesiredFPS    = 30
	DefaultDesiredFPSMin = 0
	DefaultDesiredFPSMax = 90
	// MaxFPS is the most ustreamer takes (VIDEO_MAX_FPS, src/ustreamer/device.h).
	MaxFPS = 120
)

// DongleResolutions are the resolutions kvmd offers for a USB capture
// dongle (configs/kvmd/main/v2-hdmiusb-rpi4.yaml), 1920x1080 first: its
// default.
var DongleResolutions = []string{
	"1920x1080", "1600x1200", "1360x768", "1280x1024", "1280x960", "1280x720",
	"1024x768", "800x600", "720x576", "720x480", "640x480",
}

// Features says which parameters this capture has: kvmd's features.
type Features struct {
	Quality    bool `json:"quality"`
	Resolution bool `json:"resolution"`
	H264       bool `json:"h264"`
}

// FeaturesOf returns the parameters a capture of kind has: a USB dongle
// sends JPEG at a resolution chosen from a list (kvmd's hdmiusb
// configurations set quality 0 and a resolution list); a bridge with DV
// timings (the TC358743, vivid) follows the signal's resolution and is
// encoded at a quality.
func FeaturesOf(kind string) Features {
	if kind == hw.CaptureUSB {
		return Features{Resolution: true}
	}
	return Features{Quality: true}
}

// Params are the stream's settings (kvmd's params and applied): only those
// of the capture's features are shown. H264Bitrate (kbit/s) and H264GOP
// are the H.264 encoder's, with features.h264.
type Params struct {
	Quality     int
	DesiredFPS  int
	Resolution  string
	H264Bitrate int
	H264GOP     int
}

// ustreamer returns the params ustreamer runs with: a change of the
// others (H.264's) does not restart it.
func (p Params) ustreamer() Params {
	p.H264Bitrate, p.H264GOP = 0, 0
	return p
}

// Limits bound the params: kvmd's limits. The H.264 ones are kvmd's
// validators' bounds (h264.MinBitrate...).
type Limits struct {
	DesiredFPSMin, DesiredFPSMax int
	Resolutions                  []string
}

// json returns params as kvmd shows them: desired_fps always, quality and
// resolution when the capture has them, h264_bitrate and h264_gop with
// an H.264 encoder.
func (p Params) json(f Features) map[string]any {
	m := map[string]any{"desired_fps": p.DesiredFPS}
	if f.Quality {
		m["quality"] = p.Quality
	}
	if f.Resolution {
		m["resolution"] = p.Resolution
	}
	if f.H264 {
		m["h264_bitrate"] = p.H264Bitrate
		m["h264_gop"] = p.H264GOP
	}
	return m
}

func (l Limits) json(f Features) map[string]any {
	m := map[string]any{"desired_fps": map[string]int{"min": l.DesiredFPSMin, "max": l.DesiredFPSMax}}
	if f.Resolution {
		m["available_resolutions"] = slices.Clone(l.Resolutions)
	}
	if f.H264 {
		m["h264_bitrate"] = map[string]int{"min": h264.MinBitrate, "max": h264.MaxBitrate}
		m["h264_gop"] = map[string]int{"min": h264.MinGOP, "max": h264.MaxGOP}
	}
	return m
}

// ParseQuality reads a stream quality as kvmd's valid_stream_quality does:
// an integer from 1 to 100.
func ParseQuality(s string) (int, error) { return parseInt("quality", s, 1, 100) }

// ParseFPS reads a frame rate as kvmd's valid_stream_fps does: an integer
// from 0 (as fast as the source goes) to 120.
func ParseFPS(s string) (int, error) { return parseInt("desired_fps", s, 0, MaxFPS) }

// ParseResolution reads WIDTHxHEIGHT, both at least 1, as kvmd's
// valid_stream_resolution does, and returns it in canonical form.
func ParseResolution(s string) (string, error) {
	w, h, ok := strings.Cut(strings.TrimSpace(s), "x")
	if !ok {
		return "", &ParamError{"resolution", "not WIDTHxHEIGHT"}
	}
	wi, err := parseInt("resolution", w, 1, 1<<16)
	if err != nil {
		return "", err
	}
	hi, err := parseInt("resolution", h, 1, 1<<16)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%dx%d", wi, hi), nil
}

func parseInt(name, s string, lo, hi int) (int, error) {
	s = strings.TrimSpace(s)
	var n int64
	var err error
	if rest, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		n, err = strconv.ParseInt(rest, 16, 64) // kvmd's valid_number takes hex too
	} else {
		n, err = strconv.ParseInt(s, 10, 64)
	}
	if err != nil {
		return 0, &ParamError{name, "not an integer"}
	}
	if n < int64(lo) || n > int64(hi) {
		return 0, &ParamError{name, fmt.Sprintf("not from %d to %d", lo, hi)}
	}
	return int(n), nil
}

// Change is a set_params request: the parameters given, as their query
// values (kvmd's names); an empty value is one not given, as in kvmd.
type Change map[string]string

// apply checks ch against the features and limits and returns p with it
// applied. A parameter the capture does not have is refused, as kvmd
// refuses it (StreamerQualityNotSupported, ...); a value outside the
// limits is refused too, where kvmd ignores it silently.
func (p Params) apply(ch Change, f Features, l Limits) (Params, error) {
	if v := ch["quality"]; v != "" {
		if !f.Quality {
			return p, ErrQualityNotSupported
		}
		q, err := ParseQuality(v)
		if err != nil {
			return p, err
		}
		p.Quality = q
	}
	if v := ch["desired_fps"]; v != "" {
		// One range, the limits' (within what ustreamer takes): a
		// message naming 0 to 120 for 150 and 0 to 90 for 100 said two.
		fps, err := parseInt("desired_fps", v, max(l.DesiredFPSMin, 0), min(l.DesiredFPSMax, MaxFPS))
		if err != nil {
			return p, err
		}
		p.DesiredFPS = fps
	}
	if v := ch["resolution"]; v != "" {
		if !f.Resolution {
			return p, ErrResolutionNotSupported
		}
		r, err := ParseResolution(v)
		if err != nil {
			return p, err
		}
		if !slices.Contains(l.Resolutions, r) {
			return p, &ParamError{"resolution", "not one of the available resolutions: " + strings.Join(l.Resolutions, ", ")}
		}
		p.Resolution = r
	}
	for _, h := range []struct {
		name   string
		lo, hi int
		dst    *int
	}{
		{"h264_bitrate", h264.MinBitrate, h264.MaxBitrate, &p.H264Bitrate},
		{"h264_gop", h264.MinGOP, h264.MaxGOP, &p.H264GOP},
	} {
		v := ch[h.name]
		if v == "" {
			continue
		}
		if !f.H264 {
			return p, ErrH264NotSupported
		}
		n, err := parseInt(h.name, v, h.lo, h.hi)
		if err != nil {
			return p, err
		}
		*h.dst = n
	}
	return p, nil
}
