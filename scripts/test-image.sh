#!/bin/sh
# test-image.sh CACHE: make test's last step, the booted test (make
# image-test) where this host can run it, and a last line that says plainly
# whether it ran.
#
# imagetest/rootfs.sh -n CACHE says why a host cannot (no bookworm mirror in
# apt's sources, no binfmt_misc, less than 4 GiB free...). Then the step
# passes saying so, for a newcomer's make test; with KVMD_IMAGETEST=1, as
# CI's .ci/run sets it, it fails. KVMD_IMAGETEST=0 leaves it out on purpose.
# When it runs, go test's output is read as well: no TestBootedSystem that
# passed, or any of its subtests skipped, is a test that did not run all
# it claims (a failure with KVMD_IMAGETEST=1). MAKE is the make to run
# image-test with (the Makefile passes its own).
set -u
[ $# -eq 1 ] || {
	echo "usage: $0 CACHE" >&2
	exit 2
}
cache=$1
cd "$(dirname "$0")/.." || exit 2
required=false
[ "${KVMD_IMAGETEST:-}" = 1 ] && required=true

# notrun WHY: the last line for a booted test that did not run, or did not
# run whole; a failure when it is required.
notrun() {
	if $required; then
		echo "make test: FAILED: the booted test did not run, and KVMD_IMAGETEST=1 (CI) requires it: $*" >&2
		exit 1
	fi
	echo "make test: the booted test did NOT run: $* (KVMD_IMAGETEST=1, as CI sets it, makes this a failure)"
	exit 0
}

if [ "${KVMD_IMAGETEST:-}" = 0 ]; then
	notrun "KVMD_IMAGETEST=0"
fi
if ! why=$(sh imagetest/rootfs.sh -n "$cache" 2>&1); then
	notrun "this host cannot run it: $why"
fi

log=$(mktemp)
trap 'rm -f "$log" "$log.rc"' EXIT
{
	${MAKE:-make} --no-print-directory image-test 2>&1
	echo $? >"$log.rc"
} | tee "$log"
if [ "$(cat "$log.rc")" != 0 ]; then
	echo "make test: FAILED: the booted test ran and failed" >&2
	exit 1
fi
if ! grep -q '^--- PASS: TestBootedSystem ' "$log"; then
	notrun "go test passed without running TestBootedSystem"
fi
skipped=$(sed -n 's/^ *--- SKIP: \(TestBootedSystem\/[^ ]*\).*/\1/p' "$log" | tr '\n' ' ')
if [ -n "$skipped" ]; then
	if $required; then
		echo "make test: FAILED: the booted test ran, but skipped $skipped" >&2
		exit 1
	fi
	echo "make test: the booted test ran, but skipped $skipped(KVMD_IMAGETEST=1, as CI sets it, makes this a failure)"
	exit 0
fi
n=$(grep -c '^    --- PASS: TestBootedSystem/' "$log")
echo "make test: the booted test ran and passed ($n subtests)"
