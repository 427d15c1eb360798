package streamertest

import (
	"kvmd/hw"
	"kvmd/streamer"
)

// Video is a streamer.Video for tests: it always finds Device (or Err, when
// set), and reads the signal with Read (nil: not known).
type Video struct {
	Device streamer.Capture
	Err    error
	Read   func() *hw.Video
}

// Capture returns Device, or Err.
func (v Video) Capture() (streamer.Capture, error) {
	if v.Err != nil {
		return streamer.Capture{}, v.Err
	}
	return v.Device, nil
}

// Signal is Read's answer; nil without Read.
func (v Video) Signal() *hw.Video {
	if v.Read == nil {
		return nil
	}
	return v.Read()
}
