#!/bin/sh
# Usage: deps.sh [demo]
#
# With "demo" (make run), only what the demo daemon uses: journalctl and
# systemd-journal-remote, for its journal, and ffmpeg, its H.264 encoder
# (WebRTC and Direct H.264 in the console). The demo works without them
# (/api/log then answers 503 saying why; the console shows MJPEG and the
# log says H.264 needs ffmpeg), so failing to install them is a warning
# there, not an error. DEPS_DRY_RUN=1 prints the packages it would
# install and installs nothing.
#
# Without (make deps, make test), every Debian package the tests and the
# demo need, when missing:
# journalctl (package systemd) and systemd-journal-remote, which writes the
# real journal files the log tests and the demo read; and qemu-user, whose
# qemu-arm and qemu-aarch64 run the ARM builds in make smoke. The tests name
# the emulator and its CPU (qemu-arm -cpu arm1176), so binfmt registration
# (qemu-user-binfmt, a recommendation) is left out. lintian checks the
# Debian packages of make deb (firmware/deb_test.go); mandoc and groff (of
# groff-base, which man uses) lint the manual page (cmd/kvmd/man_test.go).
# genimage, dosfstools, mtools and fdisk (sfdisk) build and read the SD card
# image of the Buildroot tree's post-image script (firmware/image_test.go);
# tigervnc-viewer, gvncviewer (gvnccapture), vncsnapshot, xvfb and xdotool
# are the VNC clients of the VNC server's tests and what runs them.
# The linter shellcheck checks the shell scripts (make lint). chromium runs
# the web UI's browser tests (tools/webtest). prometheus scrapes
# the daemon's metrics in cmd/kvmd/metrics_e2e_test.go; the test runs its own
# server, so the package's service is neither started (policy-rc.d below)
# nor enabled. Its promtool lints the exposition (metrics/) and tests the
# shipped alert rules (make rules). nginx is the reverse proxy of PiKVM's
# layout: tools/webtest runs it configured as PiKVM's in front of the daemon,
# and the booted-system test serves PiKVM's own web pages from it (its
# service, like prometheus's, is neither started nor enabled).
# ustreamer, PiKVM's MJPEG streamer, is the program the daemon runs for video
# (package streamer): its tests run it without a capture device, where it
# serves its "NO SIGNAL" picture over its unix socket. ffmpeg (with libx264)
# is the software H.264 encoder the daemon runs (package h264/ffmpeg), and
# the decoder the H.264 tests read what a client got with (ffprobe too).
# The booted-system test (make image-test, imagetest/): mmdebstrap builds a
# Debian arm64 system from Debian's packages, running their maintainer
# scripts under qemu-user-static through binfmt_misc (arch-test is how
# mmdebstrap checks that this works); genext2fs writes its file system
# (mmdebstrap's ext2 format), qemu-utils' qemu-img makes the test's copy of
# it and qemu-system-arm boots it. binfmt-support registers the emulator;
# in a container, where nothing mounted binfmt_misc, the end of this script
# mounts it and enables the aarch64 entry where it may.
set -eu
mode=${1:-all}
machine=$(uname -m 2>/dev/null) || machine=unknown
uid=$(id -u 2>/dev/null) || uid=unknown
need=""
case $mode in
all | demo) ;;
install) # deps.sh install PKG...: the demo's install, run on its own
	shift
	need=" $*"
	;;
*)
	echo "usage: deps.sh [demo]" >&2
	exit 2
	;;
