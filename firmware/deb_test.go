package firmware

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// debArch is one package of `make deb`: a Debian architecture and the
// cross build it holds.
type debArch struct {
	arch string // Debian's name
	tg   string // the target's name in targets
}

var debArches = []debArch{{"arm64", "arm64"}, {"armhf", "armv7"}, {"amd64", "amd64"}}

const (
	debVersion = "0.0~git20261121.3e38169-1"
	// debEpoch is SOURCE_DATE_EPOCH for the test builds: 2026-11-21 07:46:43 UTC.
	debEpoch      = "1795247203"
	debMaintainer = "kvmd test <kvmd@example.org>"
)

// debFiles is what each package holds, with dpkg -c's modes; every
// entry is root/root.
var debFiles = map[string]string{
	"./":                                    "drwxr-xr-x",
	"./usr/":                                "drwxr-xr-x",
	"./usr/bin/":                            "drwxr-xr-x",
	"./usr/bin/kvmd":                        "-rwxr-xr-x",
	"./usr/lib/":                            "drwxr-xr-x",
	"./usr/lib/systemd/":                    "drwxr-xr-x",
	"./usr/lib/systemd/system/":             "drwxr-xr-x",
	"./usr/lib/systemd/system/kvmd.service": "-rw-r--r--",
	"./usr/lib/systemd/system/kvmd.socket":  "-rw-r--r--",
	"./usr/lib/systemd/system/kvmd-firstboot.service": "-rw-r--r--",
	"./usr/lib/systemd/system/kvmd-otg.service":       "-rw-r--r--",
	// The USB gadget (issue 25): libcomposite at boot, and the udev rule
	// that gives /dev/hidg* to the user kvmd.
	"./usr/lib/modules-load.d/":                 "drwxr-xr-x",
	"./usr/lib/modules-load.d/kvmd.conf":        "-rw-r--r--",
	"./usr/lib/udev/":                           "drwxr-xr-x",
	"./usr/lib/udev/rules.d/":                   "drwxr-xr-x",
	"./usr/lib/udev/rules.d/90-kvmd-otg.rules":  "-rw-r--r--",
	"./usr/lib/udev/rules.d/90-kvmd-gpio.rules": "-rw-r--r--",
	"./usr/lib/sysusers.d/":                     "drwxr-xr-x",
	"./usr/lib/sysusers.d/kvmd.conf":            "-rw-r--r--",
	"./usr/share/":                              "drwxr-xr-x",
	"./usr/share/doc/":                          "drwxr-xr-x",
	"./usr/share/doc/kvmd/":                     "drwxr-xr-x",
	"./usr/share/doc/kvmd/changelog.Debian.gz":  "-rw-r--r--",
	"./usr/share/doc/kvmd/copyright":            "-rw-r--r--",
	"./usr/share/lintian/":                      "drwxr-xr-x",
	"./usr/share/lintian/overrides/":            "drwxr-xr-x",
	"./usr/share/lintian/overrides/kvmd":        "-rw-r--r--",
	"./usr/share/man/":                          "drwxr-xr-x",
	"./usr/share/man/man8/":                     "drwxr-xr-x",
	"./usr/share/man/man8/kvmd.8.gz":            "-rw-r--r--",
	// For fleets (issue 15): the alert rules, and the journal-upload
	// configuration (a conffile).
	"./usr/share/kvmd/":                          "drwxr-xr-x",
	"./usr/share/kvmd/prometheus/":               "drwxr-xr-x",
	"./usr/share/kvmd/prometheus/kvmd.rules.yml": "-rw-r--r--",
	"./etc/":                               "drwxr-xr-x",
	"./etc/systemd/":                       "drwxr-xr-x",
	"./etc/systemd/journal-upload.conf.d/": "drwxr-xr-x",
	"./etc/systemd/journal-upload.conf.d/kvmd.conf": "-rw-r--r--",
}

// debTools skips t without dpkg-deb, dpkg and lintian, or fails it when
// testutil.Required (make test).
func debTools(t *testing.T) {
	t.Helper()
	requireTools(t, "dpkg-dev lintian", "dpkg-deb", "dpkg", "lintian")
}

func findTarget(t *testing.T, name string) target {
	t.Helper()
	for _, tg := range targets {
		if tg.name == name {
			return tg
		}
	}
	t.Fatalf("no target %s", name)
	return target{}
}

// mkdeb runs scripts/mkdeb.sh and returns the package's path.
func mkdeb(t *testing.T, arch, binary, outdir string, env ...string) string {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(moduleRoot, "scripts", "mkdeb.sh"), arch, debVersion, binary, outdir)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+debEpoch, "DEB_MAINTAINER="+debMaintainer)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mkdeb.sh %s: %v\n%s", arch, err, stderrOf(err))
	}
	deb := strings.TrimSpace(string(out))
	if want := filepath.Join(outdir, "kvmd_"+debVersion+"_"+arch+".deb"); deb != want {
		t.Fatalf("mkdeb.sh wrote %q, want %q", deb, want)
	}
	return deb
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderrOf(err))
	}
	return string(out)
}

