#!/bin/sh
# rootfs.sh [-n] CACHE: the image test's Debian system, built once per
# package list and cached: prints the directory in CACHE that holds it.
# With -n it only checks that this host can build and boot it, and says
# why not (make test runs the image test where it can).
#
# The directory, named by a hash of this script's commands (its package
# list and mmdebstrap options), the files of guest/ and the apt sources,
# holds base.img (the root file system, ext4, 3 GiB, sparse),
# vmlinuz and initrd.img (Debian's kernel and the initramfs it made), and
# packages.txt (what is installed). It is built with mmdebstrap from
# Debian's packages only, from the mirrors this machine's apt uses (the
# Release names bookworm, bookworm-updates and bookworm-security in
# apt-get indextargets) or from KVMD_IMAGETEST_MIRROR. Foreign maintainer
# scripts run under qemu-user through binfmt_misc (make deps sets it up).
#
# The system is Debian 12 for arm64 as a Raspberry Pi OS Lite is: systemd
# as init, udev, D-Bus, the kernel, systemd-networkd asking DHCP on the
# wired port. kvmd is not in it: each test run installs its package on a
# copy (a qcow2 overlay), with what setup/ adds for the test, so this
# costs a boot, not a build, after the first time. For the test only:
# kvmd-imagetest-init, which runs that setup; no manual pages,
# translations or documentation but the copyright files (dpkg's
# path-exclude); and an initramfs with only the modules that mount a
# virtio disk (guest/etc/initramfs-tools), since making Debian's default
# one under qemu-user takes longer than all the rest.
#
# Besides the system, the kernel's own tools that the device checks read
# the far side with: v4l-utils (v4l2-ctl, media-ctl) for vivid, evtest for
# the input devices our gadget makes, usbutils (lsusb) and gpiod
# (gpioinfo); and ustreamer, the streamer the daemon manages, and ffmpeg,
# its software H.264 encoder (the Debian package recommends both).
set -eu

suite=bookworm
packages=systemd,systemd-sysv,udev,dbus,linux-image-arm64,iproute2,kmod,procps,v4l-utils,ustreamer,ffmpeg,evtest,usbutils,gpiod,usbredirect
size=3G

check=false
if [ "${1:-}" = -n ]; then
	check=true
	shift
fi
[ $# -eq 1 ] || {
	echo "usage: $0 [-n] CACHE" >&2
	exit 2
}
cache=$1
here=$(cd "$(dirname "$0")" && pwd)

# cannot REASON: with -n, says why this host cannot build and boot the
# image, and fails.
cannot() {
	echo "$*" >&2
	exit 1
}
# free DIR: the KiB free in the file system of DIR, or of its nearest
# existing parent.
free() {
	d=$1
	while [ ! -d "$d" ]; do d=$(dirname "$d"); done
	df -Pk "$d" | awk 'NR == 2 { print $4 }'
}
for tool in qemu-system-aarch64 qemu-img mmdebstrap genext2fs e2fsck resize2fs tune2fs flock; do
	command -v $tool >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v $tool >/dev/null 2>&1 ||
		cannot "no $tool (make deps installs it on Debian)"
done
if [ "$(uname -m)" != aarch64 ] && ! arch-test arm64 >/dev/null 2>&1; then
	cannot "this host cannot run arm64 programs for mmdebstrap: qemu-user-static through binfmt_misc (make deps sets it up where it can)"
fi
if [ "$(id -u)" != 0 ]; then
	command -v newuidmap >/dev/null 2>&1 || cannot "not root, and no newuidmap (package uidmap) for mmdebstrap's unshare mode"
	grep -q "^$(id -un):" /etc/subuid 2>/dev/null ||
		cannot "not root, and no subordinate user IDs in /etc/subuid for mmdebstrap's unshare mode"
fi
# The image is 3 GiB sparse (about 1.4 GiB used), mmdebstrap's chroot in
# TMPDIR about 1 GiB, the test's overlay some hundred MiB.
[ "$(free "$cache")" -ge $((4 * 1024 * 1024)) ] || cannot "less than 4 GiB free for $cache"
[ "$(free "${TMPDIR:-/tmp}")" -ge $((2 * 1024 * 1024)) ] || cannot "less than 2 GiB free in ${TMPDIR:-/tmp}"

