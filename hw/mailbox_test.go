package hw

import (
	"errors"
	"slices"
	"testing"
)

func TestEncodeProperty(t *testing.T) {
	tests := []struct {
		name  string
		tag   uint32
		value []byte
		size  int
		want  []uint32
	}{
		// What the kernel's rpi_volt driver sends (value 0xffff), and
		// what kvmd sends instead (0): 7 words, 28 bytes.
		{"get_throttled clearing", TagGetThrottled, []byte{0xff, 0xff, 0, 0}, 4,
			[]uint32{28, 0, 0x00030046, 4, 0, 0xffff, 0}},
		{"get_throttled read-only", TagGetThrottled, make([]byte, 4), 4,
			[]uint32{28, 0, 0x00030046, 4, 0, 0, 0}},
		// A value shorter than its buffer is padded with zeros, a size
		// not of whole words rounded up.
		{"padded", 0x00010001, []byte{1, 2, 3}, 6, []uint32{32, 0, 0x00010001, 8, 0, 0x030201, 0, 0}},
		{"no value", 0x00000001, nil, 0, []uint32{24, 0, 1, 0, 0, 0}},
		{"value longer than size", 0x00000001, []byte{1, 0, 0, 0, 2}, 4, []uint32{32, 0, 1, 8, 0, 1, 2, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := encodeProperty(tt.tag, tt.value, tt.size); !slices.Equal(got, tt.want) {
				t.Errorf("encodeProperty = %#x, want %#x", got, tt.want)
			}
		})
	}

	// A gencmd request as vcgencmd lays it out: the error word, then the
	// command, in 263 words (raspberrypi/utils vcgencmd.c: 6 + 256 + 1).
	buf := encodeProperty(TagGetGencmdResult, append(make([]byte, 4), "get_throttled\x00"...), gencmdSize)
	if len(buf) != 263 || buf[0] != 263*4 || buf[3] != 1028 || buf[5] != 0 || buf[262] != 0 {
		t.Errorf("gencmd buffer: %d words, size %d, value size %d, error word %d, end %d", len(buf), buf[0], buf[3], buf[5], buf[262])
	}
	if got := string(wordsBytes(buf[6:10])); got != "get_throttled\x00\x00\x00" {
		t.Errorf("gencmd command %q", got)
	}
}

func wordsBytes(w []uint32) []byte {
	b := make([]byte, 0, 4*len(w))
	for _, x := range w {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
}

func TestDecodeProperty(t *testing.T) {
	answer := func(code, tag, size, resp uint32, val ...uint32) []uint32 {
		b := append([]uint32{0, code, tag, size, resp}, val...)
		b = append(b, 0)
		b[0] = uint32(len(b) * 4)
		return b
	}
	const gencmd = TagGetGencmdResult
	tests := []struct {
		name        string
		tag         uint32 // asked for
		buf         []uint32
		want        []byte
		unsupported bool // the error wraps ErrFirmwareUnsupported
		wantErr     bool
	}{
		{"flags", TagGetThrottled, answer(0x80000000, TagGetThrottled, 4, 0x80000004, 0x50000), []byte{0, 0, 5, 0}, false, false},
		{"short response", gencmd, answer(0x80000000, gencmd, 8, 0x80000006, 0x64636261, 0x6665), []byte("abcdef"), false, false},
		{"empty response", 0x00048001, answer(0x80000000, 0x00048001, 0, 0x80000000), []byte{}, false, false},
		{"tag not answered", TagGetThrottled, answer(0x80000000, TagGetThrottled, 4, 0, 0), nil, true, true},
		{"parse error", TagGetThrottled, answer(0x80000001, TagGetThrottled, 4, 0, 0), nil, true, true},
		{"still a request", TagGetThrottled, answer(0, TagGetThrottled, 4, 0x80000004, 1), nil, false, true},
		{"odd code", TagGetThrottled, answer(0x80000002, TagGetThrottled, 4, 0x80000004, 1), nil, false, true},
		{"truncated", TagGetThrottled, answer(0x80000000, TagGetThrottled, 4, 0x80000008, 1), nil, false, true},
		{"other tag", TagGetThrottled, answer(0x80000000, 0x00010002, 4, 0x80000004, 1), nil, false, true},
		{"value past the buffer", TagGetThrottled, answer(0x80000000, TagGetThrottled, 64, 0x80000004, 1), nil, false, true},
		{"size word wrong", TagGetThrottled, []uint32{99, 0x80000000, TagGetThrottled, 4, 0x80000004, 1, 0}, nil, false, true},
		{"too short", TagGetThrottled, []uint32{12, 0x80000000, 0}, nil, false, true},
		{"empty", TagGetThrottled, nil, nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeProperty(tt.buf, tt.tag)
			if (err != nil) != tt.wantErr || errors.Is(err, ErrFirmwareUnsupported) != tt.unsupported {
				t.Fatalf("decodeProperty error = %v, want error %v, unsupported %v", err, tt.wantErr, tt.unsupported)
			}
			if !tt.wantErr && string(got) != string(tt.want) {
				t.Errorf("decodeProperty = %q, want %q", got, tt.want)
			}
		})
	}
}
