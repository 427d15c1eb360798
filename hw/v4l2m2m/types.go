package v4l2m2m

import (
	"slices"
	"time"
)

// Config is what Open needs.
type Config struct {
	// Device is the encoder's node: "/dev/video11" (Detect finds it).
	Device string
	// Coded is the format made: H264 (FWHT on vicodec).
	Coded PixelFormat
	// Bitrate is the bitrate asked for, in kbit/s (kvmd's h264_bitrate);
	// 0 leaves the driver's.
	Bitrate int
	// GOP is the frames from one key frame to the next (kvmd's h264_gop);
	// 0 asks for as few as the driver allows; negative leaves the
	// driver's. See SetGOP.
	GOP int
	// FPS is the frame rate the encoder is told to expect (its rate
	// control works per frame); 0 is 30. bcm2835-codec made bad frames
	// with none (pikvm/ustreamer's src/ustreamer/m2m.c says so).
	FPS int
	// Timeout bounds the wait for one frame's coded data and a drain;
	// 0 is 2 s (a Pi's encoder takes a few ms; an emulated machine more).
	Timeout time.Duration
}

// Controls says which of the encoder controls the driver has: those it
// lacks are not set, which is not an error.
type Controls struct {
	Bitrate       bool `json:"bitrate"`        // V4L2_CID_MPEG_VIDEO_BITRATE
	GOP           bool `json:"gop"`            // V4L2_CID_MPEG_VIDEO_H264_I_PERIOD for H.264, else ..._GOP_SIZE
	ForceKeyFrame bool `json:"force_key"`      // V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME; without it a key frame is a reset
	RepeatHeaders bool `json:"repeat_headers"` // ..._REPEAT_SEQ_HEADER or ..._PREPEND_SPSPPS_TO_IDR: SPS and PPS before every key frame
}

// Device is a stateful encoder as Probe found it.
type Device struct {
	// Path is its node: "/dev/video11".
	Path string `json:"path"`
	// Driver and Card are what VIDIOC_QUERYCAP says: "bcm2835-codec" and
	// "bcm2835-codec-encode"; "vicodec" and "vicodec".
	Driver string `json:"driver"`
	Card   string `json:"card"`
	// MPlane is the multi-planar API (bcm2835-codec's; vicodec's with
	// multiplanar=1).
	MPlane bool `json:"mplane"`
	// Coded are the formats it makes (its CAPTURE queue's), Raw those it
	// takes for the coded format asked for (its OUTPUT queue's then).
	Coded []PixelFormat `json:"coded"`
	Raw   []PixelFormat `json:"raw"`
}

// Takes says whether the encoder takes raw frames of p.
func (d Device) Takes(p PixelFormat) bool { return slices.Contains(d.Raw, p) }