// TestDeb builds the three packages of `make deb` from the cross builds
// and checks their fields, contents, owners and modes, the units against
// the extracted tree, reproducibility, and lintian's verdict.
func TestDeb(t *testing.T) {
	debTools(t)
	t.Parallel()
	start := time.Now()
	out := t.TempDir()
	debs := make([]string, len(debArches))
	// The group returns when its parallel subtests are done.
	t.Run("build", func(t *testing.T) {
		for i, da := range debArches {
			t.Run(da.arch, func(t *testing.T) {
				t.Parallel()
				binary := bins.get(t, findTarget(t, da.tg))
				debs[i] = mkdeb(t, da.arch, binary, out)
				checkDeb(t, da, debs[i], binary)
			})
		}
	})
	if t.Failed() {
		return
	}

	t.Run("lintian", func(t *testing.T) {
		args := []string{"--fail-on", "error,warning", "--display-level", ">=warning"}
		if os.Getuid() == 0 {
			args = append(args, "--allow-root")
		}
		out, err := exec.Command("lintian", append(args, debs...)...).CombinedOutput()
		t.Logf("lintian --fail-on error,warning: %s", strings.TrimSpace(string(out)))
		if err != nil {
			t.Errorf("lintian: %v", err)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		// Another directory, umask and time of day: the same bytes.
		binary := bins.get(t, findTarget(t, "amd64"))
		cmd := exec.Command("sh", "-c", `umask 077; exec sh "$@"`, "sh",
			filepath.Join(moduleRoot, "scripts", "mkdeb.sh"), "amd64", debVersion, binary, t.TempDir())
		cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH="+debEpoch, "DEB_MAINTAINER="+debMaintainer, "TMPDIR="+t.TempDir())
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("mkdeb.sh: %v\n%s", err, stderrOf(err))
		}
		a, err1 := os.ReadFile(debs[2])
		c, err2 := os.ReadFile(strings.TrimSpace(string(b)))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(a, c) {
			t.Errorf("two builds of the amd64 package differ (%d and %d bytes)", len(a), len(c))
		}
	})
	t.Logf("firmware deb: three packages built and checked in %s", time.Since(start).Round(time.Millisecond))
}

