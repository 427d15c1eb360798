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

// Sources of throttling flags, reported in Throttling.Source, in the
// order Throttled tries them.
const (
	// ThrottleMailbox is the firmware itself, asked through the mailbox
	// (FirmwareThrottled): every flag, now and since boot.
	ThrottleMailbox = "mailbox"
	// ThrottleSysfs is the firmware driver's get_throttled attribute,
	// which kernels before raspberrypi/linux pull 6697 (2025) have: every
	// flag, as the kernel's rpi_volt driver last read it (every 2 s, each
	// read clearing the "occurred" bits; see TagGetThrottled).
	ThrottleSysfs = "sysfs"
	// ThrottleHwmon is the rpi_volt hwmon under-voltage alarm: only
	// "under-voltage now" (the driver's last 2 s).
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
	// Source says where Raw came from: ThrottleMailbox, ThrottleSysfs or
	// ThrottleHwmon. Flags from the hwmon alarm never have past bits set;
	// see PastTracker.
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

// Throttled reads the board's throttling flags from the first source
// that answers: the firmware through mb (nil: none, as on a fixture
// root), the firmware driver's get_throttled attribute, the rpi_volt
// hwmon's under-voltage alarm.
//
// Sources that failed other than by being absent (a device the daemon
// may not open, a file that does not parse) are reported in the error,
// joined, even when a later source answered: t is valid whenever
// t.Source is set. With no source at all the error wraps fs.ErrNotExist.
func (f FS) Throttled(mb Mailbox) (t Throttling, err error) {
	var errs []error
	try := func(raw uint32, source string, err error) bool {
		if err == nil {
			t = Throttling{Raw: raw, Source: source}
			return true
		}
		if !Absent(err) {
			errs = append(errs, err)
		}
		return false
	}
	if mb != nil {
		raw, err := FirmwareThrottled(mb)
		if try(raw, ThrottleMailbox, err) {
			return t, errors.Join(errs...)
		}
	}
	raw, err := f.sysfsThrottled()
	if try(raw, ThrottleSysfs, err) {
		return t, errors.Join(errs...)
	}
	raw, err = f.hwmonThrottled()
	if try(raw, ThrottleHwmon, err) {
		return t, errors.Join(errs...)
	}
	if len(errs) > 0 {
		return Throttling{}, errors.Join(errs...)
	}
	return Throttling{}, fmt.Errorf("hw: no firmware mailbox, get_throttled or rpi_volt alarm: %w", fs.ErrNotExist)
}

// sysfsThrottled reads the firmware driver's get_throttled attribute.
func (f FS) sysfsThrottled() (uint32, error) {
	for _, g := range throttledGlobs {
		m, err := f.Glob(g)
		if err != nil {
			return 0, err
		}
		if len(m) == 0 {
			continue
		}
		b, err := f.ReadFile(m[0])
		if err != nil {
			return 0, err
		}
		raw, err := parseThrottled(b)
		if err != nil {
			return 0, fmt.Errorf("hw: parsing %s: %w", m[0], err)
		}
		return raw, nil
	}
	return 0, fmt.Errorf("hw: no get_throttled: %w", fs.ErrNotExist)
}

// hwmonThrottled reads the rpi_volt hwmon's under-voltage alarm into bit
// 0. The driver sets it from the "occurred" bit of its last GET_THROTTLED
// (drivers/hwmon/raspberrypi-hwmon.c), which it clears at each 2 s poll:
// under-voltage within the last poll, that is, now.
func (f FS) hwmonThrottled() (uint32, error) {
	dirs, err := f.Glob("sys/class/hwmon/hwmon*")
	if err != nil {
		return 0, err
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
			return 0, err
		}
		alarm, err := parseAlarm(b)
		if err != nil {
			return 0, fmt.Errorf("hw: parsing %s: %w", rel, err)
		}
		if alarm {
			return bitUndervoltage, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("hw: no rpi_volt alarm: %w", fs.ErrNotExist)
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
