# kvmd: make run (demo daemon), make test (everything CI runs).
export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -buildid= -X main.version=$(VERSION)
BUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
TOOLS   := $(CURDIR)/bin/tools
STATICCHECK_VERSION := v0.8.2
# An execution count, not a duration: a duration-based -fuzztime can fail
# with a bare "context deadline exceeded" and no crasher (a race in Go's
# fuzz coordinator, golang/go#75804, fixed in Go 1.27, not in 1.26).
FUZZTIME ?= 20000x
# name:package directory of every fuzz target, in either module; make test runs each for
# FUZZTIME executions, from the package's directory.
FUZZ_TARGETS := \
	FuzzParseBasic:./httpd/ \
	FuzzSessionToken:./httpd/ \
	FuzzParseLogin:./httpd/ \
	FuzzAuthHeaders:./httpd/ \
	FuzzForwarded:./httpd/ \
	FuzzSameOrigin:./httpd/ \
	FuzzParseLine:./auth/ \
	FuzzParseHash:./auth/ \
	FuzzParseHtpasswd:./auth/ \
	FuzzRespReader:./tools/cmd/kvmbench/ \
	FuzzParseFields:./info/ \
	FuzzParseMeminfo:./hw/ \
	FuzzParseStat:./hw/ \
	FuzzParseThrottled:./hw/ \
	FuzzFirstUsage:./hw/ \
	FuzzUnpack:./internal/fixture/ \
	FuzzEntryLine:./journal/ \
	FuzzReader:./journal/export/ \
	FuzzBindName:./auth/ldapauth/ \
	FuzzParseResponse:./auth/radiusauth/ \
	FuzzRedact:./diag/ \
	FuzzApply:./streamer/ \
	FuzzLook:./streamer/memsink/ \
	FuzzParseJSON:./hid/ \
	FuzzParseBinary:./hid/ \
	FuzzActionBodies:./redfish/ \
	FuzzWSMessage:./httpd/ \
	FuzzCheckName:./msd/ \
	FuzzReadMsg:./vnc/ \
	FuzzParseSPS:./h264/ \
	FuzzParse:./mediaws/

.PHONY: all build demo deps deps-demo run test unit race smoke fuzz rules lint bench cross deb buildroot-check image-test test-image clean
all: build

build:
	$(BUILD) -o bin/kvmd ./cmd/kvmd
	$(BUILD) -o bin/kvmctl ./cmd/kvmctl

## deps: Debian packages the tests and the demo journal need, each only when missing (journalctl,
## systemd-journal-remote, qemu-user, chromium, prometheus and promtool, lintian, genimage...: see
## scripts/deps.sh).
deps:
	@sh scripts/deps.sh

## deps-demo: only what the demo uses (journalctl and systemd-journal-remote, for its journal;
## ffmpeg, its H.264 encoder); the demo runs without them, so a failed install is a warning.
deps-demo:
	@sh scripts/deps.sh demo

## run: the daemon in demo mode on 127.0.0.1:8080, credentials printed. Demo mode (its fake GPIO
## pins and capture device, the bundled board, the demo journal) is only in the demo build,
## bin/kvmd-demo (-tags demo); the release build, bin/kvmd, refuses --demo.
run: deps-demo build demo
	./bin/kvmd-demo serve --demo

demo:
	$(BUILD) -tags demo -o bin/kvmd-demo ./cmd/kvmd

## test: lint, unit and integration tests, race detector, ARM builds under qemu, short fuzzing,
## the alert rules' unit tests, and the booted-system test where the host can run it (test-image,
## below).
test: deps lint unit race smoke fuzz rules test-image

# Tests that need a tool make deps installs (journal files, qemu-user, Chromium, slapd...) fail,
# not skip, when it is missing: internal/testutil.Required.
export JOURNALTEST_REQUIRE := 1

