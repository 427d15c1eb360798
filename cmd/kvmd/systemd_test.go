package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kvmd/firstboot"
	"kvmd/hw"
	"kvmd/internal/testutil"
)

// unitDir holds the systemd units and the sysusers.d file shipped with kvmd.
const unitDir = "../../systemd"

var unitFiles = []string{"kvmd.service", "kvmd.socket", "kvmd-firstboot.service", "kvmd-otg.service"}

// unitCopies copies the units into a temporary directory with ExecStart
// pointing at the kvmd binary built for the tests, since verify checks
// that the command exists and is executable.
func unitCopies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range unitFiles {
		data, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name != "kvmd.socket" && !bytes.Contains(data, []byte("ExecStart=/usr/bin/kvmd ")) {
			t.Fatalf("%s does not run /usr/bin/kvmd", name)
		}
		data = bytes.ReplaceAll(data, []byte("/usr/bin/kvmd "), []byte(kvmdBin+" "))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// verify runs systemd-analyze verify on the units in dir and returns what
// it said. It loads the units as systemd would, with the system's units
// for the ones they name, and reports unknown directives, values that do
// not parse, missing or non-executable commands and dependencies on units
// that do not exist (Requires=). Most of those are only printed as
// warnings, with exit status 0: the output must be empty. It needs no
// running systemd. Lines about the system's own unit files are left out:
// loading multi-user.target loads every unit it wants, and some Debian
// package's unit (freeradius.service, from make deps) draws a warning of
// its own.
func verify(t *testing.T, dir string) (string, error) {
	t.Helper()
	args := []string{"verify", "--man=no", "--generators=no"}
	for _, name := range unitFiles {
		args = append(args, filepath.Join(dir, name))
	}
	out, err := exec.Command(testutil.NeedTool(t, "systemd", "systemd-analyze"), args...).CombinedOutput()
	var ours strings.Builder
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "/lib/systemd/") || strings.HasPrefix(line, "/usr/lib/systemd/") {
			continue
		}
		ours.WriteString(line)
	}
	return ours.String(), err
}

func TestSystemdVerify(t *testing.T) {
	dir := unitCopies(t)
	if out, err := verify(t, dir); err != nil || out != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// The check itself works on this systemd: a misspelt directive and a
	// bad value are caught.
	path := filepath.Join(dir, "kvmd.service")
	data, _ := os.ReadFile(path)
	data = bytes.Replace(data, []byte("ProtectHome=yes"), []byte("ProtectHomes=yes"), 1)
	data = bytes.Replace(data, []byte("DeviceAllow=char-gpiochip r"), []byte("DeviceAllow=char-gpiochip rx"), 1)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := verify(t, dir)
	if !strings.Contains(out, "Unknown key 'ProtectHomes'") || !strings.Contains(out, "rx") {
		t.Errorf("verify missed a misspelt directive and a bad value:\n%s", out)
	}
}

