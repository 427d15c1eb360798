package firmware

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"kvmd/internal/testutil"
)

// boardDirs are the Buildroot tree's boards: each has a config.txt.
func boardDirs(t *testing.T) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(moduleRoot, "buildroot/board/kvmd/*/config.txt"))
	if len(dirs) != 4 {
		t.Fatalf("want the 4 boards' config.txt, found %v", dirs)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

// Every board's firmware configuration turns the USB port into a device
// and enables the HDMI capture bridge, and its defconfig uses it.
func TestBoardConfig(t *testing.T) {
	for _, dir := range boardDirs(t) {
		board := filepath.Base(dir)
		cfg, err := os.ReadFile(filepath.Join(dir, "config.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"dtoverlay=dwc2,dr_mode=peripheral", "dtoverlay=tc358743", "kernel="} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want)).Match(cfg) {
				t.Errorf("%s/config.txt: no line %q", board, want)
			}
		}
		defconfig, err := os.ReadFile(filepath.Join(moduleRoot, "buildroot/configs/kvmd_"+board+"_defconfig"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`BR2_PACKAGE_RPI_FIRMWARE_CONFIG_FILE="$(BR2_EXTERNAL_KVMD_PATH)/board/kvmd/` + board + `/config.txt"`,
			`BR2_PACKAGE_RPI_FIRMWARE_CMDLINE_FILE="$(BR2_EXTERNAL_KVMD_PATH)/board/kvmd/` + board + `/cmdline.txt"`,
			"BR2_INIT_SYSTEMD=y", "BR2_PACKAGE_KVMD=y",
		} {
			if !bytes.Contains(defconfig, []byte(want+"\n")) {
				t.Errorf("kvmd_%s_defconfig: no %s", board, want)
			}
		}
	}
}

// The post-image script, run as Buildroot would on each board's files
// (stand-ins for the firmware, kernel and device trees, a real ext4 root
// file system), writes an SD card image with real genimage: a bootable
// FAT partition holding those files and config.txt, then the root file
// system byte for byte.
func TestPostImage(t *testing.T) {
	requireTools(t, "genimage dosfstools mtools fdisk e2fsprogs",
		"genimage", "mkdosfs", "mcopy", "mdir", "sfdisk", "mkfs.ext4")
	script := filepath.Join(moduleRoot, "buildroot/board/kvmd/common/post-image.sh")
	for _, dir := range boardDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			images, build := t.TempDir(), t.TempDir()
			cfg, _ := os.ReadFile(filepath.Join(dir, "config.txt"))
			files := map[string]string{
				"rpi-firmware/config.txt":                   string(cfg),
				"rpi-firmware/cmdline.txt":                  "root=/dev/mmcblk0p2 rootwait\n",
				"rpi-firmware/overlays/dwc2.dtbo":           "overlay",
				"rpi-firmware/overlays/tc358743.dtbo":       "overlay",
				"bcm2711-rpi-4-b.dtb":                       "dtb",
				"not-the-kernel-" + filepath.Base(dir):      "left out",
				"rpi-firmware/overlays/tc358743-audio.dtbo": "overlay",
			}
			for _, key := range []string{"kernel", "start_file", "fixup_file"} {
				if m := regexp.MustCompile(`(?m)^` + key + `=(\S+)$`).FindSubmatch(cfg); m != nil {
					name := string(m[1])
					if key != "kernel" {
						name = "rpi-firmware/" + name
					}
					files[name] = key + " of " + filepath.Base(dir)
				}
			}
			testutil.WriteFiles(t, images, files)
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "hostname"), []byte("kvmd\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, "mkfs.ext4", "-q", "-L", "rootfs", "-d", root, filepath.Join(images, "rootfs.ext4"), "8M")
			run(t, "env", "BUILD_DIR="+build, script, images)

			img := filepath.Join(images, "sdcard.img")
			var table struct {
				PartitionTable struct {
					SectorSize int `json:"sectorsize"`
					Partitions []struct {
						Start, Size int
						Type        string
						Bootable    bool
					}
				} `json:"partitiontable"`
			}
			if err := json.Unmarshal([]byte(run(t, "sfdisk", "-J", img)), &table); err != nil {
				t.Fatal(err)
			}
			parts := table.PartitionTable.Partitions
			if len(parts) != 2 || parts[0].Type != "c" || !parts[0].Bootable || parts[1].Type != "83" {
				t.Fatalf("partitions %+v; want a bootable FAT (c) one, then Linux (83)", parts)
			}
			sector := table.PartitionTable.SectorSize
			if sector == 0 {
				sector = 512
			}
			boot := img + "@@" + strconv.Itoa(parts[0].Start*sector)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(run(t, "mdir", "-/", "-b", "-i", boot, "::")), "\n") {
				if !strings.HasSuffix(l, "/.") && !strings.HasSuffix(l, "/..") {
					got = append(got, strings.TrimPrefix(l, "::/"))
				}
			}
			var want []string
			for name := range files {
				if !strings.HasPrefix(name, "not-the-kernel") {
					want = append(want, strings.TrimPrefix(name, "rpi-firmware/"))
				}
			}
			want = append(want, "overlays/")
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("boot partition holds\n%v\nwant\n%v", got, want)
			}
			if c := run(t, "mtype", "-i", boot, "::/config.txt"); c != string(cfg) {
				t.Errorf("config.txt on the boot partition differs from the board's")
			}
			rootfs, _ := os.ReadFile(filepath.Join(images, "rootfs.ext4"))
			data, _ := os.ReadFile(img)
			off := parts[1].Start * sector
			if off+len(rootfs) > len(data) || !bytes.Equal(data[off:off+len(rootfs)], rootfs) {
				t.Errorf("the second partition is not rootfs.ext4")
			}
		})
	}
}

// The post-build script puts a login prompt on the HDMI console, where
// the first-boot banner shows, and starts Wi-Fi on images that have
// wpa_supplicant.
func TestPostBuild(t *testing.T) {
	script := filepath.Join(moduleRoot, "buildroot/board/kvmd/common/post-build.sh")
	wifi := "etc/systemd/system/multi-user.target.wants/wpa_supplicant@wlan0.service"
	for _, withWifi := range []bool{false, true} {
		target := t.TempDir()
		if withWifi {
			unit := filepath.Join(target, "usr/lib/systemd/system/wpa_supplicant@.service")
			if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(unit, []byte("[Service]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Twice: Buildroot reruns post-build scripts on every make.
		run(t, script, target)
		run(t, script, target)
		link, err := os.Readlink(filepath.Join(target, "etc/systemd/system/getty.target.wants/getty@tty1.service"))
		if err != nil || link != "/usr/lib/systemd/system/getty@.service" {
			t.Errorf("getty@tty1: %q, %v", link, err)
		}
		if fi, err := os.Stat(filepath.Join(target, "etc/issue.d")); err != nil || !fi.IsDir() {
			t.Errorf("etc/issue.d: %v", err)
		}
		link, err = os.Readlink(filepath.Join(target, wifi))
		switch {
		case withWifi && link != "/usr/lib/systemd/system/wpa_supplicant@.service":
			t.Errorf("with wpa_supplicant, %s: %q, %v", wifi, link, err)
		case !withWifi && err == nil:
			t.Errorf("without wpa_supplicant, %s links to %s", wifi, link)
		}
	}
}