# unit leaves the firmware package (ARM builds under qemu) to smoke, the booted system
# (imagetest/) to test-image (KVMD_IMAGETEST=0 here, whatever make was given), and the packages
# of RACE_PKGS to race, which runs the same tests under the race detector: each test runs once.
# The tools module (tools/: kvmbench, the Buildroot checker, the browser tests of the web UI) is
# a module of its own, so that the daemon's go.mod lists only what the appliance needs: its
# tests run from there.
RACE_PKGS := ./daemon/... ./subsystem/... ./httpd/... ./hw/... ./info/... ./journal/... ./metrics/... ./client/... ./diag/... ./hid/... ./msd/... ./streamer/memsink/ ./vnc/... ./h264/... ./whep/... ./mediaws/... ./ugpio/... ./redfish/...
unit:
	race=$$($(GO) list $(RACE_PKGS)) && \
		KVMD_IMAGETEST=0 $(GO) test -count=1 $$($(GO) list ./... | grep -v '/firmware$$' | grep -vxF "$$race")
	cd tools && $(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race $(RACE_PKGS)

## smoke: the ARM builds under qemu-user: the firmware tests (cross builds, reproducibility,
## each ARM binary serving on the Raspberry Pi 4 fixture), the hw package's tests as arm64, and
## the C layouts the V4L2 encoder and ustreamer's sink reader assume on 32-bit ARM.
## Without qemu they fail here rather than skip (JOURNALTEST_REQUIRE, above).
smoke: deps
	$(GO) test -count=1 -v ./firmware/
	CGO_ENABLED=0 GOARCH=arm64 $(GO) test -count=1 -exec 'qemu-aarch64 -cpu cortex-a53' ./hw/...
	CGO_ENABLED=0 GOARCH=arm GOARM=7 $(GO) test -count=1 -exec 'qemu-arm -cpu cortex-a7' \
		-run 'Layout|PixFormat|LongDouble|Parse|Reader' ./hw/v4l2m2m/ ./streamer/memsink/

## image-test: the booted-system test (imagetest/): this checkout's Debian package installed with
## apt into Debian 12 arm64, booted under systemd in qemu-system-aarch64 (TCG where there is no
## KVM), checked over a forwarded port and a root shell on a second serial port. The root file
## system is built with mmdebstrap the first time and cached in ~/.cache/kvmd-imagetest
## (KVMD_IMAGETEST_CACHE), keyed by its package list. KVMD_IMAGETEST_BENCH=BENCHMARKS.md also
## writes its figures there (make bench keeps that section).
image-test: deps
	KVMD_IMAGETEST=1 $(GO) test -count=1 -v -timeout 45m ./imagetest/

# test-image: make test's step: image-test where the host can (imagetest/rootfs.sh -n says why
# not, and the step passes saying so); KVMD_IMAGETEST=0 skips it, KVMD_IMAGETEST=1 (.ci/run sets
# it) fails where the host cannot or a subtest skipped. Its last line, make test's, says plainly
# whether the booted test ran: scripts/test-image.sh.
test-image: deps
	@MAKE='$(MAKE)' sh scripts/test-image.sh "$${KVMD_IMAGETEST_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/kvmd-imagetest}"

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; pkg=$${t#*:}; \
		echo "fuzz $$name ($(FUZZTIME))"; \
		(cd $$pkg && $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) .); \
	done

## rules: the Prometheus alert rules shipped for fleets (prometheus/kvmd.rules.yml, installed
## as /usr/share/kvmd/prometheus/kvmd.rules.yml), checked and unit-tested by promtool (Debian
## package prometheus, from make deps): every alert firing and not firing
## (prometheus/kvmd.rules.test.yml). metrics/rules_test.go checks their names against the
## daemon's golden expositions.
rules: deps
	promtool check rules prometheus/kvmd.rules.yml
	cd prometheus && promtool test rules kvmd.rules.test.yml

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

SHELL_SCRIPTS = .ci/run $(wildcard scripts/*.sh scripts/deb/post* scripts/deb/pre* buildroot/board/kvmd/*/*.sh) \
	imagetest/rootfs.sh imagetest/vicodec.sh imagetest/setup/setup imagetest/guest/usr/local/sbin/kvmd-imagetest-init \
	imagetest/guest/etc/initramfs-tools/hooks/kvmd-imagetest
lint: $(TOOLS)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags demo ./cmd/kvmd ./daemon
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=6 $(GO) vet ./...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags demo ./cmd/kvmd ./daemon
	cd tools && $(GO) vet ./...
	cd tools && CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=6 $(GO) vet ./...
	cd tools && $(TOOLS)/staticcheck ./...
	shellcheck $(SHELL_SCRIPTS)

## bench: build and cross-build, then measure against a bare net/http baseline, natively and the ARM
## builds under qemu-user against the baseline cross-built; writes BENCHMARKS.md. kvmd runs as the
## demo builds (--demo serves the bundled board); the sizes reported are the release builds'.
## kvmbench is in the tools module (tools/cmd/kvmbench).
bench: deps build cross demo
	@mkdir -p bin/demo
	GOARCH=arm64 $(CROSS) -tags demo -o bin/demo/kvmd-linux-arm64 ./cmd/kvmd
	GOARCH=arm GOARM=7 $(CROSS) -tags demo -o bin/demo/kvmd-linux-armv7 ./cmd/kvmd
	GOARCH=arm GOARM=6 $(CROSS) -tags demo -o bin/demo/kvmd-linux-armv6 ./cmd/kvmd
	cd tools && $(GO) build -o ../bin/kvmbench ./cmd/kvmbench
	cd tools && GOARCH=arm64 $(CROSS) -o ../bin/kvmbench-linux-arm64 ./cmd/kvmbench
	cd tools && GOARCH=arm GOARM=7 $(CROSS) -o ../bin/kvmbench-linux-armv7 ./cmd/kvmbench
	cd tools && GOARCH=arm GOARM=6 $(CROSS) -o ../bin/kvmbench-linux-armv6 ./cmd/kvmbench
	$(BENCH_ALLOCS) ./httpd/ > bin/bench-request.txt
	$(MAKE) --no-print-directory bin/bench-request-before.txt
	./bin/kvmbench run --kvmd bin/kvmd-demo --arm-dir bin/demo --release bin/kvmd --release-dir dist \
		--go-bench bin/bench-request.txt --go-bench-before bin/bench-request-before.txt --out BENCHMARKS.md

## The allocations per request (httpd's BenchmarkRequest, kvmbench --go-bench), and the same
## benchmark at BENCH_ALLOCS_BEFORE, the commit that added it before issue 30's changes, run in a
## copy of that commit's tree (made once; rm the file to run it again). Only some sections:
## `./bin/kvmbench run --kvmd bin/kvmd-demo --only load` prints the load rows and the CPU time
## per request of kvmd and of the bare server; `--only ui` the web UI pages.
BENCH_ALLOCS := $(GO) test -run '^$$' -bench '^BenchmarkRequest$$' -benchmem -count 5
BENCH_ALLOCS_BEFORE := fe0b9f4
bin/bench-request-before.txt:
	@mkdir -p bin
	set -e; d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; git archive $(BENCH_ALLOCS_BEFORE) | tar -x -C "$$d"; \
		{ echo "# commit $(BENCH_ALLOCS_BEFORE), before issue 30's changes"; cd "$$d" && $(BENCH_ALLOCS) ./httpd/; } > $@.tmp
	mv $@.tmp $@

## cross: static, stripped, reproducible binaries for the Pi boards and amd64.
## arm64: Pi 3, 4, 5, Zero 2 W on a 64-bit OS; armv7: Pi 2 onwards on a 32-bit OS; armv6: Pi 1,
## Zero, Zero W. -buildvcs=false: the version comes from -X, and VCS stamping would make the bytes
## depend on the checkout (an untracked file, or building from a tarball, changes them).
## firmware/ builds with the same flags and checks the results (make smoke): keep them in step.
CROSS := CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS)'
cross:
	@mkdir -p dist
	GOARCH=arm64 $(CROSS) -o dist/kvmd-linux-arm64 ./cmd/kvmd
	GOARCH=arm GOARM=7 $(CROSS) -o dist/kvmd-linux-armv7 ./cmd/kvmd
	GOARCH=arm GOARM=6 $(CROSS) -o dist/kvmd-linux-armv6 ./cmd/kvmd
	GOARCH=amd64 $(CROSS) -o dist/kvmd-linux-amd64 ./cmd/kvmd
	@ls -l dist/ | awk 'NR>1 {printf "%-22s %6.2f MiB\n", $$9, $$5/1048576}'

