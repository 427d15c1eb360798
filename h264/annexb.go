package h264

import (
	"bytes"
	"errors"
	"fmt"
)

// NAL unit types (ITU-T H.264 table 7-1) the daemon looks at.
const (
	NALSlice = 1 // a coded slice of a non-IDR picture
	NALIDR   = 5 // a coded slice of an IDR picture
	NALSEI   = 6
	NALSPS   = 7
	NALPPS   = 8
	NALAUD   = 9
)

// startCode is the four-byte Annex B start code the daemon writes.
var startCode = []byte{0, 0, 0, 1}

// SplitNALs returns the NAL units of an Annex B stream, without their
// start codes (of three or four bytes) and the zeros that may trail them.
// Data before the first start code is not a NAL unit and is left out.
func SplitNALs(b []byte) [][]byte {
	var nals [][]byte
	start := -1
	for i := 0; i+2 < len(b); {
		if b[i+2] > 1 {
			i += 3
			continue
		}
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 {
			if start >= 0 {
				end := i
				for end > start && b[end-1] == 0 {
					end-- // a four-byte start code's zero, trailing zeros: a NAL unit ends in a non-zero byte
				}
				nals = append(nals, b[start:end])
			}
			i += 3
			start = i
			continue
		}
		i++
	}
	if start >= 0 && start < len(b) {
		nals = append(nals, b[start:])
	}
	return nals
}

// NALType is the type of a NAL unit (without its start code).
func NALType(nal []byte) int {
	if len(nal) == 0 {
		return 0
	}
	return int(nal[0] & 0x1f)
}

// AppendNAL appends nal to b after a start code.
func AppendNAL(b, nal []byte) []byte {
	b = append(b, startCode...)
	return append(b, nal...)
}

// HasType says whether the Annex B unit holds a NAL unit of type t.
func HasType(unit []byte, t int) bool {
	for _, n := range SplitNALs(unit) {
		if NALType(n) == t {
			return true
		}
	}
	return false
}

// SPS is what the daemon reads of a sequence parameter set: the profile
// and level (for the profile-level-id of SDP and the avc1 codec string of
// WebCodecs) and the picture's size.
type SPS struct {
	// ProfileIDC, Constraints (the byte of constraint_set flags) and
	// LevelIDC are the SPS's first three bytes after its header.
	ProfileIDC, Constraints, LevelIDC byte
	Width, Height                     int
}

// ProfileLevelID is the six hex digits of RFC 6184's profile-level-id
// (and of the "avc1." codec string): "42C028".
func (s SPS) ProfileLevelID() string {
	return fmt.Sprintf("%02X%02X%02X", s.ProfileIDC, s.Constraints, s.LevelIDC)
}

// ErrBadSPS is an SPS that cannot be read.
var ErrBadSPS = errors.New("h264: malformed SPS")

// ParseSPS reads an SPS NAL unit (its header byte first, no start code).
func ParseSPS(nal []byte) (SPS, error) {
	if NALType(nal) != NALSPS || len(nal) < 4 {
		return SPS{}, ErrBadSPS
	}
	s := SPS{ProfileIDC: nal[1], Constraints: nal[2], LevelIDC: nal[3]}
	r := &bitReader{b: unescape(nal[4:])}
	r.ue() // seq_parameter_set_id
	chromaFormat := uint64(1)
	separateColour := false
	switch s.ProfileIDC {
	case 100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135:
		chromaFormat = r.ue()
		if chromaFormat == 3 {
			separateColour = r.bit() == 1
		}
		r.ue()            // bit_depth_luma_minus8
		r.ue()            // bit_depth_chroma_minus8
		r.bit()           // qpprime_y_zero_transform_bypass_flag
		if r.bit() == 1 { // seq_scaling_matrix_present_flag
			n := 8
			if chromaFormat == 3 {
				n = 12
			}
			for i := 0; i < n; i++ {
				if r.bit() == 1 {
					size := 16
					if i >= 6 {
						size = 64
					}
					skipScalingList(r, size)
				}
			}
		}
	}
	r.ue()          // log2_max_frame_num_minus4
	switch r.ue() { // pic_order_cnt_type
	case 0:
		r.ue() // log2_max_pic_order_cnt_lsb_minus4
	case 1:
		r.bit()
		r.se()
		r.se()
		n := r.ue()
		for i := uint64(0); i < n && r.err == nil; i++ {
			r.se()
		}
	}
	r.ue()  // max_num_ref_frames
	r.bit() // gaps_in_frame_num_value_allowed_flag
	wMbs := r.ue() + 1
	hMapUnits := r.ue() + 1
	frameMbsOnly := r.bit()
	if frameMbsOnly == 0 {
		r.bit() // mb_adaptive_frame_field_flag
	}
	r.bit() // direct_8x8_inference_flag
	var cl, cr, ct, cb uint64
	if r.bit() == 1 { // frame_cropping_flag
		cl, cr, ct, cb = r.ue(), r.ue(), r.ue(), r.ue()
	}
	if r.err != nil || wMbs > 1<<12 || hMapUnits > 1<<12 {
		return SPS{}, ErrBadSPS
	}
	cropX, cropY := uint64(1), 2-frameMbsOnly
	if !separateColour && chromaFormat != 0 {
		subW, subH := uint64(2), uint64(2)
		switch chromaFormat {
		case 2:
			subH = 1
		case 3:
			subW, subH = 1, 1
		}
		cropX, cropY = subW, subH*(2-frameMbsOnly)
	}
	w := int64(wMbs*16) - int64((cl+cr)*cropX)
	h := int64(hMapUnits*16*(2-frameMbsOnly)) - int64((ct+cb)*cropY)
	if w <= 0 || h <= 0 {
		return SPS{}, ErrBadSPS
	}
	s.Width, s.Height = int(w), int(h)
	return s, nil
}

func skipScalingList(r *bitReader, size int) {
	last, next := int64(8), int64(8)
	for j := 0; j < size && r.err == nil; j++ {
		if next != 0 {
			next = (last + r.se() + 256) % 256
		}
		if next != 0 {
			last = next
		}
	}
}

// unescape removes the emulation prevention bytes (00 00 03 -> 00 00).
func unescape(b []byte) []byte {
	if !bytes.Contains(b, []byte{0, 0, 3}) {
		return b
	}
	out := make([]byte, 0, len(b))
	zeros := 0
	for _, c := range b {
		if zeros >= 2 && c == 3 {
			zeros = 0
			continue
		}
		out = append(out, c)
		if c == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

// bitReader reads an RBSP's bits and Exp-Golomb codes; past the end it
// sets err and reads zeros.
type bitReader struct {
	b   []byte
	pos int // in bits
	err error
}

func (r *bitReader) bit() uint64 {
	if r.pos >= len(r.b)*8 {
		r.err = ErrBadSPS
		return 0
	}
	v := r.b[r.pos/8] >> (7 - r.pos%8) & 1
	r.pos++
	return uint64(v)
}

func (r *bitReader) ue() uint64 {
	zeros := 0
	for r.bit() == 0 {
		if r.err != nil || zeros >= 32 {
			r.err = ErrBadSPS
			return 0
		}
		zeros++
	}
	v := uint64(0)
	for i := 0; i < zeros; i++ {
		v = v<<1 | r.bit()
	}
	return 1<<zeros - 1 + v
}

func (r *bitReader) se() int64 {
	v := r.ue()
	if v&1 == 1 {
		return int64(v+1) / 2
	}
	return -int64(v / 2)
}
