#!/bin/sh
# Captures the files kvmd reads on this device into a text archive, the
# fixture format of kvmd's internal/fixture (board/testdata/*.ttar):
#
#   sh capture-board.sh > myboard.ttar        # the running system
#   sh capture-board.sh /mnt/root > x.ttar    # a tree mounted elsewhere
#
# Needs only POSIX sh, od, awk, cat, grep and mktemp (plus readlink and, when
# present, stat), so it runs on Raspberry Pi OS, PiKVM's Arch and busybox
# systems alike.
# Run it as root: some sysfs and configfs attributes are root-only.
#
# What it takes (paths relative to the root): the device-tree model,
# serial-number and compatible; /proc cpuinfo, meminfo, stat, uptime and
# loadavg; kernel host name, ostype, osrelease, version and arch; thermal
# zones' type and temp; the firmware's get_throttled; every hwmon's name and
# in0_lcrit_alarm; the whole USB gadget tree below /sys/kernel/config; every
# UDC's state; every video4linux node's (video and sub-device) name, index,
# dev and its device's driver; every media device's model and dev; PiKVM's
# platform file. Reading get_throttled may log a one-time "deprecated"
# warning in the kernel log; that is harmless.
#
# A sysfs symlink with a relative target (sys/class/... -> ../../devices/...)
# is stored as a symlink, and the files below it are stored under its
# target, so the unpacked tree resolves the same way. A symlink with an
# absolute target (/proc/device-tree -> /sys/firmware/devicetree/base) is
# followed instead, since such a target would leave the unpacked tree.
# Files that cannot be read are skipped with a note on stderr. Review the
# output before publishing it: it holds the board's serial number and host
# name.
set -eu

ROOT=${1:-/}
ROOT=${ROOT%/}
if [ -n "$ROOT" ] && [ ! -d "$ROOT" ]; then
	echo "capture-board.sh: $ROOT is not a directory" >&2
	exit 2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/capture-board.XXXXXX")
trap 'rm -rf "$TMP"' EXIT HUP INT TERM
: >"$TMP/seen"

warn() { echo "capture-board.sh: $*" >&2; }

# seen PATH: true if PATH was written already, else remembers it.
seen() {
	if grep -qxF -- "$1" "$TMP/seen"; then
		return 0
	fi
	printf '%s\n' "$1" >>"$TMP/seen"
	return 1
}

# esc STRING: STRING with the archive's escapes (every byte outside
# printable ASCII, and the backslash).
esc() {
	case $1 in
	*[!A-Za-z0-9._@:,+=/-]*) printf '%s' "$1" | od -An -v -tx1 | awk "$AWK_ESCAPE" ;;
	*) printf '%s' "$1" ;;
	esac
}

# The escape of od's hex dump on stdin: awk -v tab=1 keeps tabs and splits
# at newlines (file content); otherwise everything is escaped on one line.
AWK_HEX='
BEGIN {
	for (i = 0; i < 256; i++) hex[sprintf("%02x", i)] = i
	for (i = 32; i < 127; i++) chr[i] = sprintf("%c", i)
	chr[92] = "\\\\"
}
function enc(b) {
	if (b in chr) return chr[b]
	if (b == 9 && tab) return "\t"
	return sprintf("\\x%02x", b)
}
'
# shellcheck disable=SC2016 # an awk program: its $ are awk's
AWK_ESCAPE="$AWK_HEX"'
{ for (i = 1; i <= NF; i++) printf "%s", enc(hex[$i]) }
'
# Content: counts bytes and lines, then prints the Size and Lines headers
# and the escaped lines.
# shellcheck disable=SC2016 # likewise
AWK_CONTENT="$AWK_HEX"'
{
	for (i = 1; i <= NF; i++) {
		b = hex[$i]; size++
		if (b == 10) { line[n++] = cur; cur = ""; open = 0 }
		else { cur = cur enc(b); open = 1 }
	}
}
END {
	if (open) line[n++] = cur
	printf "Size: %d\nLines: %d\n", size, n
	for (i = 0; i < n; i++) print line[i]
}
'

# normalize PATH: PATH with "." and ".." elements resolved lexically;
# fails if it climbs above the root.
normalize() {
	printf '%s\n' "$1" | awk -F/ '{
		n = 0
		for (i = 1; i <= NF; i++) {
			if ($i == "" || $i == ".") continue
			if ($i == "..") { if (n == 0) exit 1; n--; continue }
			p[n++] = $i
		}
		s = ""
		for (i = 0; i < n; i++) s = s (i ? "/" : "") p[i]
		print s
	}'
}

