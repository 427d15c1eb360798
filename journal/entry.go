package journal

import (
	"errors"
	"time"

	"kvmd/journal/export"
)

// Limits on what one entry may make a stream hold. journalctl prints a
// MESSAGE of any size; a stream keeps at most maxMessage bytes of it and
// counts the rest, so a huge entry costs a bounded buffer and a marker in
// the output, never an unbounded allocation. Other fields are skipped as
// they stream past.
const (
	maxMessage   = 1 << 20 // MESSAGE bytes kept per entry
	maxUnit      = 512     // unit names are at most 256 bytes
	maxTimestamp = 32      // a uint64 in decimal is 20
)

// errNoTime is an entry without a valid __REALTIME_TIMESTAMP, which
// journalctl always prints: Copy skips it.
var errNoTime = errors.New("journal: entry without a valid __REALTIME_TIMESTAMP")

// entry is the part of a journal entry that a log line shows.
type entry struct {
	usec    int64 // __REALTIME_TIMESTAMP, microseconds since the epoch
	unit    field // _SYSTEMD_UNIT (its first value when there are several)
	message field // MESSAGE (its first value when there are several), raw bytes
	ts      field // __REALTIME_TIMESTAMP as printed

	// The last second writeLine formatted (see entry.stamp).
	stampLoc  *time.Location
	stampSec  int64
	stampText []byte
}

// field is one value, capped at max bytes.
type field struct {
	b       []byte
	max     int
	dropped int64 // bytes of the value past max
	set     bool  // the entry has this field
}

func (f *field) reset() {
	f.b = f.b[:0]
	f.dropped = 0
	f.set = false
}

// readEntry reads the next entry of `journalctl --output=export` into e,
// reusing e's buffers. Of a field that occurs several times in the entry
// the first value is taken, as `journalctl --output=short` shows it. It
// returns io.EOF at the end of the output, errNoTime (the entry read
// through) for an entry without a valid timestamp, and the reader's
// errors, after which nothing more can be read.
func readEntry(rd *export.Reader, e *entry) error {
	if e.message.max == 0 {
		e.unit.max, e.message.max, e.ts.max = maxUnit, maxMessage, maxTimestamp
	}
	e.usec = 0
	e.unit.reset()
	e.message.reset()
	e.ts.reset()
	for {
		name, err := rd.Next()
		if err != nil {
			return err
		}
		if name == nil {
			break // the entry's end
		}
		var f *field
		switch string(name) {
		case "MESSAGE":
			f = &e.message
		case "_SYSTEMD_UNIT":
			f = &e.unit
		case "__REALTIME_TIMESTAMP":
			f = &e.ts
		}
		if f == nil || f.set {
			continue
		}
		var n int64
		if f.b, n, err = rd.Value(f.b, f.max); err != nil {
			return err
		}
		f.dropped = n - int64(len(f.b))
		f.set = true
	}
	usec, ok := parseUsec(e.ts)
	if !ok {
		return errNoTime
	}
	e.usec = usec
	return nil
}

func parseUsec(f field) (int64, bool) {
	if !f.set || f.dropped > 0 || len(f.b) == 0 || len(f.b) > 18 {
		return 0, false // 18 digits: up to year 33658, and no overflow
	}
	var n int64
	for _, c := range f.b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