# The apt sources: the host's Debian mirrors for the suite, or the mirror
# named by KVMD_IMAGETEST_MIRROR.
if [ -n "${KVMD_IMAGETEST_MIRROR:-}" ]; then
	sources=$(printf 'deb %s %s main\ndeb %s %s-updates main\n' \
		"$KVMD_IMAGETEST_MIRROR" $suite "$KVMD_IMAGETEST_MIRROR" $suite)
else
	# shellcheck disable=SC2016 # apt's $(...) placeholders
	sources=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' |
		awk -v s=$suite '$3 == "main" && ($2 == s || $2 == s "-updates" || $2 == s "-security") {
			print "deb " $1 " " $2 " main" }' | sort -u)
fi
[ -n "$sources" ] || cannot "no Debian $suite mirror in this machine's apt sources (apt-get update first, or set KVMD_IMAGETEST_MIRROR)"
$check && exit 0

# The key: the script but its comments, the files copied in, the sources.
key=$({
	grep -v '^[[:space:]]*#' "$here/$(basename "$0")"
	(cd "$here/guest" && find . ! -type d | LC_ALL=C sort | while read -r f; do
		stat -c '%a %n' "$f"
		sha256sum <"$f"
	done)
	echo "$sources"
} | sha256sum | cut -c1-16)
dir=$cache/$key

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$dir/base.img" ]; then
	echo "$dir"
	exit 0
fi

tmp=$cache/$key.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
start=$(date +%s)
# guest/'s files, root's, copied in after the essential packages, before
# the others (the initramfs settings are needed before the kernel's).
# Files only: the directories of the system keep their owners and modes.
(cd "$here/guest" && find . ! -type d | LC_ALL=C sort |
	tar --owner=0 --group=0 --numeric-owner --no-recursion -T - -cf "$tmp/guest.tar")
# One argument per source line.
set --
while IFS= read -r line; do set -- "$@" "$line"; done <<SOURCES
$sources
SOURCES
# shellcheck disable=SC2016 # the hooks' $1 is mmdebstrap's
mmdebstrap --variant=minbase --arch=arm64 --format=ext2 \
	--include=$packages \
	--dpkgopt=force-unsafe-io \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--essential-hook="tar-in '$tmp/guest.tar' /" \
	--customize-hook='rm -f "$1/etc/resolv.conf"' \
	--customize-hook='chroot "$1" systemctl enable systemd-networkd.service' \
	--customize-hook='chroot "$1" dpkg-query -W >"$1/packages.txt"' \
	--customize-hook="copy-out /boot /packages.txt '$tmp'" \
	--customize-hook='rm "$1/packages.txt"' \
	$suite "$tmp/rootfs.ext2" "$@" >&2

# genext2fs's ext2, grown to SIZE and made ext4 as mmdebstrap's manual says
# (never shrunk: mmdebstrap sizes it with room to spare, with ffmpeg over
# 2 GiB, and a cut file system does not mount).
img=$tmp/rootfs.ext2
e2fsck -fy "$img" >/dev/null || [ $? -le 1 ]
truncate -s ">$size" "$img"
resize2fs "$img" >/dev/null 2>&1
tune2fs -O extents,uninit_bg,dir_index,has_journal "$img" >/dev/null
e2fsck -fyD "$img" >/dev/null || [ $? -le 1 ]
mv "$img" "$tmp/base.img"
mv "$tmp"/boot/vmlinuz-* "$tmp/vmlinuz"
mv "$tmp"/boot/initrd.img-* "$tmp/initrd.img"
rm -rf "${tmp:?}/boot" "$tmp/guest.tar"
echo "$sources" >"$tmp/sources.list"
mv "$tmp" "$dir"
echo "rootfs.sh: built $dir in $(($(date +%s) - start)) s" >&2

# Older builds of this script: only the newest two stay.
# shellcheck disable=SC2012 # the names are hashes
ls -1dt "$cache"/*/ | tail -n +3 | while read -r old; do rm -rf "$old"; done
echo "$dir"