# emit_file REL [SRC]: writes the File entry of the regular file REL,
# read from SRC (default REL).
emit_file() {
	seen "$1" && return 0
	src=${2:-$1}
	if ! cat "$ROOT/$src" >"$TMP/data" 2>/dev/null; then
		warn "cannot read /$src, skipped"
		return 0
	fi
	printf 'File: %s\n' "$(esc "$1")"
	mode=$(stat -c %a "$ROOT/$src" 2>/dev/null) && printf 'Mode: %s\n' "$mode"
	od -An -v -tx1 <"$TMP/data" | awk -v tab=1 "$AWK_CONTENT"
}

emit_dir() {
	seen "$1" && return 0
	printf 'Directory: %s\n' "$(esc "$1")"
}

emit_link() {
	seen "$1" && return 0
	printf 'Symlink: %s\nTarget: %s\n' "$(esc "$1")" "$(esc "$2")"
}

# capture REL: stores REL (a file, or a directory or symlink by name),
# resolving symlinks on the way as described at the top. Below a followed
# absolute link, dst (the archive's path) and src (where it is read)
# differ, and every further link is followed too.
capture() {
	dst=
	src=
	rest=$1
	while [ -n "$rest" ]; do
		comp=${rest%%/*}
		case $rest in
		*/*) rest=${rest#*/} ;;
		*) rest= ;;
		esac
		dcur=${dst:+$dst/}$comp
		scur=${src:+$src/}$comp
		if [ -L "$ROOT/$scur" ]; then
			target=$(readlink "$ROOT/$scur")
			case $target in
			/*) base= ;;
			*) base=$src ;;
			esac
			resolved=$(normalize "${base:+$base/}$target") || {
				warn "/$scur points outside the root, skipped"
				return 0
			}
			case $target in
			/*) ;;
			*)
				if [ "$dst" = "$src" ]; then
					emit_link "$dcur" "$target"
					[ -e "$ROOT/$resolved" ] || return 0
					capture "$resolved${rest:+/$rest}"
					return 0
				fi
				;;
			esac
			dst=$dcur
			src=$resolved
			continue
		fi
		dst=$dcur
		src=$scur
	done
	if [ -f "$ROOT/$src" ]; then
		emit_file "$dst" "$src"
	elif [ -d "$ROOT/$src" ]; then
		# Directories are implied by their files; an entry keeps
		# empty ones, such as the target of a driver link.
		emit_dir "$dst"
	fi
}

# walk REL: the tree below the directory REL, symlinks kept as they are.
walk() {
	for p in "$ROOT/$1"/* "$ROOT/$1"/.[!.]*; do
		[ -e "$p" ] || [ -L "$p" ] || continue
		r=${p#"$ROOT"/}
		if [ -L "$p" ]; then
			emit_link "$r" "$(readlink "$p")"
		elif [ -d "$p" ]; then
			emit_dir "$r"
			walk "$r"
		elif [ -f "$p" ]; then
			emit_file "$r"
		fi
	done
}

# each PATTERN...: captures every path matching a shell pattern relative to
# the root. A pattern that matches nothing stays as it is and is skipped;
# a plain path is left to capture, since its links may be absolute and so
# only resolve below the root there.
each() {
	for pat in "$@"; do
		for p in "$ROOT"/$pat; do
			case $p in
			*'*'*) continue ;;
			esac
			capture "${p#"$ROOT"/}"
		done
	done
}

echo "# fixture archive: see kvmd internal/fixture; written by scripts/capture-board.sh"

each proc/device-tree/model proc/device-tree/serial-number proc/device-tree/compatible
each proc/cpuinfo proc/meminfo proc/stat proc/uptime proc/loadavg
each proc/sys/kernel/hostname proc/sys/kernel/ostype proc/sys/kernel/osrelease \
	proc/sys/kernel/version proc/sys/kernel/arch
each 'sys/class/thermal/thermal_zone*/type' 'sys/class/thermal/thermal_zone*/temp'
each 'sys/devices/platform/soc*/*firmware/get_throttled'
each 'sys/class/hwmon/hwmon*/name' 'sys/class/hwmon/hwmon*/in0_lcrit_alarm'
for g in "$ROOT"/sys/kernel/config/usb_gadget/*; do
	[ -d "$g" ] || continue
	r=${g#"$ROOT"/}
	emit_dir "$r"
	walk "$r"
done
each 'sys/class/udc/*/state'
each 'sys/class/video4linux/video*/name' 'sys/class/video4linux/video*/index' \
	'sys/class/video4linux/video*/dev' 'sys/class/video4linux/video*/device/driver'
each 'sys/class/video4linux/v4l-subdev*/name' 'sys/class/video4linux/v4l-subdev*/index' \
	'sys/class/video4linux/v4l-subdev*/dev' 'sys/class/video4linux/v4l-subdev*/device/driver'
each 'sys/bus/media/devices/media*/model' 'sys/bus/media/devices/media*/dev'
each usr/lib/kvmd/platform
