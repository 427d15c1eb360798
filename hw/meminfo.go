package hw

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Mem is the machine's physical memory, in bytes.
type Mem struct {
	// Total is the usable RAM.
	Total uint64
	// Available estimates what can be given to programs without
	// swapping.
	Available uint64
}

// Percent returns the share of memory in use, (Total-Available)/Total, in
// percent rounded to one decimal as psutil does.
func (m Mem) Percent() float64 {
	if m.Total == 0 || m.Available >= m.Total {
		return 0
	}
	return roundTenth(float64(m.Total-m.Available) / float64(m.Total) * 100)
}

// MemInfo reads proc/meminfo.
func (f FS) MemInfo() (Mem, error) {
	const rel = "proc/meminfo"
	b, err := f.ReadFile(rel)
	if err != nil {
		return Mem{}, err
	}
	m, err := parseMeminfo(b)
	if err != nil {
		return Mem{}, fmt.Errorf("hw: parsing %s: %w", rel, err)
	}
	return m, nil
}

// parseMeminfo parses proc/meminfo. Available is MemAvailable (Linux 3.14
// and later), else MemFree + Buffers + Cached.
func parseMeminfo(b []byte) (Mem, error) {
	want := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached":
		default:
			continue
		}
		if _, dup := want[key]; dup {
			return Mem{}, fmt.Errorf("%s repeated", key)
		}
		v, err := parseMeminfoValue(rest)
		if err != nil {
			return Mem{}, fmt.Errorf("%s: %w", key, err)
		}
		want[key] = v
	}

	var m Mem
	var ok bool
	if m.Total, ok = want["MemTotal"]; !ok {
		return Mem{}, errors.New("no MemTotal")
	}
	if m.Total == 0 {
		return Mem{}, errors.New("MemTotal is 0")
	}
	if m.Available, ok = want["MemAvailable"]; ok {
		return m, nil
	}
	free, ok := want["MemFree"]
	if !ok {
		return Mem{}, errors.New("neither MemAvailable nor MemFree")
	}
	// Each term is below 2^62 (see parseMeminfoValue): the sum cannot
	// overflow.
	m.Available = free + want["Buffers"] + want["Cached"]
	return m, nil
}

// parseMeminfoValue parses the part of a meminfo line after the colon,
// "  3884012 kB", into bytes.
func parseMeminfoValue(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("value %q is not a size in kB", strings.TrimSpace(s))
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q: %w", f[0], err)
	}
	// Bound bytes below 2^62 so that three values still add up.
	if n > math.MaxUint64>>10>>2 {
		return 0, fmt.Errorf("value %s kB is too large", f[0])
	}
	return n << 10, nil
}

// roundTenth rounds x to one decimal the way Python's round(x, 1) does:
// to the nearest tenth of the exact binary value, ties to even.
func roundTenth(x float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 1, 64), 64)
	if err != nil {
		return x
	}
	return r
}
