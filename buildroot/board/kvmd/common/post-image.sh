#!/bin/sh
# Post-image script of kvmd's images: writes sdcard.img (a FAT boot
# partition with the Raspberry Pi firmware, kernel and device trees, then
# the ext4 root file system) into $1, Buildroot's images directory.
set -eu
images=$1
here=$(dirname "$0")

# The boot partition holds every device tree, everything the rpi-firmware
# package installed (config.txt, cmdline.txt, overlays/) and the kernel
# that config.txt names.
kernel=$(sed -n 's/^kernel=//p' "$images/rpi-firmware/config.txt")
[ -n "$kernel" ] || { echo "post-image: no kernel= in config.txt" >&2; exit 1; }
files=$(
	cd "$images"
	for f in *.dtb rpi-firmware/* "$kernel"; do
		[ -e "$f" ] && printf '\t\t\t"%s",\n' "$f"
	done
)
cfg="$images/genimage.cfg"
awk -v files="$files" '$0 == "#BOOT_FILES#" { print files; next } { print }' \
	"$here/genimage.cfg.in" >"$cfg"

# genimage copies its root path, so give it an empty one: the root file
# system is already built (rootfs.ext4).
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
rm -rf "$BUILD_DIR/genimage.tmp"
genimage --rootpath "$root" --tmppath "$BUILD_DIR/genimage.tmp" \
	--inputpath "$images" --outputpath "$images" --config "$cfg"
