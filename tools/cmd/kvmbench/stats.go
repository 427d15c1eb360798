package main

import (
	"math"
	"math/bits"
	"slices"
	"time"
)

// histSubBits sets the histogram's resolution: 2^histSubBits buckets per
// power of two, so a recorded latency is off by less than 1/64 (1.6 %).
const histSubBits = 6

// histogram is a log-linear latency histogram in nanoseconds. It has a fixed
// size, so recording costs no allocation however long a round runs.
type histogram struct {
	counts [(64 - histSubBits) << histSubBits]uint64
	n      uint64
}

func histBucket(v uint64) int {
	if v < 2<<histSubBits {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return (shift+1)<<histSubBits | int(v>>shift)&(1<<histSubBits-1)
}

// histValue returns the middle of bucket i.
func histValue(i int) uint64 {
	if i < 2<<histSubBits {
		return uint64(i)
	}
	shift := i>>histSubBits - 1
	mant := uint64(i&(1<<histSubBits-1) | 1<<histSubBits)
	return mant<<shift + (uint64(1)<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histBucket(uint64(d))]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the latency at quantile q (0 < q <= 1), or 0 when empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(histValue(i))
		}
	}
	return time.Duration(histValue(len(h.counts) - 1))
}

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN when xs is empty. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// medianInt returns the median of integer samples (durations, byte counts),
// rounded to the nearest integer, or 0 when there are none.
func medianInt[T ~int64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	fs := make([]float64, len(xs))
	for i, x := range xs {
		fs[i] = float64(x)
	}
	return T(math.Round(median(fs)))
}

// ratio returns a/b, or NaN when either is unknown or b is not positive.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// rotate returns xs rotated left by k, so round k starts with scenario k.
func rotate[T any](xs []T, k int) []T {
	if len(xs) == 0 {
		return nil
	}
	k %= len(xs)
	if k < 0 {
		k += len(xs)
	}
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

// percentile returns the q-quantile (0..1) of ds by the nearest rank.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
