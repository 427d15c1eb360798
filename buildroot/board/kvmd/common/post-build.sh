#!/bin/sh
# Post-build script of kvmd's images: $1 is Buildroot's target directory.
set -eu
target=$1

# A login prompt on the HDMI output (tty1): it shows /etc/issue.d, where
# "kvmd firstboot" puts the generated admin password until it is changed.
wants="$target/etc/systemd/system/getty.target.wants"
mkdir -p "$wants" "$target/etc/issue.d"
ln -sf /usr/lib/systemd/system/getty@.service "$wants/getty@tty1.service"

# Wi-Fi, on the images that have wpa_supplicant (the Zero boards have no
# Ethernet): wlan0 joins the networks of
# /etc/wpa_supplicant/wpa_supplicant-wlan0.conf when that file exists (see
# the drop-in in the overlay), and networkd asks for an address by DHCP.
if [ -e "$target/usr/lib/systemd/system/wpa_supplicant@.service" ]; then
	wants="$target/etc/systemd/system/multi-user.target.wants"
	mkdir -p "$wants"
	ln -sf /usr/lib/systemd/system/wpa_supplicant@.service "$wants/wpa_supplicant@wlan0.service"
fi
