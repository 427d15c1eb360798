package ffmpeg

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The encoder's output is FLV: each encoded picture comes as one tag
// with its size, timestamp and key-frame flag, so that a picture is
// handed on the moment its tag is read, where a raw H.264 stream's
// picture ends only when the next one begins. Layout from Adobe's FLV
// specification, version 10.1 (E.4.1 FLV tags, E.4.3.1 VIDEODATA).

// errFLV is output that is not the FLV the encoder expects.
var errFLV = errors.New("ffmpeg: malformed FLV")

// flvTag is one FLV tag.
type flvTag struct {
	typ  byte   // 8 audio, 9 video, 18 script data
	ms   uint32 // timestamp
	data []byte
}

type flvReader struct {
	r   *bufio.Reader
	hdr bool
}

func newFLVReader(r io.Reader) *flvReader { return &flvReader{r: bufio.NewReaderSize(r, 64<<10)} }

// maxTag bounds a tag: a picture of the largest size kvmd streams at the
// highest bitrate is far below.
const maxTag = 16 << 20

// next reads the next tag.
func (f *flvReader) next() (flvTag, error) {
	if !f.hdr {
		var h [13]byte // the header, then PreviousTagSize0
		if _, err := io.ReadFull(f.r, h[:]); err != nil {
			return flvTag{}, err
		}
		if string(h[:3]) != "FLV" || binary.BigEndian.Uint32(h[5:9]) != 9 {
			return flvTag{}, fmt.Errorf("%w: no FLV header", errFLV)
		}
		f.hdr = true
	}
	var h [11]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		return flvTag{}, err
	}
	size := int(h[1])<<16 | int(h[2])<<8 | int(h[3])
	if size > maxTag {
		return flvTag{}, fmt.Errorf("%w: a tag of %d bytes", errFLV, size)
	}
	t := flvTag{typ: h[0] & 0x1f, ms: uint32(h[7])<<24 | uint32(h[4])<<16 | uint32(h[5])<<8 | uint32(h[6])}
	t.data = make([]byte, size+4) // and the PreviousTagSize after it
	if _, err := io.ReadFull(f.r, t.data); err != nil {
		return flvTag{}, unexpected(err)
	}
	t.data = t.data[:size]
	return t, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// avcPacket is an FLV video tag of H.264 (codec 7).
type avcPacket struct {
	key bool
	// config is true for the AVCDecoderConfigurationRecord (the
	// sequence header), false for NAL units.
	config bool
	// end is true for the end of the sequence.
	end     bool
	payload []byte
}

func parseAVC(data []byte) (avcPacket, error) {
	if len(data) < 5 {
		return avcPacket{}, fmt.Errorf("%w: a video tag of %d bytes", errFLV, len(data))
	}
	if data[0]&0x0f != 7 {
		return avcPacket{}, fmt.Errorf("%w: video codec %d, not H.264", errFLV, data[0]&0x0f)
	}
	p := avcPacket{key: data[0]>>4 == 1, payload: data[5:]}
	switch data[1] {
	case 0:
		p.config = true
	case 1:
	case 2:
		p.end = true
	default:
		return avcPacket{}, fmt.Errorf("%w: AVC packet type %d", errFLV, data[1])
	}
	return p, nil
}

// parseAVCConfig reads the SPS and PPS of an AVCDecoderConfigurationRecord
// (ISO/IEC 14496-15, 5.2.4.1).
func parseAVCConfig(b []byte) (sps, pps [][]byte, err error) {
	bad := fmt.Errorf("%w: AVC configuration record", errFLV)
	if len(b) < 6 || b[0] != 1 {
		return nil, nil, bad
	}
	lengthSize := int(b[4]&3) + 1
	if lengthSize != 4 {
		return nil, nil, fmt.Errorf("%w: NAL length size %d", errFLV, lengthSize)
	}
	b = b[5:]
	read := func(n int) ([][]byte, bool) {
		var out [][]byte
		for range n {
			if len(b) < 2 {
				return nil, false
			}
			l := int(binary.BigEndian.Uint16(b))
			if len(b) < 2+l {
				return nil, false
			}
			out = append(out, b[2:2+l])
			b = b[2+l:]
		}
		return out, true
	}
	n := int(b[0] & 0x1f)
	b = b[1:]
	var ok bool
	if sps, ok = read(n); !ok || len(b) < 1 {
		return nil, nil, bad
	}
	n = int(b[0])
	b = b[1:]
	if pps, ok = read(n); !ok {
		return nil, nil, bad
	}
	return sps, pps, nil
}
