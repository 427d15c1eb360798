// Package firmware checks the kvmd binaries that go on the appliances,
// the ones `make cross` writes to dist/. It holds no code, only tests:
//
//   - the builds are static (CGO_ENABLED=0, no ELF interpreter), stripped,
//     version-stamped and small (arm64 under 15 MiB);
//   - building twice gives byte-identical files, the second time from a
//     copy of the tree at another path and with an empty build cache;
//   - each ARM build runs under qemu-user on the CPU of the oldest board it
//     is for (an ARM1176 for armv6, a Cortex-A7 for armv7, a Cortex-A53
//     for arm64): it creates its users file, serves /api/info from the
//     Raspberry Pi 4 fixture tree and /api/log from a real journal file,
//     refuses a request without credentials, and exits cleanly on SIGTERM.
//   - the Debian packages of `make deb` (scripts/mkdeb.sh) hold exactly
//     the expected files, root-owned with fixed modes and mtimes, build
//     reproducibly and pass lintian.
//   - the Buildroot tree (buildroot/): the post-image script makes a real
//     SD card image with genimage from each board's files; the post-build
//     script's links; each board's config.txt enables the USB device port
//     and the HDMI capture bridge. (The tools module's package
//     kvmd/tools/internal/brcheck checks the tree statically, and builds
//     kvmd as its kvmd.mk has Buildroot build it.)
//
// The tests build the binaries themselves, with the flags of the
// Makefile's cross target, so `go test ./...` needs nothing else than Go,
// qemu-user and systemd-journal-remote (`make deps` installs the last
// two). Without qemu, or another tool a test needs, they skip, unless
// JOURNALTEST_REQUIRE is set (as make test sets it; see
// testutil.Required), when they fail.
//
// Each emulated start logs one line for BENCHMARKS.md, for instance
//
//	firmware smoke: arch=armv6 emulator="qemu-arm -cpu arm1176" start_ms=480 idle_rss_kib=45360
//
// where start is from exec to the first HTTP answer and the RSS is the
// qemu process's VmRSS (emulator included) after one second idle.
package firmware
