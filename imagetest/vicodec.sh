#!/bin/sh
# vicodec.sh IMAGE: the kernel's vicodec driver built for the booted test's
# kernel, cached in the image's directory (rootfs.sh's): prints the
# module's path.
#
# vicodec (drivers/media/test-drivers/vicodec) is the kernel's stateful
# memory-to-memory FWHT encoder and decoder, with the interface of a
# board's H.264 encoder (a Raspberry Pi's bcm2835-codec). Debian's kernels
# do not ship it (CONFIG_VIDEO_VICODEC is not set in linux-image-arm64), so
# it is built here from Debian's own kernel source, linux-source-SERIES,
# against the headers of the image's kernel (linux-headers-RELEASE, the
# version packages.txt names) with Debian's kbuild tools and its cross
# compiler (gcc-aarch64-linux-gnu, the gcc 12 the kernel was built with),
# as an out-of-tree module: the driver's code as the kernel has it, for
# the kernel the test boots. The packages come from the image's own apt
# sources, for arm64, through an apt of its own in a temporary directory;
# linux-kbuild (programs that run on this machine) from this machine's apt.
set -eu
[ $# -eq 1 ] || {
	echo "usage: $0 IMAGE" >&2
	exit 2
}
dir=$1
ko=$dir/vicodec.ko
if [ -f "$ko" ]; then
	echo "$ko"
	exit 0
fi
exec 9>"$dir/.vicodec.lock"
flock 9
if [ -f "$ko" ]; then
	echo "$ko"
	exit 0
fi
command -v aarch64-linux-gnu-gcc-12 >/dev/null 2>&1 || {
	echo "vicodec.sh: no aarch64-linux-gnu-gcc-12 (make deps installs gcc-aarch64-linux-gnu)" >&2
	exit 1
}

# The image's kernel: linux-image-6.1.0-56-arm64 6.1.192-2 in packages.txt.
# shellcheck disable=SC2046 # two words
set -- $(awk '$1 ~ /^linux-image-[0-9].*-arm64$/ { print $1, $2 }' "$dir/packages.txt")
[ $# -eq 2 ] || {
	echo "vicodec.sh: no linux-image-*-arm64 in $dir/packages.txt" >&2
	exit 1
}
release=${1#linux-image-} # 6.1.0-56-arm64
version=$2                # 6.1.192-2
abi=${release%-arm64}     # 6.1.0-56
series=$(echo "$abi" | cut -d. -f1,2) # 6.1

tmp=$(mktemp -d "$dir/vicodec.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/archives/partial" "$tmp/root" "$tmp/src"
arm64="-o Dir::Etc::SourceList=$dir/sources.list -o Dir::Etc::SourceParts=/nonexistent
	-o Dir::State::Lists=$tmp/lists -o Dir::Cache=$tmp -o Debug::NoLocking=1
	-o APT::Architecture=arm64 -o APT::Architectures=arm64 -o Acquire::Languages=none"
# shellcheck disable=SC2086 # the options, one word each
apt-get -q $arm64 update >&2
cd "$tmp"
# The headers of the image's kernel, at its version where the mirror still
# has it (a security update replaces it there; the ABI in the name stays).
# shellcheck disable=SC2086
apt-get -q $arm64 download "linux-headers-$release=$version" "linux-headers-$abi-common=$version" >&2 ||
	apt-get -q $arm64 download "linux-headers-$release" "linux-headers-$abi-common" >&2
# shellcheck disable=SC2086
apt-get -q $arm64 download "linux-source-$series" >&2
apt-get -q download "linux-kbuild-$series" >&2
for deb in linux-headers-*.deb linux-kbuild-*.deb; do
	dpkg-deb -x "$deb" root
done
dpkg-deb --fsys-tarfile linux-source-*.deb | tar -xO "./usr/src/linux-source-$series.tar.xz" | xz -dc |
	tar -x -C src --strip-components=5 --wildcards "linux-source-$series/drivers/media/test-drivers/vicodec/*"
# The headers' Makefile names its common part by its installed path.
headers=$tmp/root/usr/src/linux-headers-$release
sed -i "s|/usr/src/|$tmp/root/usr/src/|" "$headers/Makefile"
make -s -C "$headers" M="$tmp/src" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- CONFIG_VIDEO_VICODEC=m modules >&2
grep -q "vermagic=$release " "$tmp/src/vicodec.ko" || {
	echo "vicodec.sh: the module is not for $release" >&2
	exit 1
}
mv "$tmp/src/vicodec.ko" "$ko"
echo "vicodec.sh: built vicodec for $release ($(ls linux-source-*.deb))" >&2
echo "$ko"
