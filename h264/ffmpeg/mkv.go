package ffmpeg

import (
	"encoding/binary"
	"fmt"
	"io"

	"kvmd/h264"
)

// The encoder's input is a Matroska stream of one video track: the one
// container ffmpeg reads from a pipe that carries a timestamp with each
// picture for JPEG and raw pictures alike. The timestamps are how a key
// frame is asked for (see encoder.go). Element IDs from the Matroska
// specification (RFC 9559).
const (
	idEBML           = 0x1A45DFA3
	idEBMLVersion    = 0x4286
	idEBMLReadVer    = 0x42F7
	idEBMLMaxIDLen   = 0x42F2
	idEBMLMaxSizeLen = 0x42F3
	idDocType        = 0x4282
	idDocTypeVer     = 0x4287
	idDocTypeReadVer = 0x4285
	idSegment        = 0x18538067
	idInfo           = 0x1549A966
	idTimestampScale = 0x2AD7B1
	idMuxingApp      = 0x4D80
	idWritingApp     = 0x5741
	idTracks         = 0x1654AE6B
	idTrackEntry     = 0xAE
	idTrackNumber    = 0xD7
	idTrackUID       = 0x73C5
	idTrackType      = 0x83
	idCodecID        = 0x86
	idVideo          = 0xE0
	idPixelWidth     = 0xB0
	idPixelHeight    = 0xBA
	idColourSpace    = 0x2EB524
	idCluster        = 0x1F43B675
	idTimestamp      = 0xE7
	idSimpleBlock    = 0xA3
)

// unknownSize is the size of a live Segment: eight bytes of ones.
var unknownSize = []byte{0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// fourCC is the ColourSpace of a raw format (ffmpeg's raw pixel format
// tags).
var fourCC = map[h264.Format]string{h264.YUYV: "YUY2", h264.UYVY: "UYVY", h264.NV12: "NV12", h264.I420: "I420"}

// appendID appends an element ID, its marker bits included.
func appendID(b []byte, id uint32) []byte {
	switch {
	case id >= 1<<24:
		return append(b, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
	case id >= 1<<16:
		return append(b, byte(id>>16), byte(id>>8), byte(id))
	case id >= 1<<8:
		return append(b, byte(id>>8), byte(id))
	}
	return append(b, byte(id))
}

// appendSize appends n as an EBML variable-size integer, in as few
// bytes as hold it (the all-ones value of each length is reserved).
func appendSize(b []byte, n uint64) []byte {
	l := 1
	for l < 8 && n >= 1<<(7*l)-1 {
		l++
	}
	v := n | 1<<(7*l)
	for i := l - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func appendElem(b []byte, id uint32, body []byte) []byte {
	b = appendID(b, id)
	b = appendSize(b, uint64(len(body)))
	return append(b, body...)
}

func appendUint(b []byte, id uint32, v uint64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	n := 7
	for n > 0 && buf[7-n] == 0 {
		n--
	}
	return appendElem(b, id, buf[7-n:])
}

// mkvHeader is the start of the stream: the EBML header, a Segment of
// unknown size, its Info (timestamps in milliseconds) and its one track.
func mkvHeader(f h264.Format, width, height int) ([]byte, error) {
	var ebml []byte
	ebml = appendUint(ebml, idEBMLVersion, 1)
	ebml = appendUint(ebml, idEBMLReadVer, 1)
	ebml = appendUint(ebml, idEBMLMaxIDLen, 4)
	ebml = appendUint(ebml, idEBMLMaxSizeLen, 8)
	ebml = appendElem(ebml, idDocType, []byte("matroska"))
	ebml = appendUint(ebml, idDocTypeVer, 4)
	ebml = appendUint(ebml, idDocTypeReadVer, 2)

	var info []byte
	info = appendUint(info, idTimestampScale, 1_000_000)
	info = appendElem(info, idMuxingApp, []byte("kvmd"))
	info = appendElem(info, idWritingApp, []byte("kvmd"))

	var video []byte
	video = appendUint(video, idPixelWidth, uint64(width))
	video = appendUint(video, idPixelHeight, uint64(height))
	codec := "V_MJPEG"
	if f != h264.JPEG {
		cs, ok := fourCC[f]
		if !ok {
			return nil, fmt.Errorf("ffmpeg: no input format for %v", f)
		}
		codec = "V_UNCOMPRESSED"
		video = appendElem(video, idColourSpace, []byte(cs))
	}
	var track []byte
	track = appendUint(track, idTrackNumber, 1)
	track = appendUint(track, idTrackUID, 1)
	track = appendUint(track, idTrackType, 1) // video
	track = appendElem(track, idCodecID, []byte(codec))
	track = appendElem(track, idVideo, video)

	var b []byte
	b = appendElem(b, idEBML, ebml)
	b = appendID(b, idSegment)
	b = append(b, unknownSize...)
	b = appendElem(b, idInfo, info)
	b = appendElem(b, idTracks, appendElem(nil, idTrackEntry, track))
	return b, nil
}

// writeBlock writes one picture at ms milliseconds as a Cluster of its
// own holding one SimpleBlock (a key block of track 1): its header, then
// the picture as it is, not copied.
func writeBlock(w io.Writer, ms uint64, data []byte) error {
	block := []byte{0x81, 0, 0, 0x80} // track 1, relative time 0, key
	inner := appendUint(nil, idTimestamp, ms)
	inner = appendID(inner, idSimpleBlock)
	inner = appendSize(inner, uint64(len(block)+len(data)))
	inner = append(inner, block...)
	hdr := appendID(nil, idCluster)
	hdr = appendSize(hdr, uint64(len(inner)+len(data)))
	hdr = append(hdr, inner...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}
