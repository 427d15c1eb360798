package imagetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probePath is where the test puts probe (./probe) in the guest.
const probePath = "/usr/local/bin/kvmd-imagetest-probe"

// buildProbe builds ./probe for the guest into the shared directory.
func buildProbe(t *testing.T, share string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(share, "kvmd-imagetest-probe"), "./probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./probe: %v\n%s", err, out)
	}
}

// installProbe copies the probe from the shared directory into the guest.
func (s *system) installProbe(t *testing.T) {
	t.Helper()
	if _, st := s.m.shell.run(t, "test -x "+probePath); st == 0 {
		return
	}
	s.m.shell.must(t, "mkdir -p /run/kvmd-imagetest && mount -t 9p -o trans=virtio,version=9p2000.L,ro kvmd /run/kvmd-imagetest && "+
		"install -m 0755 /run/kvmd-imagetest/kvmd-imagetest-probe "+probePath+"; st=$?; umount /run/kvmd-imagetest; exit $st")
}

// inSandbox is a shell command line that runs probe ARGS inside
// kvmd.service's sandbox: in the service's cgroup (systemd's device
// policy is a BPF program on it) and its mount namespace, as root (so
// that only the sandbox, not file permissions, decides), or, with asUser,
// as the user kvmd with its groups and no capabilities, as the daemon
// runs.
func (s *system) inSandbox(t *testing.T, asUser bool, args string) string {
	t.Helper()
	pid := s.mainPID(t)
	if pid == 0 {
		t.Fatal("kvmd.service is not running")
	}
	cg := strings.TrimSpace(s.m.shell.must(t, fmt.Sprintf("sed -n 's/^0:://p' /proc/%d/cgroup", pid)))
	run := probePath + " " + args
	if asUser {
		run = "setpriv --reuid=kvmd --regid=kvmd --init-groups --inh-caps=-all --bounding-set=-all --no-new-privs " + run
	}
	return s.m.shell.must(t, fmt.Sprintf("sh -c 'echo $$ >/sys/fs/cgroup%s/cgroup.procs && exec nsenter -t %d -m -- %s'", cg, pid, run))
}

// probeResults parses the probe's "OP PATH RESULT" lines into PATH (or
// OP PATH) -> RESULT.
func probeResults(out string) map[string]string {
	r := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			r[f[0]+" "+f[1]] = f[2]
		}
	}
	return r
}

