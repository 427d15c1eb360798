// Package imagetest boots the kvmd Debian package on an emulated arm64
// Debian system under systemd and checks it as a user meets it after
// flashing: the first-boot banner on the serial console, socket activation
// with Type=notify and the watchdog, /api/info through the unit's sandbox,
// /api/log from the live system journal, Redfish power on the GPIO chip
// and a VNC viewer's picture and keys, the web UI's edits of the users
// and tokens files, virtual media read back by the host side of the USB
// gadget, the hardware H.264 encoder's V4L2 path on the kernel's vicodec
// (built by vicodec.sh from Debian's kernel source), a power cut right
// after an upload and the credentials' changes, an upgrade, a clean stop
// and power-off. rootfs.sh builds
// (and caches) the system with mmdebstrap; the test installs this
// checkout's package into it with apt and boots it in qemu-system-aarch64.
// It holds no code, only tests: the booted system runs
// with KVMD_IMAGETEST=1 (make image-test, and make test where the host
// can), and skips otherwise.
package imagetest
