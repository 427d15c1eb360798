// Package v4l2m2m drives a board's stateful V4L2 memory-to-memory video
// encoder: raw pictures in, coded frames out, each with its key-frame flag
// and the time of the picture it came from.
//
// On a Raspberry Pi 4, CM4, 400 or Zero 2 W the H.264 encoder is the
// bcm2835-codec driver's encode node (/dev/video11, card
// "bcm2835-codec-encode"); the Pi 5 has none. The kernel's test driver
// vicodec has a stateful encoder with the same interface, whose codec is
// FWHT: the booted test proves the package on it.
//
// The package follows the kernel's stateful encoder interface
// (Documentation/userspace-api/media/v4l/dev-encoder.rst): the coded format
// on the CAPTURE queue first, then the raw one on OUTPUT, the frame
// interval, mmap buffers on both queues, both queues streaming; a new size
// is a drain, both queues stopped, the buffers freed and the sequence
// again; a key frame on demand is the driver's
// V4L2_CID_MPEG_VIDEO_FORCE_KEY_FRAME where it has that control, else the
// interface's reset (drain, CAPTURE stopped and started), after which the
// stream starts anew with a key frame. Each Encode waits for its own
// frame, so that nothing is held inside the encoder between pictures: a
// picture goes out as soon as it is coded.
//
// Controls (bitrate, GOP, forced key frames, repeated SPS and PPS) are set
// where the driver has them; one it lacks is reported absent, which is not
// an error.
package v4l2m2m
