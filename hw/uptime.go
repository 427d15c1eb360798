package hw

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Uptime reads proc/uptime: the time since boot.
func (f FS) Uptime() (time.Duration, error) {
	const rel = "proc/uptime"
	b, err := f.ReadFile(rel)
	if err != nil {
		return 0, err
	}
	d, err := parseUptime(b)
	if err != nil {
		return 0, fmt.Errorf("hw: parsing %s: %w", rel, err)
	}
	return d, nil
}

// parseUptime parses proc/uptime, "1662.39 1476.95": seconds since boot,
// then idle seconds summed over CPUs (ignored). It parses the decimal
// exactly rather than through a float.
func parseUptime(b []byte) (time.Duration, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty")
	}
	s := f[0]
	if !isDecimal(s) {
		return 0, fmt.Errorf("uptime %q is not a decimal number", s)
	}
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || sec > math.MaxInt64/uint64(time.Second) {
		return 0, fmt.Errorf("uptime %q out of range", s)
	}
	d := time.Duration(sec) * time.Second
	for i, unit := 0, time.Second/10; i < len(frac) && unit > 0; i, unit = i+1, unit/10 {
		d += time.Duration(frac[i]-'0') * unit
	}
	// The fraction can push the largest whole seconds past MaxInt64 by
	// less than a second, which wraps negative.
	if d < 0 {
		return 0, fmt.Errorf("uptime %q out of range", s)
	}
	return d, nil
}