// checkDeb checks one package's control fields, contents and units.
func checkDeb(t *testing.T, da debArch, deb, binary string) {
	fields := map[string]string{
		"Package":      "kvmd",
		"Version":      debVersion,
		"Architecture": da.arch,
		"Maintainer":   debMaintainer,
		"Depends":      "systemd",
		"Recommends":   "ustreamer, ffmpeg",
		"Suggests":     "systemd-journal-remote",
		"Section":      "admin",
		"Priority":     "optional",
	}
	for k, want := range fields {
		if got := strings.TrimSpace(run(t, "dpkg-deb", "--field", deb, k)); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	desc := run(t, "dpkg-deb", "--field", deb, "Description")
	if synopsis, long, _ := strings.Cut(desc, "\n"); len(synopsis) > 80 || strings.Count(long, "\n") < 3 {
		t.Errorf("Description: want a synopsis and a long description, got %q", desc)
	}
	info := run(t, "dpkg-deb", "--info", deb)
	for _, s := range []string{"postinst", "prerm", "postrm", "md5sums", "conffiles"} {
		if !strings.Contains(info, " "+s) {
			t.Errorf("dpkg-deb --info lists no %s:\n%s", s, info)
		}
	}
	// Every file in /etc is a conffile, so an operator's URL survives an
	// upgrade.
	if got := run(t, "dpkg-deb", "--info", deb, "conffiles"); got != "/etc/systemd/journal-upload.conf.d/kvmd.conf\n" {
		t.Errorf("conffiles: %q, want the journal-upload configuration", got)
	}

	// dpkg -c: exactly debFiles, each root/root with its mode, and the
	// mtimes all SOURCE_DATE_EPOCH's.
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(run(t, "dpkg", "-c", deb)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 {
			t.Errorf("dpkg -c: unexpected line %q", sc.Text())
			continue
		}
		mode, owner, date, path := f[0], f[1], f[3]+" "+f[4], f[5]
		want, ok := debFiles[path]
		switch {
		case !ok:
			t.Errorf("unexpected %s in the package", path)
		case mode != want || owner != "root/root":
			t.Errorf("%s: %s %s, want %s root/root", path, mode, owner, want)
		}
		if date != "2026-11-21 07:46" {
			t.Errorf("%s: mtime %s, want SOURCE_DATE_EPOCH's", path, date)
		}
		seen[path] = true
	}
	for p := range debFiles {
		if !seen[p] {
			t.Errorf("package lacks %s", p)
		}
	}

	// The extracted tree: the binary is the cross build, and every
	// ExecStart names an executable in the tree.
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", deb, root)
	a, err1 := os.ReadFile(binary)
	b, err2 := os.ReadFile(filepath.Join(root, "usr/bin/kvmd"))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("/usr/bin/kvmd is not the %s cross build (%v %v)", da.tg, err1, err2)
	}
	// The manual page is man/kvmd.8, with no name or time in the gzip
	// header: its bytes depend on the page alone.
	if gz, err := os.ReadFile(filepath.Join(root, "usr/share/man/man8/kvmd.8.gz")); err != nil {
		t.Error(err)
	} else if zr, err := gzip.NewReader(bytes.NewReader(gz)); err != nil {
		t.Errorf("kvmd.8.gz: %v", err)
	} else {
		page, err := io.ReadAll(zr)
		src, err2 := os.ReadFile(filepath.Join(moduleRoot, "man", "kvmd.8"))
		if err != nil || err2 != nil || !bytes.Equal(page, src) {
			t.Errorf("kvmd.8.gz is not man/kvmd.8 (%v %v)", err, err2)
		}
		if zr.Name != "" || !zr.ModTime.IsZero() {
			t.Errorf("kvmd.8.gz: gzip header has name %q, time %v; want neither (gzip -n)", zr.Name, zr.ModTime)
		}
	}
	execStart := regexp.MustCompile(`(?m)^ExecStart=[-@:+!]*(\S+)`)
	for _, unit := range []string{"kvmd.service", "kvmd-firstboot.service", "kvmd-otg.service"} {
		text, err := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", unit))
		if err != nil {
			t.Error(err)
			continue
		}
		m := execStart.FindAllSubmatch(text, -1)
		if len(m) == 0 {
			t.Errorf("%s has no ExecStart", unit)
		}
		for _, e := range m {
			p := string(e[1])
			st, err := os.Stat(filepath.Join(root, p))
			if !filepath.IsAbs(p) || err != nil || st.Mode()&0o111 == 0 {
				t.Errorf("%s: ExecStart=%s is not an executable in the package (%v)", unit, p, err)
			}
		}
	}
	if da.arch == "amd64" {
		if out := run(t, filepath.Join(root, "usr/bin/kvmd"), "version"); !strings.HasPrefix(out, "kvmd ") {
			t.Errorf("kvmd version: %q", out)
		}
	}
}

// TestDebOverrides wants a reason, in a comment, above every lintian
// override.
func TestDebOverrides(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "scripts", "deb", "lintian-overrides"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i == 0 || !strings.HasPrefix(lines[i-1], "#") || len(strings.TrimSpace(strings.TrimPrefix(lines[i-1], "#"))) < 20 {
			t.Errorf("override %q has no reason above it", l)
		}
	}
}

// TestDebPostinstChroot runs the maintainer scripts as dpkg would in a
// chroot or image build, without a running systemd: stubs record the
// commands, and each script must succeed and leave the system alone but
// for the user and the enabled units.
func TestDebPostinstChroot(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd is running here; the scripts would start units")
	}
	stubs := t.TempDir()
	log := filepath.Join(stubs, "calls")
	for _, name := range []string{"systemctl", "systemd-sysusers", "kvmd"} {
		stub := "#!/bin/sh\necho \"" + name + " $*\" >>" + log + "\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	steps := [][]string{
		{"postinst", "configure", ""},
		{"postinst", "configure", "0.0~git20261101.0000000-1"},
		{"prerm", "upgrade", debVersion},
		{"postrm", "upgrade", debVersion},
	}
	for _, s := range steps {
		cmd := exec.Command("sh", append([]string{filepath.Join(moduleRoot, "scripts", "deb", s[0])}, s[1:]...)...)
		cmd.Env = append(os.Environ(), "PATH="+stubs+":/usr/bin:/bin")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s %s: %v\n%s", s[0], strings.Join(s[1:], " "), err, out)
		}
	}
	b, _ := os.ReadFile(log)
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	want := []string{
		"systemd-sysusers /usr/lib/sysusers.d/kvmd.conf",
		"systemctl enable kvmd.socket kvmd-firstboot.service kvmd-otg.service",
		// The upgrade: the user again (it is idempotent), no enabling.
		"systemd-sysusers /usr/lib/sysusers.d/kvmd.conf",
	}
	if !slices.Equal(got, want) {
		t.Errorf("commands run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