## deb: Debian packages for Raspberry Pi OS (and Debian) from the cross builds:
## dist/kvmd_DEB_VERSION_{arm64,armhf,amd64}.deb. armhf holds the ARMv7 build: Raspberry Pi OS's
## armhf also runs on the ARMv6 Pi 1 and Zero, where this binary does not; those need the image. scripts/mkdeb.sh lays
## them out; scripts/debversion.sh maps the commit to a Debian version (0.0~gitDATE.HASH-1).
DEB_VERSION ?= $(shell sh scripts/debversion.sh)
deb: cross
	sh scripts/mkdeb.sh arm64 '$(DEB_VERSION)' dist/kvmd-linux-arm64 dist
	sh scripts/mkdeb.sh armhf '$(DEB_VERSION)' dist/kvmd-linux-armv7 dist
	sh scripts/mkdeb.sh amd64 '$(DEB_VERSION)' dist/kvmd-linux-amd64 dist

## buildroot-check: the BR2_EXTERNAL tree in buildroot/, checked statically (tools/cmd/brcheck;
## make test runs the same checks). BUILDROOT=DIR, a Buildroot source tree of the release in
## buildroot/BUILDROOT_VERSION, also checks every option the defconfigs set against it.
buildroot-check:
	cd tools && $(GO) build -o ../bin/brcheck ./cmd/brcheck
	./bin/brcheck $(if $(BUILDROOT),-buildroot '$(BUILDROOT)') buildroot

clean:
	rm -rf bin dist
