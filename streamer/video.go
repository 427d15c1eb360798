package streamer

import "kvmd/hw"

// Video is what the streamer learns of the capture from the daemon's own
// reading of it: the capture device to run on, found at each start (a USB
// dongle may come and go), and its signal, the truth for "online", which
// ustreamer 4.9 does not report. Machine is the device's; tests pass their
// own.
type Video interface {
	// Capture finds the capture device; without one, an error wrapping
	// ErrNoCapture.
	Capture() (Capture, error)
	// Signal is the capture's reading now (hw.ReadVideo); nil when not
	// known.
	Signal() *hw.Video
}

// Machine is the Video of the machine under FS's root: the capture found
// there (FindCapture), the signal as Reader last read it (package info's
// Source, whose reading /api/info shows too).
type Machine struct {
	FS     hw.FS
	Reader interface{ Video() *hw.Video }
}

// Capture finds the capture device below the root.
func (m Machine) Capture() (Capture, error) { return FindCapture(m.FS) }

// Signal is Reader's reading of the capture; nil without a Reader.
func (m Machine) Signal() *hw.Video {
	if m.Reader == nil {
		return nil
	}
	return m.Reader.Video()
}

// noVideo is Config.Video's zero: no capture device, the signal unknown.
type noVideo struct{}

func (noVideo) Capture() (Capture, error) { return Capture{}, ErrNoCapture }
func (noVideo) Signal() *hw.Video         { return nil }