// unit is a unit file's directives: section, then key, then one value per
// line that sets it, in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, name string) unit {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(unitDir, name))
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" || strings.HasSuffix(line, `\`) {
				t.Fatalf("%s: cannot read line %q", name, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// words is every value of a key, split at blanks, as systemd reads list
// directives, sorted.
func (u unit) words(section, key string) []string {
	var w []string
	for _, v := range u[section][key] {
		w = append(w, strings.Fields(v)...)
	}
	slices.Sort(w)
	return w
}

// directive is a key's expected values: every line, in order, or, with
// list, the words of all lines as a set.
type directive struct {
	section, key string
	want         []string
	list         bool
}

func checkDirectives(t *testing.T, name string, u unit, ds []directive) {
	t.Helper()
	for _, d := range ds {
		got := u[d.section][d.key]
		want := d.want
		if d.list {
			got = u.words(d.section, d.key)
			want = slices.Sorted(slices.Values(d.want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s [%s] %s = %q, want %q", name, d.section, d.key, got, want)
		}
	}
}

func one(section, key, value string) directive {
	return directive{section: section, key: key, want: []string{value}}
}

func list(section, key string, words ...string) directive {
	return directive{section: section, key: key, want: words, list: true}
}

// TestSystemdHardening pins the daemon's unit: how it runs, and every
// sandboxing directive. Dropping or weakening one fails here.
func TestSystemdHardening(t *testing.T) {
	const s = "Service"
	u := readUnit(t, "kvmd.service")
	checkDirectives(t, "kvmd.service", u, []directive{
		list("Unit", "Requires", "kvmd.socket"),
		list("Unit", "Wants", "kvmd-firstboot.service"),
		list("Unit", "After", "network.target", "kvmd.socket", "kvmd-firstboot.service", "kvmd-otg.service"),
		one(s, "Type", "notify"),
		one(s, "NotifyAccess", "main"),
		one(s, "ExecStart", "/usr/bin/kvmd serve --config "+filepath.Join(firstboot.DefaultEtc, "kvmd.yaml")),
		one(s, "WatchdogSec", "30s"),
		one(s, "Restart", "on-failure"),
		one(s, "RestartSec", "3s"),
		one(s, "User", "kvmd"),
		one(s, "Group", "kvmd"),
		list(s, "SupplementaryGroups", "systemd-journal"),
		// systemd chowns each of these directories, and all in it, to User=
		// at every start when its owner differs: kvmd.socket's socket in
		// /run/kvmd and firstboot's root-only files in /var/lib/kvmd and
		// /etc/kvmd would become the daemon's (the booted-system test,
		// imagetest/, found the first two). Only the streamer's socket
		// directory below /run/kvmd, the daemon's alone.
		list(s, "RuntimeDirectory", "kvmd/ustreamer"),
		one(s, "RuntimeDirectoryMode", "0700"),
		list(s, "StateDirectory"),
		list(s, "ConfigurationDirectory"),
		list(s, "LogsDirectory"),
		list(s, "CacheDirectory"),
		one(s, "InaccessiblePaths", "-"+filepath.Join(firstboot.DefaultState, "admin-password")),
		one(s, "CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"),
		one(s, "AmbientCapabilities", "CAP_NET_BIND_SERVICE"),
		one(s, "NoNewPrivileges", "yes"),
		one(s, "PrivateDevices", "no"),
		one(s, "DevicePolicy", "closed"),
		// ustreamer, the daemon's child, opens the capture node
		// read-write; the gadget's keyboard and mouse are written and
		// read (LEDs). No block or input devices: the gadget's disk and
		// keyboard as this machine's own host sees them (imagetest).
		{section: s, key: "DeviceAllow", want: []string{"char-video4linux rw", "char-media r", "char-hidg rw",
			"char-gpiochip r", "char-*gpiomem rw", "/dev/vcio_gencmd r", "/dev/vcio r"}},
		one(s, "ProtectSystem", "strict"),
		one(s, "ProtectHome", "yes"),
		one(s, "PrivateTmp", "yes"),
		one(s, "ProtectKernelTunables", "yes"),
		one(s, "ProtectKernelModules", "yes"),
		one(s, "ProtectKernelLogs", "yes"),
		one(s, "ProtectControlGroups", "yes"),
		one(s, "ProtectClock", "yes"),
		one(s, "PrivateMounts", "yes"),
		one(s, "ProtectProc", "invisible"),
		list(s, "RestrictAddressFamilies", "AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"),
		one(s, "RestrictNamespaces", "yes"),
		one(s, "RestrictRealtime", "yes"),
		one(s, "RestrictSUIDSGID", "yes"),
		one(s, "LockPersonality", "yes"),
		one(s, "MemoryDenyWriteExecute", "yes"),
		one(s, "SystemCallArchitectures", "native"),
		one(s, "SystemCallFilter", "@system-service"),
		// It writes the files in /etc/kvmd (imagetest's web edits), the
		// virtual media's images, and in configfs what file permissions
		// let it: the drive's LUN.
		{section: s, key: "ReadWritePaths", want: []string{"-" + firstboot.DefaultEtc, "-" + filepath.Join(firstboot.DefaultState, "msd"), "-/sys/kernel/config"}},
		list(s, "DynamicUser"),
	})

	// systemd's own reading of the sandbox: 2.0 ("OK") on systemd 252, the
	// lowest a network daemon with device access gets there. A newer
	// systemd may score differently; raise the threshold only for that.
	dir := unitCopies(t)
	out, err := exec.Command(testutil.NeedTool(t, "systemd", "systemd-analyze"), "security", "--offline=true", "--threshold=20", "--no-pager",
		filepath.Join(dir, "kvmd.service")).CombinedOutput()
	if err != nil {
		var lost []string // systemd's table, less the checks passed
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "✓") {
				lost = append(lost, l)
			}
		}
		t.Errorf("systemd-analyze security: %v: exposure above 2.0\n%s", err, strings.Join(lost, "\n"))
	}
}

// TestSystemdMailbox: the device cgroup lets the daemon open every vcio
// node it tries, read-only (the ioctl needs no more), in the group that
// owns them.
func TestSystemdMailbox(t *testing.T) {
	u := readUnit(t, "kvmd.service")
	allowed := u["Service"]["DeviceAllow"]
	for _, node := range hw.DefaultVCIONodes {
		if !slices.Contains(allowed, node+" r") {
			t.Errorf("kvmd.service: no DeviceAllow=%s r (DeviceAllow %q)", node, allowed)
		}
	}
	conf := readFile(t, filepath.Join(unitDir, "sysusers.d", "kvmd.conf"))
	if !strings.Contains(conf, "\nm kvmd video\n") {
		t.Errorf("sysusers.d/kvmd.conf: kvmd is not put in group video, which owns the vcio nodes")
	}
}

func TestSystemdSocketAndFirstboot(t *testing.T) {
	sock := readUnit(t, "kvmd.socket")
	checkDirectives(t, "kvmd.socket", sock, []directive{
		// The order is the order of the descriptors passed.
		{section: "Socket", key: "ListenStream", want: []string{"443", firstboot.DefaultSocket}},
		one("Socket", "SocketMode", "0660"),
		one("Socket", "SocketGroup", "kvmd"),
		list("Install", "WantedBy", "sockets.target"),
	})
	fb := readUnit(t, "kvmd-firstboot.service")
	checkDirectives(t, "kvmd-firstboot.service", fb, []directive{
		one("Service", "Type", "oneshot"),
		one("Service", "RemainAfterExit", "yes"),
		one("Service", "ExecStart", "/usr/bin/kvmd firstboot"),
		// Before the daemon, and before the login prompts so that the
		// console banner shows the password (getty@ and serial-getty@
		// are ordered after getty-pre.target).
		list("Unit", "Before", "kvmd.service", "getty-pre.target"),
		list("Unit", "Wants", "getty-pre.target"),
		list("Unit", "After", "local-fs.target", "systemd-sysusers.service"),
		// It runs at every boot: it is idempotent, and takes the banner
		// down after the password is changed.
		list("Unit", "ConditionPathExists"),
	})
}

// TestSysusers applies sysusers.d/kvmd.conf to an empty root: the user
// kvmd, with its own group, in the groups that give it the journal, the
// capture device and the GPIO chips.
func TestSysusers(t *testing.T) {
	conf, err := filepath.Abs(filepath.Join(unitDir, "sysusers.d", "kvmd.conf"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testutil.NeedTool(t, "systemd", "systemd-sysusers"), "--root="+root, conf).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(line, "Creating ") {
			t.Errorf("systemd-sysusers complains: %s", line)
		}
	}
	passwd := readFile(t, filepath.Join(root, "etc", "passwd"))
	group := readFile(t, filepath.Join(root, "etc", "group"))
	fields := func(file, name string) []string {
		for _, l := range strings.Split(file, "\n") {
			if f := strings.Split(l, ":"); f[0] == name {
				return f
			}
		}
		t.Fatalf("no %s in\n%s", name, file)
		return nil
	}
	u := fields(passwd, "kvmd")
	if u[6] != "/usr/sbin/nologin" || u[5] != firstboot.DefaultState || u[3] != fields(group, "kvmd")[2] {
		t.Errorf("user kvmd: %q: want group kvmd, home %s, no login shell", u, firstboot.DefaultState)
	}
	for _, g := range []string{"systemd-journal", "video", "gpio"} {
		if members := strings.Split(fields(group, g)[3], ","); !slices.Contains(members, "kvmd") {
			t.Errorf("kvmd is not a member of %s", g)
		}
	}
}

// TestSystemdOTG pins the gadget's unit: a oneshot that makes the gadget
// before the daemon starts (whose sandbox resolves the hidg major at its
// start) and removes it at stop, root in configfs and nowhere else.
func TestSystemdOTG(t *testing.T) {
	const s = "Service"
	u := readUnit(t, "kvmd-otg.service")
	checkDirectives(t, "kvmd-otg.service", u, []directive{
		list("Unit", "Before", "kvmd.service"),
		list("Unit", "After", "systemd-modules-load.service", "systemd-udevd.service", "local-fs.target"),
		one(s, "Type", "oneshot"),
		one(s, "RemainAfterExit", "yes"),
		one(s, "ExecStart", "/usr/bin/kvmd otg start --udc-wait 20s"),
		one(s, "ExecStop", "/usr/bin/kvmd otg stop"),
		list(s, "User"),
		list(s, "CapabilityBoundingSet", "CAP_CHOWN", "CAP_FOWNER"),
		one(s, "ProtectSystem", "strict"),
		one(s, "ReadWritePaths", "/sys/kernel/config"),
		one(s, "ProtectKernelTunables", "yes"),
		one(s, "ProtectKernelModules", "yes"),
		one(s, "PrivateNetwork", "yes"),
		one(s, "NoNewPrivileges", "yes"),
		one(s, "SystemCallFilter", "@system-service"),
		list("Install", "WantedBy", "multi-user.target"),
	})
	// The daemon is ordered after it too, for when it is started by hand.
	if d := readUnit(t, "kvmd.service"); !slices.Contains(d.words("Unit", "After"), "kvmd-otg.service") {
		t.Error("kvmd.service is not After=kvmd-otg.service")
	}
}
