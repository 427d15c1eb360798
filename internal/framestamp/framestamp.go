// Package framestamp writes a picture's number and the time it was drawn
// into the picture itself, as a row of black and white blocks, and reads
// them back from a decoded picture: how make bench measures the time from
// a picture drawn by the demo's source to a client holding it, through
// the daemon and whatever encoder, whatever the protocol.
//
// The row is 64 blocks at the picture's bottom left, each a 48th of its
// width square: a start pattern (1, 0, 1, 0), the number (16 bits), the
// time in milliseconds modulo 2^32 (32 bits), an 8-bit sum of the six
// bytes, and an end pattern (0, 1, 0, 1). Blocks that size survive JPEG
// and H.264 at any quality the daemon uses.
package framestamp

import (
	"image"
	"image/color"
	"image/draw"
	"time"
)

// blocks is the row's length: 4 + 16 + 32 + 8 + 4.
const blocks = 64

// Size is the side of a block in a picture w pixels wide.
func Size(w int) int { return max(w/48, 4) }

// Rect is where the row is in a w x h picture.
func Rect(w, h int) image.Rectangle {
	s := Size(w)
	return image.Rect(s, h-2*s, s+blocks*s/2, h-s)
}

// bits is the row: the patterns, the number, the time, the sum.
func bits(n uint16, ms uint32) [blocks]bool {
	var b [blocks]bool
	put := func(at int, v uint64, width int) {
		for i := range width {
			b[at+i] = v>>(width-1-i)&1 == 1
		}
	}
	put(0, 0b1010, 4)
	put(4, uint64(n), 16)
	put(20, uint64(ms), 32)
	put(52, uint64(sum(n, ms)), 8)
	put(60, 0b0101, 4)
	return b
}

func sum(n uint16, ms uint32) uint8 {
	return uint8(n>>8) + uint8(n) + uint8(ms>>24) + uint8(ms>>16) + uint8(ms>>8) + uint8(ms)
}

// Draw writes number n and time t into img (Rect of its size): blocks
// half a block wide, as tall as one, white for 1 and black for 0.
func Draw(img draw.Image, n uint16, t time.Time) {
	b := img.Bounds()
	r := Rect(b.Dx(), b.Dy()).Add(b.Min)
	bw := (r.Dx() + blocks - 1) / blocks
	for i, on := range bits(n, uint32(t.UnixMilli())) {
		c := color.Black
		if on {
			c = color.White
		}
		draw.Draw(img, image.Rect(r.Min.X+i*bw, r.Min.Y, r.Min.X+(i+1)*bw, r.Max.Y), image.NewUniform(c), image.Point{}, draw.Src)
	}
}

// Read reads the number and the time from the luma plane y of a w x h
// picture (stride bytes a row), sampling the middle of each block; false
// when the patterns or the sum do not hold (a picture without a stamp,
// or one the encoder blurred).
func Read(y []byte, stride, w, h int) (n uint16, ms uint32, ok bool) {
	r := Rect(w, h)
	bw := (r.Dx() + blocks - 1) / blocks
	cy := (r.Min.Y + r.Max.Y) / 2
	var got [blocks]bool
	for i := range blocks {
		cx := r.Min.X + i*bw + bw/2
		if cx >= w || cy >= h || cy*stride+cx >= len(y) {
			return 0, 0, false
		}
		got[i] = y[cy*stride+cx] >= 128
	}
	val := func(at, width int) uint64 {
		var v uint64
		for i := range width {
			v <<= 1
			if got[at+i] {
				v |= 1
			}
		}
		return v
	}
	if val(0, 4) != 0b1010 || val(60, 4) != 0b0101 {
		return 0, 0, false
	}
	n, ms = uint16(val(4, 16)), uint32(val(20, 32))
	if uint8(val(52, 8)) != sum(n, ms) {
		return 0, 0, false
	}
	return n, ms, true
}

// Since is the time from a stamp's ms to now, as well as 32 bits of
// milliseconds tell it (it wraps every 49 days; a stamp is seconds old).
func Since(ms uint32, now time.Time) time.Duration {
	return time.Duration(int32(uint32(now.UnixMilli())-ms)) * time.Millisecond
}
