package hw

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
)

// Sources of throttling flags, reported in Throttling.Source.
const (
	// ThrottleFirmware is the Raspberry Pi firmware's get_throttled
	// attribute: every flag, now and past.
	ThrottleFirmware = "firmware"
	// ThrottleHwmon is the rpi_volt hwmon under-voltage alarm: only
	// "under-voltage now".
	ThrottleHwmon = "hwmon"
)

// Bits of the Raspberry Pi firmware's throttling flags. Bits 0-3 say what
// holds now; the same bits shifted by pastShift say it happened since boot.
const (
	bitUndervoltage  = 1 << 0
	bitFreqCapped    = 1 << 1
	bitThrottled     = 1 << 2
	bitSoftTempLimit = 1 << 3
	nowMask          = bitUndervoltage | bitFreqCapped | bitThrottled | bitSoftTempLimit
	pastShift        = 16
)

// Throttling is the board's raw throttling state.
type Throttling struct {
	// Raw holds the firmware's flags (bits 0-3 now, 16-19 past).
	Raw uint32
	// Source says where Raw came from: ThrottleFirmware or ThrottleHwmon.
	// Flags from the hwmon alarm never have past bits set; see
	// PastTracker.
	Source string
}

// Flag is one throttling condition.
type Flag struct {
	// Now is true while the condition holds.
	Now bool
	// Past is true when it has held since boot.
	Past bool
}

// Flags are the throttling conditions the Raspberry Pi firmware reports.
type Flags struct {
	Undervoltage  Flag // supply below about 4.63 V (bits 0, 16)
	FreqCapped    Flag // ARM frequency capped (bits 1, 17)
	Throttled     Flag // CPU throttled (bits 2, 18)
	SoftTempLimit Flag // soft temperature limit active (bits 3, 19)
}

// Flags decodes t.Raw.
func (t Throttling) Flags() Flags {
	flag := func(bit uint32) Flag {
		return Flag{Now: t.Raw&bit != 0, Past: t.Raw&(bit<<pastShift) != 0}
	}
	return Flags{
		Undervoltage:  flag(bitUndervoltage),
		FreqCapped:    flag(bitFreqCapped),
		Throttled:     flag(bitThrottled),
		SoftTempLimit: flag(bitSoftTempLimit),
	}
}

// throttledGlobs find the firmware's get_throttled attribute at depth 1 to
// 3 below sys/devices/platform: soc/soc:firmware on a Pi 4, a different
// bus name on other models. Shallow patterns come first so a Pi answers
// without walking the deeper tree.
var throttledGlobs = []string{
	"sys/devices/platform/*firmware/get_throttled",
	"sys/devices/platform/*/*firmware/get_throttled",
	"sys/devices/platform/*/*/*firmware/get_throttled",
}

// Throttled reads the board's throttling flags: the Raspberry Pi
// firmware's get_throttled attribute, else the rpi_volt hwmon's
// under-voltage alarm. The error wraps fs.ErrNotExist when the board has
// neither.
func (f FS) Throttled() (Throttling, error) {
	for _, g := range throttledGlobs {
		m, err := f.Glob(g)
		if err != nil {
			return Throttling{}, err
		}
		if len(m) == 0 {
			continue
		}
		b, err := f.ReadFile(m[0])
		if err != nil {
			return Throttling{}, err
		}
		raw, err := parseThrottled(b)
		if err != nil {
			return Throttling{}, fmt.Errorf("hw: parsing %s: %w", m[0], err)
		}
		return Throttling{Raw: raw, Source: ThrottleFirmware}, nil
	}

	dirs, err := f.Glob("sys/class/hwmon/hwmon*")
	if err != nil {
		return Throttling{}, err
	}
	for _, dir := range dirs {
		if name, err := f.ReadString(dir + "/name"); err != nil || name != "rpi_volt" {
			continue
		}
		rel := path.Join(dir, "in0_lcrit_alarm")
		b, err := f.ReadFile(rel)
		if Absent(err) {
			continue
		}
		if err != nil {
			return Throttling{}, err
		}
		alarm, err := parseAlarm(b)
		if err != nil {
			return Throttling{}, fmt.Errorf("hw: parsing %s: %w", rel, err)
		}
		var raw uint32
		if alarm {
			raw = bitUndervoltage
		}
		return Throttling{Raw: raw, Source: ThrottleHwmon}, nil
	}
	return Throttling{}, fmt.Errorf("hw: no get_throttled or rpi_volt alarm: %w", fs.ErrNotExist)
}

// parseThrottled parses get_throttled: hexadecimal, with or without 0x,
// also as vcgencmd prints it ("throttled=0x50005").
func parseThrottled(b []byte) (uint32, error) {
	s := strings.TrimSpace(string(b))
	h := strings.TrimPrefix(s, "throttled=")
	if len(h) > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') {
		h = h[2:]
	}
	n, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("flags %q: %w", s, err)
	}
	return uint32(n), nil
}

// parseAlarm parses a hwmon alarm attribute: 0 or 1.
func parseAlarm(b []byte) (bool, error) {
	switch s := strings.TrimSpace(string(b)); s {
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, errors.New("alarm " + strconv.Quote(s) + " is neither 0 nor 1")
	}
}

// PastTracker supplies the past bits a source without them lacks (the
// hwmon alarm): it remembers every now bit seen since the daemon started.
// The zero value is ready to use; it is safe for concurrent use.
type PastTracker struct {
	mu   sync.Mutex
	seen uint32 // now bits ever observed
}

// Track records the now bits of t and returns t with every now bit seen so
// far ORed into the matching past bit. Past bits already set are kept.
func (p *PastTracker) Track(t Throttling) Throttling {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen |= t.Raw & nowMask
	t.Raw |= p.seen << pastShift
	return t
}
