// Package h264 makes the picture into H.264 for the daemon's clients:
// WebRTC peers (package whep) and PiKVM's Direct H.264 over /api/media/ws
// (package mediaws).
//
// An Encoder turns Frames (JPEG from ustreamer's MJPEG stream, or raw
// pictures) into Units, the access units of H.264 in Annex B form, each
// with its key-frame flag; an Opener opens one for a size and Settings
// (bitrate, GOP). Two kinds exist: the software one, ffmpeg with libx264
// run as a child process (package h264/ffmpeg), and a board's V4L2
// memory-to-memory hardware encoder.
//
// The Pipeline runs an encoder as the streamer runs ustreamer: started
// when the first subscriber comes, stopped a delay after the last has
// gone, one at a time, restarted with a backoff when it dies, a new one
// opened when the picture's size or the settings change. Its units go to
// every subscriber; one that joins, or fell behind and lost units, waits
// for the next key unit, which it asks for.
package h264
