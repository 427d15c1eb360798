################################################################################
#
# kvmd
#
################################################################################

# Built from the checkout this BR2_EXTERNAL tree lives in.
KVMD_VERSION = $(shell git -C $(BR2_EXTERNAL_KVMD_PATH) describe --tags --always --dirty 2>/dev/null || echo local)
KVMD_SITE = $(BR2_EXTERNAL_KVMD_PATH)/..
KVMD_SITE_METHOD = local
KVMD_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude=/bin --exclude=/dist --exclude=/buildroot --exclude=/.git
# No license has been chosen for kvmd yet.
KVMD_LICENSE = PROPRIETARY

KVMD_GOMOD = kvmd
KVMD_BUILD_TARGETS = cmd/kvmd
KVMD_GO_ENV = CGO_ENABLED=0
KVMD_LDFLAGS = -s -w -buildid= -X main.version=$(KVMD_VERSION)

# A local source is not vendored by Buildroot's download step, and the
# build runs with -mod=vendor and GOPROXY=off: vendor the modules of
# go.sum before building, from KVMD_GOPROXY, unless the checkout already
# has a vendor/ directory (run "go mod vendor" there for offline builds).
KVMD_GOPROXY ?= https://proxy.golang.org
define KVMD_VENDOR_MODULES
	if [ ! -d $(@D)/vendor ]; then \
		cd $(@D) && $(HOST_GO_COMMON_ENV) GOFLAGS=-mod=mod \
			GOPROXY=$(KVMD_GOPROXY) $(GO_BIN) mod vendor; \
	fi
endef
KVMD_PRE_BUILD_HOOKS += KVMD_VENDOR_MODULES

# The daemon's user; its supplementary groups give it the journal (for
# /api/log), the capture device and the GPIO chips.
define KVMD_USERS
	kvmd -1 kvmd -1 * - - systemd-journal,video,gpio kvmd, KVM-over-IP daemon
endef

define KVMD_INSTALL_INIT_SYSTEMD
	$(foreach u,kvmd.service kvmd.socket kvmd-firstboot.service kvmd-otg.service,\
		$(INSTALL) -D -m 0644 $(@D)/systemd/$(u) \
			$(TARGET_DIR)/usr/lib/systemd/system/$(u)$(sep))
	$(INSTALL) -D -m 0644 $(@D)/systemd/sysusers.d/kvmd.conf \
		$(TARGET_DIR)/usr/lib/sysusers.d/kvmd.conf
	$(INSTALL) -D -m 0644 $(KVMD_PKGDIR)/80-kvmd.preset \
		$(TARGET_DIR)/usr/lib/systemd/system-preset/80-kvmd.preset
endef

# The USB gadget's keyboard and mouse nodes for the user kvmd alone
# (kvmd-otg.service makes the gadget; the rootfs overlay's modules-load.d
# loads dwc2 and libcomposite, so the package's own list is not installed),
# and the GPIO chips for the group gpio: the same rules as the .deb's.
KVMD_POST_INSTALL_TARGET_HOOKS += KVMD_INSTALL_UDEV_RULES
define KVMD_INSTALL_UDEV_RULES
	$(foreach r,90-kvmd-otg.rules 90-kvmd-gpio.rules,\
		$(INSTALL) -D -m 0644 $(@D)/systemd/udev/$(r) \
			$(TARGET_DIR)/usr/lib/udev/rules.d/$(r)$(sep))
endef

# For fleets: the alert rules for a central Prometheus, and the
# configuration of systemd-journal-upload (BR2_PACKAGE_SYSTEMD_JOURNAL_REMOTE
# in the defconfigs; off, as 80-kvmd.preset leaves the service disabled,
# until an operator sets its URL and enables it).
KVMD_POST_INSTALL_TARGET_HOOKS += KVMD_INSTALL_FLEET_FILES
define KVMD_INSTALL_FLEET_FILES
	$(INSTALL) -D -m 0644 $(@D)/prometheus/kvmd.rules.yml \
		$(TARGET_DIR)/usr/share/kvmd/prometheus/kvmd.rules.yml
	$(INSTALL) -D -m 0644 $(@D)/systemd/journal-upload.conf.d/kvmd.conf \
		$(TARGET_DIR)/etc/systemd/journal-upload.conf.d/kvmd.conf
endef

$(eval $(golang-package))
