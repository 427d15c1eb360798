#!/bin/sh
# mkdeb.sh ARCH VERSION BINARY OUTDIR: builds OUTDIR/kvmd_VERSION_ARCH.deb,
# the package for Raspberry Pi OS (and Debian) machines that run kvmd
# without the full image: BINARY (the `make cross` build for ARCH: arm64,
# armhf = GOARM=7, or amd64) as /usr/bin/kvmd, the units and sysusers.d
# file from systemd/, the manual page man/kvmd.8, the fleet files (alert
# rules from prometheus/, the journal-upload configuration from systemd/),
# and the maintainer scripts from scripts/deb/.
#
# Reproducible: every file root:root (--root-owner-group), 0755 or 0644,
# with the mtime SOURCE_DATE_EPOCH (default: the commit date of HEAD),
# which dpkg-deb also uses for the archive members and sorts them by.
# DEB_MAINTAINER overrides the Maintainer (default: HEAD's author).
set -eu

usage() {
	echo "usage: $0 arm64|armhf|amd64 VERSION BINARY OUTDIR" >&2
	exit 2
}
[ $# -eq 4 ] || usage
arch=$1 version=$2 binary=$3 outdir=$4
case $arch in arm64 | armhf | amd64) ;; *) usage ;; esac
case $version in
[0-9]*) ;;
*)
	echo "$0: Debian version '$version' must start with a digit" >&2
	exit 2
	;;
esac
[ -f "$binary" ] || {
	echo "$0: no binary $binary" >&2
	exit 1
}

top=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git -C "$top" log -1 --format=%ct)
fi
export SOURCE_DATE_EPOCH
maintainer=${DEB_MAINTAINER:-$(git -C "$top" log -1 --format='%an <%ae>')}

umask 022
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT INT TERM
root=$stage/kvmd

# put MODE SRC DEST: one file into the tree.
put() {
	mkdir -p "$root/$(dirname "$3")"
	cp "$2" "$root/$3"
	chmod "$1" "$root/$3"
}

put 0755 "$binary" usr/bin/kvmd
for u in kvmd.service kvmd.socket kvmd-firstboot.service kvmd-otg.service; do
	put 0644 "$top/systemd/$u" "usr/lib/systemd/system/$u"
done
put 0644 "$top/systemd/sysusers.d/kvmd.conf" usr/lib/sysusers.d/kvmd.conf
# The USB gadget (kvmd-otg.service): libcomposite at boot, and its
# keyboard's and mouse's device nodes for the user kvmd alone.
put 0644 "$top/systemd/modules-load.d/kvmd.conf" usr/lib/modules-load.d/kvmd.conf
put 0644 "$top/systemd/udev/90-kvmd-otg.rules" usr/lib/udev/rules.d/90-kvmd-otg.rules
# The GPIO chips for the group gpio, as Raspberry Pi OS has them.
put 0644 "$top/systemd/udev/90-kvmd-gpio.rules" usr/lib/udev/rules.d/90-kvmd-gpio.rules
# For fleets: the alert rules for a central Prometheus, and the
# configuration of systemd-journal-upload (package systemd-journal-remote;
# off until an operator sets its URL and enables the service).
put 0644 "$top/prometheus/kvmd.rules.yml" usr/share/kvmd/prometheus/kvmd.rules.yml
put 0644 "$top/systemd/journal-upload.conf.d/kvmd.conf" etc/systemd/journal-upload.conf.d/kvmd.conf
put 0644 "$top/scripts/deb/lintian-overrides" usr/share/lintian/overrides/kvmd
# gzip -9 as Debian policy asks; -n keeps the name and time out of the
# header, so the bytes depend on the page alone.
mkdir -p "$root/usr/share/man/man8"
gzip -9n <"$top/man/kvmd.8" >"$root/usr/share/man/man8/kvmd.8.gz"
chmod 0644 "$root/usr/share/man/man8/kvmd.8.gz"

# The years: the first commit's to SOURCE_DATE_EPOCH's.
last=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y)
first=$(git -C "$top" log --reverse --format=%cd --date=format:%Y 2>/dev/null | head -n 1)
years=${first:-$last}
[ "$years" = "$last" ] || years="$years-$last"

doc=$root/usr/share/doc/kvmd
mkdir -p "$doc"
cat >"$doc/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: kvmd
Comment: Built from the kvmd repository; the binary is statically linked
 and includes the Go standard library and the Go modules listed in the
 repository's go.mod, under their own licenses.

Files: *
Copyright: $years the kvmd authors
License: other
 The kvmd authors have not chosen a license yet: the repository has no
 LICENSE file. Until they do, no rights beyond those of applicable law are
 granted; ask the authors before redistributing.
COPYRIGHT

date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
{
	echo "kvmd ($version) unstable; urgency=medium"
	echo
	echo "  * Built from the kvmd repository (systemd/, scripts/mkdeb.sh)."
	echo
	echo " -- $maintainer  $date"
} | gzip -9n >"$doc/changelog.Debian.gz"

mkdir -p "$root/DEBIAN"
size=$(du -sk --apparent-size "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: kvmd
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: systemd
Recommends: ustreamer, ffmpeg
Suggests: systemd-journal-remote
Section: admin
Priority: optional
Description: KVM-over-IP HTTP API daemon for Raspberry Pi
 kvmd serves the HTTP API of a Raspberry Pi KVM-over-IP appliance: board
 and hardware information (temperature, throttling, memory, CPU, video
 capture, GPIO) and the system journal, behind password logins with
 optional two-factor authentication, over HTTPS. It runs ustreamer on
 the capture device for the host's screen (the console page, PiKVM's
 streamer API), when ustreamer is installed, and ffmpeg to send it in
 H.264 (WebRTC, PiKVM's Direct H.264) where the board has no encoder.
 .
 This package is for machines that run Raspberry Pi OS rather than the
 full appliance image. It installs the daemon, its systemd units (socket
 activation on port 443, sandboxing, watchdog) and the system user kvmd.
 At the first boot, or at once on a running system, "kvmd firstboot"
 creates the admin password (shown on the console), a self-signed TLS
 certificate and the settings in /etc/kvmd.
CONTROL
if [ "$arch" = armhf ]; then
	cat >>"$root/DEBIAN/control" <<NOTE
 .
 This armhf build needs an ARMv7 board (Raspberry Pi 2 and later): it does
 not run on the ARMv6 Raspberry Pi 1, Zero and Zero W.
NOTE
fi
(cd "$root" && find usr -type f | LC_ALL=C sort | xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"
# Files in /etc are conffiles: an operator's changes survive upgrades.
(cd "$root" && find etc -type f | LC_ALL=C sort | sed 's|^|/|') >"$root/DEBIAN/conffiles"
chmod 0644 "$root/DEBIAN/conffiles"
for s in postinst prerm postrm; do
	put 0755 "$top/scripts/deb/$s" "DEBIAN/$s"
done

# Fixed modes and mtimes for all; dpkg-deb sorts the members itself.
find "$root" -type d -exec chmod 0755 {} +
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$outdir"
dpkg-deb --root-owner-group -Zxz --build "$root" "$outdir/kvmd_${version}_$arch.deb" >/dev/null
echo "$outdir/kvmd_${version}_$arch.deb"