esac
if [ "$mode" != install ]; then
	command -v journalctl >/dev/null 2>&1 || need="$need systemd"
	[ -x /usr/lib/systemd/systemd-journal-remote ] || [ -x /lib/systemd/systemd-journal-remote ] ||
		need="$need systemd-journal-remote"
	command -v ffmpeg >/dev/null 2>&1 || need="$need ffmpeg"
	if [ "$mode" = all ]; then
		command -v lintian >/dev/null 2>&1 || need="$need lintian"
		command -v mandoc >/dev/null 2>&1 || need="$need mandoc"
		command -v groff >/dev/null 2>&1 || need="$need groff-base"
		command -v genimage >/dev/null 2>&1 || need="$need genimage"
		command -v mkfs.vfat >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.vfat ] || need="$need dosfstools"
		command -v mcopy >/dev/null 2>&1 || need="$need mtools"
		command -v sfdisk >/dev/null 2>&1 || [ -x /usr/sbin/sfdisk ] || need="$need fdisk"
		command -v shellcheck >/dev/null 2>&1 || need="$need shellcheck"
		command -v chromium >/dev/null 2>&1 || need="$need chromium"
		command -v ustreamer >/dev/null 2>&1 || need="$need ustreamer"
		[ -x /usr/sbin/nginx ] || need="$need nginx"
		{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need="$need prometheus"
		# OpenLDAP's server and tools, and FreeRADIUS, for the external
		# authentication tests (each runs its own server on loopback).
		[ -x /usr/sbin/slapd ] || need="$need slapd"
		command -v ldapadd >/dev/null 2>&1 || need="$need ldap-utils"
		[ -x /usr/sbin/freeradius ] || need="$need freeradius"
		# xkeyboard-config's layouts, libxkbcommon's xkbcli, X11's
		# keysymdef.h and libX11's compose tables: tools/cmd/genkeymaps
		# regenerates hid/keymaps from them, and its test checks the
		# committed files are what they give. python3 runs the helper
		# through which libxkbcommon itself types print's key presses in
		# hid's tests and the booted test (internal/xkbtest).
		[ -d /usr/share/X11/xkb/symbols ] || need="$need xkb-data"
		command -v xkbcli >/dev/null 2>&1 || need="$need libxkbcommon-tools"
		[ -f /usr/include/X11/keysymdef.h ] || need="$need x11proto-dev"
		[ -f /usr/share/X11/locale/en_US.UTF-8/Compose ] || need="$need libx11-data"
		command -v python3 >/dev/null 2>&1 || need="$need python3"
		# VNC viewers someone else wrote, for the VNC server's tests
		# (vnc/, cmd/kvmd): TigerVNC's and gtk-vnc's, run under Xvfb,
		# typed into with xdotool, and vncsnapshot (RFB 3.3).
		command -v xtigervncviewer >/dev/null 2>&1 || need="$need tigervnc-viewer"
		command -v gvnccapture >/dev/null 2>&1 || need="$need gvncviewer"
		command -v vncsnapshot >/dev/null 2>&1 || need="$need vncsnapshot"
		command -v Xvfb >/dev/null 2>&1 || need="$need xvfb"
		command -v xdotool >/dev/null 2>&1 || need="$need xdotool"
		{ command -v qemu-arm && command -v qemu-aarch64; } >/dev/null 2>&1 || need="$need qemu-user"
		command -v mmdebstrap >/dev/null 2>&1 || need="$need mmdebstrap"
		command -v arch-test >/dev/null 2>&1 || need="$need arch-test"
		command -v genext2fs >/dev/null 2>&1 || need="$need genext2fs"
		command -v qemu-system-aarch64 >/dev/null 2>&1 || need="$need qemu-system-arm"
		command -v qemu-img >/dev/null 2>&1 || need="$need qemu-utils"
		# The booted test's virtual media check makes an ISO to upload.
		command -v xorriso >/dev/null 2>&1 || need="$need xorriso"
		# Its firmware check: an x86 PC (qemu-system-x86) with SeaBIOS, to
		# which the booted system's usbredirect exports the gadget.
		command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
		[ -f /usr/share/seabios/bios-256k.bin ] || need="$need seabios"
		# The booted test builds the kernel's vicodec for Debian's arm64
		# kernel, which does not ship it (imagetest/vicodec.sh), with the
		# gcc 12 that kernel was built with.
		if ! command -v aarch64-linux-gnu-gcc-12 >/dev/null 2>&1; then
			if [ "$machine" = aarch64 ]; then need="$need gcc-12"; else need="$need gcc-aarch64-linux-gnu"; fi
		fi
		# zbarimg scans the terminal's picture of the 2FA QR code
		# (cmd/kvmd/totp_test.go).
		command -v zbarimg >/dev/null 2>&1 || need="$need zbar-tools"
		# The Redfish clients people point at a BMC, run against the demo
		# and the booted system (redfish/redfishtest): DMTF's redfishtool,
		# OpenStack's sushy (Ironic's client) and Ansible's
		# community.general redfish modules; ip (iproute2) makes the
		# network namespaces the Wake-on-LAN tests listen in.
		command -v redfishtool >/dev/null 2>&1 || need="$need redfishtool"
		[ -d /usr/lib/python3/dist-packages/sushy ] || need="$need python3-sushy"
		command -v ansible-playbook >/dev/null 2>&1 || need="$need ansible"
		command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need="$need iproute2"
		if [ "$machine" != aarch64 ]; then
			[ -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P ] || need="$need qemu-user-static"
			command -v update-binfmts >/dev/null 2>&1 || need="$need binfmt-support"
		fi
		# Not as root, mmdebstrap works in a user namespace, with newuidmap.
		[ "$uid" = 0 ] || command -v newuidmap >/dev/null 2>&1 || need="$need uidmap"
	fi
fi
# binfmt enables the emulator for arm64 programs, for mmdebstrap: where
# binfmt_misc is not mounted (a container), it is mounted here, and the
# entry that qemu-user-static installs is enabled (update-binfmts could not
# register it then). A host that cannot (an unprivileged container) is left
# as it is: make test then skips the image test and says why.
binfmt() {
	[ "$mode" = all ] && [ "$machine" != aarch64 ] && [ "${DEPS_DRY_RUN:-}" != 1 ] || return 0
	[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && return 0
	sudo=""
	[ "$uid" = 0 ] || sudo="sudo"
	if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
		$sudo mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || return 0
	fi
	$sudo update-binfmts --enable qemu-aarch64 2>/dev/null || true
}
if [ -z "$need" ]; then
	binfmt
	exit 0
fi
if [ "${DEPS_DRY_RUN:-}" = 1 ]; then
	echo "would install:$need"
	exit 0
fi
if [ "$mode" = demo ]; then
	# The demo runs without its journal: a failed install is reported,
	# and make run goes on.
	# shellcheck disable=SC2086
	if ! sh "$0" install $need; then
		echo "deps.sh: could not install$need; the demo runs without what is missing (no journal: /api/log answers 503; no ffmpeg: no H.264, the console shows MJPEG)" >&2
	fi
	exit 0
fi
echo "installing:$need"
sudo=""
[ "$uid" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# A package's postinst starts its service through invoke-rc.d, which runs the
# init script where systemd does not run (a container): a policy-rc.d that
# answers 101 (action forbidden) stops that for this install. One that
# exists is left as it is.
policy=/usr/sbin/policy-rc.d
if [ ! -e $policy ]; then
	printf '#!/bin/sh\nexit 101\n' | $sudo tee $policy >/dev/null
	$sudo chmod 755 $policy
	trap '$sudo rm -f $policy' EXIT
fi
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $need >/dev/null
for svc in prometheus slapd freeradius nginx; do
	case " $need " in
	*" $svc "*) $sudo systemctl disable --quiet "$svc.service" 2>/dev/null || true ;;
	esac
done
binfmt
