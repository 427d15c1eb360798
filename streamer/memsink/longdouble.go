package memsink

import (
	"encoding/binary"
	"math"
)

// ustreamer keeps its timestamps as C long double, whose form depends on
// the machine: the x87 80-bit extended format in 16 bytes on x86-64,
// IEEE 754 binary128 on aarch64, a double on 32-bit ARM (AAPCS). These
// convert a float64 (seconds of a monotonic clock: positive, normal) to
// and from each, exactly where the format holds more.

// putX87 writes v as an x87 extended double: a 64-bit significand with
// its integer bit, a 15-bit exponent biased by 16383, the sign; the
// padding to 16 bytes is zero.
func putX87(b []byte, v float64) {
	clear(b[:16])
	bits := math.Float64bits(v)
	exp := int(bits>>52) & 0x7ff
	if exp == 0 || exp == 0x7ff { // zero, subnormal, inf, NaN: none is a time
		return
	}
	mant := 1<<63 | (bits&(1<<52-1))<<11
	binary.LittleEndian.PutUint64(b, mant)
	binary.LittleEndian.PutUint16(b[8:], uint16(exp-1023+16383)|uint16(bits>>48)&0x8000)
}

// getX87 reads an x87 extended double, rounded to a float64.
func getX87(b []byte) float64 {
	mant := binary.LittleEndian.Uint64(b)
	se := binary.LittleEndian.Uint16(b[8:])
	if mant == 0 {
		return 0
	}
	v := math.Ldexp(float64(mant), int(se&0x7fff)-16383-63)
	if se&0x8000 != 0 {
		v = -v
	}
	return v
}

// putQuad writes v as an IEEE 754 binary128: a 112-bit fraction, a 15-bit
// exponent biased by 16383, the sign.
func putQuad(b []byte, v float64) {
	clear(b[:16])
	bits := math.Float64bits(v)
	exp := int(bits>>52) & 0x7ff
	if exp == 0 || exp == 0x7ff {
		return
	}
	frac := bits & (1<<52 - 1) // the top 52 of the 112 fraction bits
	hi := bits&(1<<63) | uint64(exp-1023+16383)<<48 | frac>>4
	lo := frac << 60
	binary.LittleEndian.PutUint64(b, lo)
	binary.LittleEndian.PutUint64(b[8:], hi)
}

// getQuad reads an IEEE 754 binary128, rounded to a float64.
func getQuad(b []byte) float64 {
	lo := binary.LittleEndian.Uint64(b)
	hi := binary.LittleEndian.Uint64(b[8:])
	exp := int(hi>>48) & 0x7fff
	if exp == 0 {
		return 0
	}
	// The significand's top 64 bits: the integer bit, then 63 of the
	// fraction's.
	mant := 1<<63 | (hi&(1<<48-1))<<15 | lo>>49
	v := math.Ldexp(float64(mant), exp-16383-63)
	if hi>>63 != 0 {
		v = -v
	}
	return v
}

// putDouble and getDouble are 32-bit ARM's long double.
func putDouble(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) }
func getDouble(b []byte) float64    { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }
