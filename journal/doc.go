// Package journal streams the daemon's journal entries as kvmd's log lines
// (GET /api/log):
//
//	[2024-05-01 12:00:00 kvmd.service] --- message\r\n
//
// It runs journalctl instead of linking libsystemd, so the binary stays
// free of cgo, and reads its export format (package export): each field
// as NAME=value or, for a value that is not printable UTF-8, as its name,
// its length and its bytes; nothing escaped, nothing cut. One Open is one
// journalctl process:
//
//	journalctl --output=export --output-fields=_SYSTEMD_UNIT,MESSAGE
//	    --quiet --no-pager [--directory=DIR] --unit=kvmd.service
//	    --unit=kvmd-*.service [--since=@UNIX.USEC] [--follow --lines=all]
//	    --boot
//
// with LC_ALL=C.UTF-8 (Open recognises two of its messages). The
// timestamps come whatever --output-fields says; --follow alone would
// start at the last 10 entries; --boot comes last because journalctl
// takes the word after a bare --boot as its argument when that word
// parses as a boot.
//
// WriteLog is Open, Copy and Close in one call, the shape an HTTP handler
// wants (httpd.LogSource); Open's errors are *Error values, which carry
// the HTTP status and the sentence to answer with.
//
// # Which entries
//
// The current boot's. With a directory of journal files there is no
// running boot: in systemd 252, --boot (= --boot=0 = -b -0) with
// --directory is the last boot in the files, in journal order (the boot
// whose entries were written last, as in --list-boots; not this machine's
// boot ID, even when the files hold it). It is resolved when journalctl
// starts. In systemd 252 --follow implies --boot unless --merge is given.
//
// Of the units': --unit expands globs against the unit names in the
// journal when journalctl starts, and also brings PID 1's and coredumps'
// messages about the unit, so every entry is matched again here against
// _SYSTEMD_UNIT with path.Match, as kvmd matches _SYSTEMD_UNIT only. A
// unit matching a glob that first logs after a follow started is not seen
// by that follow (kvmd has the same limit).
//
// # Failing versus having nothing yet
//
// Open returns an *Error of kind ErrUnavailable, before any output, when
// journalctl cannot do its job, and a Stream otherwise, without making a
// healthy follow wait. It
//
//  1. checks what journalctl would silently work around: the binary
//     exists (exec.LookPath); the directory, or for the system journal
//     /run/log/journal or /var/log/journal, exists and is readable, and if
//     it holds journal files this process can open at least one
//     (journalctl skips unreadable files and shows nothing, so a daemon
//     outside the systemd-journal group would get an empty log, not an
//     error);
//  2. starts journalctl and waits until it prints something (healthy),
//     exits (status 0: an empty result; else its stderr, shortened, is
//     the reason), or, with follow, creates its inotify descriptor, which
//     journalctl does after opening the files and applying the filters
//     (healthy; seen in /proc/PID/fd a few milliseconds after the start),
//     polling with growing steps of 1 to 20 ms; after 2 s it gives up
//     waiting and returns the stream;
//  3. takes two failures of journalctl as "nothing yet" and retries: a
//     directory without any boot (--boot fails: "No such boot ID") is
//     read without --boot (and with --merge when following), as
//     everything to come is new; patterns that
//     are all globs and match no unit yet ("Failed to add filter for
//     units") are dropped from the command line and applied here only.
//
// Errors after the stream started (journalctl dying, or output that is
// not in the export format, after which nothing can be trusted) are
// Copy's result. An entry without a timestamp is skipped.
//
// # Memory and processes
//
// Copy flushes what it wrote when reading on would wait: a line after a
// quiet spell (a follow caught up) goes out at once; while journalctl's
// output keeps coming (a backlog), lines wait for the next entry up to
// flushEvery (1 ms) after the last flush. A flush per 4 KiB that
// journalctl writes to the pipe cost the daemon and its client more than
// the lines themselves.
//
// A stream holds a 64 KiB read buffer, a 32 KiB write buffer, and one
// entry's message of at most 1 MiB (longer ones are cut, with a marker);
// a slow client blocks Copy, the pipe fills and journalctl waits: back
// pressure, not buffering. journalctl runs in its own process group with
// SIGKILL as its parent-death signal; Close kills the group and reaps
// it, on every path. Streams with follow are limited to MaxFollowers.
package journal
