package journal

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Query is what one journalctl command line selects and how it prints it:
// Open's streams and the support bundle's journal files (package diag) are
// both made with Args, so that the units, the directory and the quirks of
// journalctl's options are handled in one place.
type Query struct {
	// Output is journalctl's --output mode; "" is Open's: export, with
	// only the fields a stream reads.
	Output string
	// Units restricts to the configured unit patterns.
	Units bool
	// Dmesg restricts to the kernel's messages.
	Dmesg bool
	// Since, when set, starts there (to the microsecond).
	Since time.Time
	// Priority, when set, is journalctl's --priority (e.g. "warning":
	// warnings and worse).
	Priority string
	// Lines, when set, keeps the last n entries.
	Lines int
	// Follow keeps reading the entries written later.
	Follow bool
	// Boot restricts to one boot: "" none, BootCurrent the current one
	// (in a Dir, its last), or a journalctl offset ("0", "-1").
	Boot string
}

// BootCurrent is Query.Boot's current boot (journalctl's bare --boot).
const BootCurrent = "current"

// Args returns journalctl's arguments for q on r's journal.
func (r *Reader) Args(q Query) []string {
	a := []string{"--quiet", "--no-pager"}
	if q.Output == "" {
		a = append(a, "--output=export", "--output-fields=_SYSTEMD_UNIT,MESSAGE") // the timestamps always come
	} else {
		a = append(a, "--output="+q.Output)
	}
	if r.cfg.Dir != "" {
		a = append(a, "--directory="+r.cfg.Dir)
	}
	if q.Units {
		for _, u := range r.cfg.Units {
			a = append(a, "--unit="+u)
		}
	}
	if q.Dmesg {
		a = append(a, "--dmesg")
	}
	if q.Priority != "" {
		a = append(a, "--priority="+q.Priority)
	}
	if !q.Since.IsZero() {
		a = append(a, fmt.Sprintf("--since=@%d.%06d", q.Since.Unix(), q.Since.Nanosecond()/1000))
	}
	switch {
	case q.Follow:
		a = append(a, "--follow", "--lines=all") // -f alone starts at the last 10
		if q.Boot == "" {
			a = append(a, "--merge") // else --follow implies --boot
		}
	case q.Lines > 0:
		a = append(a, fmt.Sprintf("--lines=%d", q.Lines))
	}
	switch q.Boot {
	case "":
	case BootCurrent:
		// Last: journalctl takes the word after a bare --boot as its
		// argument when that word parses as a boot ID or offset.
		a = append(a, "--boot")
	default:
		a = append(a, "--boot="+q.Boot)
	}
	return a
}

// What journalctl's failures mean when they mean "no entries" rather than
// "broken". journalctl tells them apart only in words on its stderr (run
// with LC_ALL=C.UTF-8): Classify is the one place that reads them, and
// everything else decides with errors.Is.
var (
	// ErrNoSuchBoot: the boot asked for is not in the journal (a
	// directory without entries has no last boot; a first boot has no
	// previous one).
	ErrNoSuchBoot = errors.New("journal: no such boot")
	// ErrNoUnitEntries: no entry of the unit patterns is in the journal
	// (only globs were given, and none matched).
	ErrNoUnitEntries = errors.New("journal: no entries of the units")
	// ErrNoPersistentBoots: a boot was asked for, but without a
	// persistent journal there are no boots to choose from.
	ErrNoPersistentBoots = errors.New("journal: no persistent journal to choose a boot in")
)

// journalctlSays are the sentences of journalctl (systemd 252 to 257,
// src/journal/journalctl.c) behind each kind.
var journalctlSays = []struct {
	text string
	kind error
}{
	{"No such boot ID", ErrNoSuchBoot},
	{"Failed to add filter for units", ErrNoUnitEntries},
	{"Specifying boot ID or boot offset has no effect", ErrNoPersistentBoots},
}

// Classify returns the kind of failure journalctl's stderr (or its output
// with stderr merged in) reports: ErrNoSuchBoot, ErrNoUnitEntries,
// ErrNoPersistentBoots, or nil for any other.
func Classify(stderr string) error {
	for _, s := range journalctlSays {
		if strings.Contains(stderr, s.text) {
			return s.kind
		}
	}
	return nil
}

// NoEntries reports whether err (from Classify, or an error wrapping
// journalctl's exit) means that there is nothing to show, not a failure.
func NoEntries(err error) bool {
	return errors.Is(err, ErrNoSuchBoot) || errors.Is(err, ErrNoUnitEntries) || errors.Is(err, ErrNoPersistentBoots)
}