// testSandbox: kvmd.service's sandbox lets the daemon reach its devices
// (the capture node, the media graph, the gadget's keyboard and mouse,
// the GPIO chip), the gadget's LUN in configfs, the controllers' state
// and its streamer's socket directory, and nothing more: no other device
// node opens in its cgroup, even for root; no other configfs attribute,
// sysfs file or directory outside its own is writable for its user. And
// nobody else may use the keyboard, mouse or LUN.
func (s *system) testSandbox(t *testing.T) {
	start := time.Now()
	sh := s.m.shell
	s.installProbe(t)

	// The device cgroup, as root: every node under /dev read-only, by
	// class. Allowed: systemd's basic set for DevicePolicy=closed, the
	// classes the unit names (resolved in /proc/devices, as systemd does).
	majors := map[string]int{}
	for _, l := range strings.Split(sh.must(t, "sed -n '/^Character/,/^$/p' /proc/devices"), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				majors[f[1]] = n
			}
		}
	}
	for _, c := range []string{"video4linux", "media", "hidg", "gpiochip"} {
		if _, ok := majors[c]; !ok {
			t.Errorf("no %s in /proc/devices: the check below cannot see its nodes", c)
		}
	}
	// rtc, read-only: ProtectClock=yes implies DeviceAllow=char-rtc r
	// (systemd.exec(5)); pts: the pseudo-terminals (major 136).
	allowedMajor := map[int]bool{majors["video4linux"]: true, majors["media"]: true, majors["hidg"]: true, majors["gpiochip"]: true,
		majors["rtc"]: true, 136: true}
	basic := []string{"1:3", "1:5", "1:7", "1:8", "1:9", "5:2"} // null zero full random urandom ptmx
	var opened, refused []string
	wantOpen := map[string]bool{"/dev/video0": false, "/dev/media0": false, "/dev/hidg0": false, "/dev/hidg1": false, "/dev/hidg2": false, "/dev/gpiochip0": false}
	for _, l := range strings.Split(s.inSandbox(t, false, "devs"), "\n") {
		f := strings.Fields(l) // dev char|block MAJ:MIN PATH RESULT
		if len(f) != 5 {
			continue
		}
		maj, _ := strconv.Atoi(strings.Split(f[2], ":")[0])
		allowed := f[1] == "char" && (allowedMajor[maj] || slices.Contains(basic, f[2]))
		ok := f[4] == "ok"
		if _, want := wantOpen[f[3]]; want {
			wantOpen[f[3]] = ok
		}
		switch {
		case ok && !allowed:
			t.Errorf("the sandbox lets root open %s (%s %s)", f[3], f[1], f[2])
		case !ok && allowed && f[4] != "ENXIO" && f[4] != "EIO":
			t.Errorf("the sandbox refuses %s (%s %s): %s", f[3], f[1], f[2], f[4])
		}
		if ok {
			opened = append(opened, f[3])
		} else {
			refused = append(refused, f[3]+"="+f[4])
		}
	}
	for p, ok := range wantOpen {
		if !ok {
			t.Errorf("%s: not opened in the sandbox", p)
		}
	}
	t.Logf("sandbox, root in kvmd.service's cgroup: opened %s", strings.Join(opened, " "))
	t.Logf("sandbox: refused %d nodes, among them %s", len(refused), strings.Join(firstN(refused, 12), " "))

	// Access modes, as root: read-write for the capture node and the
	// gadget's, read-only for the media graph, the GPIO chip and the RTC.
	got := probeResults(s.inSandbox(t, false, "open rw /dev/video0 /dev/hidg0 /dev/hidg1 /dev/media0 /dev/gpiochip0 /dev/rtc0"))
	for p, want := range map[string]string{"/dev/video0": "ok", "/dev/hidg0": "ok", "/dev/hidg1": "ok",
		"/dev/media0": "EPERM", "/dev/gpiochip0": "EPERM", "/dev/rtc0": "EPERM"} {
		if got["open-rw "+p] != want {
			t.Errorf("sandbox, root: open %s read-write: %s, want %s", p, got["open-rw "+p], want)
		}
	}

	// As the daemon's user: the LUN's attributes (the same values back),
	// the streamer's directory; not the gadget's other attributes, not
	// the controller's, not /run/kvmd, not /var/lib/kvmd.
	lun := gadgetDir + "/functions/mass_storage.usb0/lun.0"
	ro := sh.must(t, "cat "+lun+"/ro")
	cdrom := sh.must(t, "cat "+lun+"/cdrom")
	got = probeResults(s.inSandbox(t, true, strings.Join([]string{
		"open rw /dev/hidg0 /dev/hidg1 /dev/video0 /dev/sda /dev/cec0",
		"write " + ro + " " + lun + "/ro " + gadgetDir + "/idVendor " + gadgetDir + "/UDC",
		"write " + cdrom + " " + lun + "/cdrom",
		"write 0 /sys/class/udc/" + testUDC + "/soft_connect",
		"create /run/kvmd/ustreamer/probe.sock /run/kvmd/probe /var/lib/kvmd/probe /tmp/probe",
		"mkdir " + gadgetDir + "/functions/hid.usb9 /sys/kernel/config/usb_gadget/other",
		"open r /sys/class/udc/" + testUDC + "/state " + gadgetDir + "/UDC",
	}, " -- ")))
	// "denied" is any error: which check refuses first (permissions, the
	// read-only mount, the device cgroup) is the kernel's business.
	want := map[string]string{
		"open-rw /dev/hidg0":  "ok",
		"open-rw /dev/hidg1":  "ok",
		"open-rw /dev/video0": "ok",
		// The gadget's disk as this machine's own host sees it.
		"open-rw /dev/sda":                                  "denied",
		"open-rw /dev/cec0":                                 "denied",
		"write " + lun + "/ro":                              "ok",
		"write " + lun + "/cdrom":                           "ok",
		"write " + gadgetDir + "/idVendor":                  "denied",
		"write " + gadgetDir + "/UDC":                       "denied",
		"write /sys/class/udc/" + testUDC + "/soft_connect": "denied",
		"create /run/kvmd/ustreamer/probe.sock":             "ok",
		"create /run/kvmd/probe":                            "denied",
		"create /var/lib/kvmd/probe":                        "denied",
		"create /tmp/probe":                                 "ok",
		"mkdir " + gadgetDir + "/functions/hid.usb9":        "denied",
		"mkdir /sys/kernel/config/usb_gadget/other":         "denied",
		"open-r /sys/class/udc/" + testUDC + "/state":       "ok",
		"open-r " + gadgetDir + "/UDC":                      "ok",
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var seen []string
	for _, k := range keys {
		g, w := got[k], want[k]
		if g == "" || (w == "ok") != (g == "ok") {
			t.Errorf("sandbox, user kvmd: %s: %s, want %s", k, g, w)
		}
		seen = append(seen, k+"="+g)
	}
	t.Logf("sandbox, user kvmd: %s", strings.Join(seen, ", "))
	if out := sh.must(t, "stat -c '%n %U:%G %a' /run/kvmd /run/kvmd/ustreamer"); out != "/run/kvmd root:root 755\n/run/kvmd/ustreamer kvmd:kvmd 700" {
		t.Errorf("the runtime directories:\n%s", out)
	}

	// Nobody else: another user, outside the sandbox.
	got = probeResults(sh.must(t, "setpriv --reuid=nobody --regid=nogroup --clear-groups "+probePath+" open rw /dev/hidg0 /dev/hidg1; "+
		"setpriv --reuid=nobody --regid=nogroup --clear-groups "+probePath+" write "+ro+" "+lun+"/ro "+lun+"/file"))
	for _, k := range []string{"open-rw /dev/hidg0", "open-rw /dev/hidg1", "write " + lun + "/ro", "write " + lun + "/file"} {
		if got[k] != "EACCES" {
			t.Errorf("user nobody: %s: %s, want EACCES", k, got[k])
		}
	}
	t.Logf("sandbox checks: %v", time.Since(start).Round(100*time.Millisecond))
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
