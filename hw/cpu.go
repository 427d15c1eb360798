package hw

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CPUTimes are the time all CPUs together have spent in each state since
// boot, in clock ticks (USER_HZ, a hundredth of a second on Linux), from
// the cpu line of proc/stat. Columns an older kernel lacks are zero.
// User and Nice include Guest and GuestNice.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal, Guest, GuestNice uint64
}

// CPUTimes reads the summary line of proc/stat.
func (f FS) CPUTimes() (CPUTimes, error) {
	const rel = "proc/stat"
	b, err := f.ReadFile(rel)
	if err != nil {
		return CPUTimes{}, err
	}
	c, err := parseStat(b)
	if err != nil {
		return CPUTimes{}, fmt.Errorf("hw: parsing %s: %w", rel, err)
	}
	return c, nil
}

// parseStat parses the first line of proc/stat starting with "cpu ": four
// to ten columns (Linux 2.6.33 and later have all ten), further columns
// ignored.
func parseStat(b []byte) (CPUTimes, error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, "cpu ")
		if !ok {
			continue
		}
		cols := strings.Fields(rest)
		if len(cols) < 4 {
			return CPUTimes{}, fmt.Errorf("cpu line has %d columns, want at least 4", len(cols))
		}
		var c CPUTimes
		dst := []*uint64{&c.User, &c.Nice, &c.System, &c.Idle, &c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal, &c.Guest, &c.GuestNice}
		for i, col := range cols[:min(len(cols), len(dst))] {
			n, err := strconv.ParseUint(col, 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("cpu column %d: %w", i+1, err)
			}
			*dst[i] = n
		}
		return c, nil
	}
	return CPUTimes{}, errors.New(`no "cpu " line`)
}

// userHZ is the unit of proc/stat: clock ticks per second, 100 on every
// Linux architecture.
const userHZ = 100

// CPUPercent returns how busy the CPUs were between two samples, in
// percent, computed as kvmd does from psutil.cpu_times_percent(): each
// state's share of the elapsed time is rounded to a tenth of a percent,
// then busy is user + nice + system + irq + softirq + steal + guest over
// the sum of the shares. The float arithmetic follows psutil's step by
// step (seconds, then deltas, then shares) because the result is truncated
// to an integer: computed otherwise, 100 can come out as 99. It reports
// false when no tick passed between the samples.
// Counters that went backwards count as zero, as in psutil.
func CPUPercent(prev, cur CPUTimes) (int, bool) {
	d := func(a, b uint64) float64 {
		return max(0, float64(b)/userHZ-float64(a)/userHZ)
	}
	user, nice := d(prev.User, cur.User), d(prev.Nice, cur.Nice)
	system, idle := d(prev.System, cur.System), d(prev.Idle, cur.Idle)
	iowait, irq := d(prev.IOWait, cur.IOWait), d(prev.IRQ, cur.IRQ)
	softirq, steal := d(prev.SoftIRQ, cur.SoftIRQ), d(prev.Steal, cur.Steal)
	guest, guestNice := d(prev.Guest, cur.Guest), d(prev.GuestNice, cur.GuestNice)

	// psutil's total leaves guest time out: User and Nice include it.
	all := user + nice + system + idle + iowait + irq + softirq + steal + guest + guestNice - guest - guestNice
	if all <= 0 {
		return 0, false
	}
	scale := 100 / max(1, all)
	pct := func(x float64) float64 { return min(max(roundTenth(x*scale), 0), 100) }
	pUser, pNice, pSystem, pIdle := pct(user), pct(nice), pct(system), pct(idle)
	pIOWait, pIRQ, pSoftIRQ, pSteal := pct(iowait), pct(irq), pct(softirq), pct(steal)
	pGuest, pGuestNice := pct(guest), pct(guestNice)

	// kvmd's arithmetic on psutil's percentages, term for term.
	systemAll := pSystem + pIRQ + pSoftIRQ
	idleAll := pIdle + pIOWait
	virtual := pGuest + pGuestNice
	total := max(1, (pUser-pGuest)+(pNice-pGuestNice)+systemAll+idleAll+pSteal+virtual)
	busy := pNice/total*100 + pUser/total*100 + systemAll/total*100 + (pSteal+pGuest)/total*100
	// kvmd counts guest time twice (in user and on its own); keep the
	// result a percentage.
	return int(min(busy, 100)), true
}

// SinceBoot returns how busy the CPUs have been since boot, in percent, as
// CPUPercent from zero times.
func (c CPUTimes) SinceBoot() (int, bool) {
	return CPUPercent(CPUTimes{}, c)
}

// LoadAvg reads proc/loadavg: the 1, 5 and 15 minute load averages.
func (f FS) LoadAvg() ([3]float64, error) {
	const rel = "proc/loadavg"
	b, err := f.ReadFile(rel)
	if err != nil {
		return [3]float64{}, err
	}
	l, err := parseLoadAvg(b)
	if err != nil {
		return [3]float64{}, fmt.Errorf("hw: parsing %s: %w", rel, err)
	}
	return l, nil
}

// parseLoadAvg parses proc/loadavg, "0.57 1.97 2.19 1/87 10840".
func parseLoadAvg(b []byte) ([3]float64, error) {
	var l [3]float64
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, fmt.Errorf("%d fields, want at least 3", len(f))
	}
	for i := range l {
		if !isDecimal(f[i]) {
			return l, fmt.Errorf("load %q is not a decimal number", f[i])
		}
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || math.IsInf(v, 0) {
			return l, fmt.Errorf("load %q out of range", f[i])
		}
		l[i] = v
	}
	return l, nil
}

// isDecimal reports whether s is digits with at most one decimal point and
// a digit on each side of it: no sign, exponent, NaN or Inf.
func isDecimal(s string) bool {
	whole, frac, hasPoint := strings.Cut(s, ".")
	digits := func(t string) bool {
		return t != "" && strings.TrimLeft(t, "0123456789") == ""
	}
	return digits(whole) && (!hasPoint || digits(frac))
}
