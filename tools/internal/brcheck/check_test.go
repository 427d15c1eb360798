package brcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/testutil"
)

// The tree kvmd ships, checked as it is.
func TestKvmdTree(t *testing.T) {
	ps, err := Check("../../../buildroot", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Error(p)
	}
	// BUILDROOT: a Buildroot source tree (the release in
	// buildroot/BUILDROOT_VERSION) to check every option against; none can
	// be fetched in CI, so this part runs where one is at hand.
	br := os.Getenv("BUILDROOT")
	if br == "" {
		t.Skip("BUILDROOT not set: options not checked against a Buildroot release")
	}
	ps, err = Check("../../../buildroot", br)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		t.Errorf("against %s: %v", br, p)
	}
}

// copyTree copies kvmd's tree into a temporary checkout (go.mod and cmd/
// linked from the real one, as the package builds from them) and returns
// the copy's path.
func copyTree(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	ext := filepath.Join(top, "buildroot")
	if err := testutil.CopyTree("../../../buildroot", ext); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"go.mod", "cmd"} {
		abs, _ := filepath.Abs(filepath.Join("../../..", l))
		if err := os.Symlink(abs, filepath.Join(top, l)); err != nil {
			t.Fatal(err)
		}
	}
	return ext
}

// edit rewrites a file of dir, replacing old (which must be there) by new.
func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), fi.Mode()); err != nil {
		t.Fatal(err)
	}
}

// expectProblem runs Check and wants a problem in file containing want.
func expectProblem(t *testing.T, ext, br, file, want string) {
	t.Helper()
	ps, err := Check(ext, br)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.File == file && strings.Contains(p.Msg, want) {
			return
		}
	}
	t.Errorf("no problem in %s containing %q; got %v", file, want, ps)
}

// Each breakage of kvmd's tree is found, in the file it is in.
func TestBrokenKvmdTree(t *testing.T) {
	const (
		pi5  = "configs/kvmd_raspberrypi5_defconfig"
		mk   = "package/kvmd/kvmd.mk"
		pcfg = "package/kvmd/Config.in"
	)
	tests := []struct {
		name, file, old, new string
		problemIn, want      string
	}{
		{"unknown option of the tree", pi5, "BR2_PACKAGE_KVMD=y", "BR2_PACKAGE_KVMD=y\nBR2_PACKAGE_KVMD_TLS=y", pi5, "BR2_PACKAGE_KVMD_TLS: no such option in this tree"},
		{"not a setting", pi5, "BR2_INIT_SYSTEMD=y", "BR2_INIT_SYSTEMD y", pi5, "not a setting"},
		{"set twice", pi5, "BR2_INIT_SYSTEMD=y", "BR2_INIT_SYSTEMD=y\nBR2_INIT_SYSTEMD=y", pi5, "set again"},
		{"bad quotes", pi5, `BR2_TARGET_GENERIC_HOSTNAME="kvmd"`, `BR2_TARGET_GENERIC_HOSTNAME="kv"md"`, pi5, "badly quoted"},
		{"no BR2_ prefix", pi5, "BR2_INIT_SYSTEMD=y", "INIT_SYSTEMD=y", pi5, "start with BR2_"},
		{"missing overlay", pi5, "common/rootfs-overlay", "common/rootfs-overley", pi5, "rootfs-overley does not exist"},
		{"unresolvable variable", pi5, "$(BR2_EXTERNAL_KVMD_PATH)/board/kvmd/common/post-build.sh", "$(BR2_EXTERNAL_KMVD_PATH)/board/kvmd/common/post-build.sh", pi5, "can be resolved"},
		{"no package enabled", pi5, "BR2_PACKAGE_KVMD=y\n", "", pi5, "enables none"},
		{"misspelt variable", mk, "KVMD_LICENSE =", "KVMD_LISENSE =", mk, "KVMD_LISENSE is neither a variable Buildroot reads"},
		{"hook not defined", mk, "KVMD_PRE_BUILD_HOOKS += KVMD_VENDOR_MODULES", "KVMD_PRE_BUILD_HOOKS += KVMD_VENDOR_MODULE", mk, "hook KVMD_VENDOR_MODULE is not defined"},
		{"another package's variable", mk, "KVMD_GO_ENV =", "GO_ENV =", mk, "outside the package's namespace"},
		{"no infrastructure call", mk, "$(eval $(golang-package))", "", mk, "no package infrastructure call"},
		{"unknown infrastructure", mk, "$(eval $(golang-package))", "$(eval $(go-package))", mk, `no Buildroot infrastructure "go-package"`},
		{"call not last", mk, "$(eval $(golang-package))", "$(eval $(golang-package))\nKVMD_TAGS = x", mk, "must come last"},
		{"define without endef", mk, "endef\n\n$(eval", "\n$(eval", mk, "define without endef"},
		{"unbalanced", mk, "KVMD_GO_ENV = CGO_ENABLED=0", "KVMD_GO_ENV = $(CGO_ENABLED=0", mk, "unbalanced"},
		{"endif without if", mk, "KVMD_GO_ENV = CGO_ENABLED=0", "KVMD_GO_ENV = CGO_ENABLED=0\nendif", mk, "endif without if"},
		{"no version", mk, "KVMD_VERSION =", "KVMD_VERSON =", mk, "KVMD_VERSION is not set"},
		{"downloaded without hash", mk, "KVMD_SITE_METHOD = local", "KVMD_SITE_METHOD = git", "package/kvmd/kvmd.hash", "needs its hashes"},
		{"wrong module", mk, "KVMD_GOMOD = kvmd", "KVMD_GOMOD = github.com/x/kvmd", mk, `go.mod's module is "kvmd"`},
		{"no such target", mk, "KVMD_BUILD_TARGETS = cmd/kvmd", "KVMD_BUILD_TARGETS = cmd/kvm", mk, "no Go package at cmd/kvm"},
		{"no Go dependency", pcfg, "depends on BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS\n\tdepends on BR2_INIT_SYSTEMD", "depends on BR2_INIT_SYSTEMD", pcfg, "must depend on BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS"},
		{"package symbol missing", pcfg, "config BR2_PACKAGE_KVMD\n", "config BR2_PACKAGE_KVM\n", pcfg, "BR2_PACKAGE_KVMD is not defined"},
		{"source missing", "Config.in", "package/kvmd/Config.in", "package/kvmd/Config.im", "Config.in", "no such file"},
		{"source outside", "Config.in", "$BR2_EXTERNAL_KVMD_PATH/package", "package", "Config.in", "files of this tree are named from"},
		{"external.mk", "external.mk", "$(BR2_EXTERNAL_KVMD_PATH)/package/", "package/", "external.mk", "does not include"},
		{"desc name", "external.desc", "name: KVMD", "name: KV-MD", "external.desc", "letters, digits and _ only"},
		{"desc junk", "external.desc", "name: KVMD", "name: KVMD\nversion: 1", "external.desc", "only name: and desc:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ext := copyTree(t)
			edit(t, ext, tt.file, tt.old, tt.new)
			expectProblem(t, ext, "", tt.problemIn, tt.want)
		})
	}
	t.Run("script not executable", func(t *testing.T) {
		ext := copyTree(t)
		if err := os.Chmod(filepath.Join(ext, "board/kvmd/common/post-image.sh"), 0o644); err != nil {
			t.Fatal(err)
		}
		expectProblem(t, ext, "", pi5, "post-image.sh is not executable")
	})
}

// A small release and a small external using it: the checks that need
// Buildroot's Kconfig files.
func TestAgainstRelease(t *testing.T) {
	setup := func(t *testing.T, defconfig string) (ext, br string) {
		top := t.TempDir()
		br, ext = filepath.Join(top, "buildroot-src"), filepath.Join(top, "app", "br2")
		testutil.WriteFiles(t, br, map[string]string{
			"Makefile":            "export BR2_VERSION := 2026.02.3\n",
			"package/go/go.mk":    "GO_VERSION = 1.26.3\n",
			"board/x/patches/.ok": "",
			"Config.in": `config BR2_aarch64
	bool "AArch64"
	help
	  Not an entry:
	  config BR2_IN_HELP
	    bool

menuconfig BR2_TARGET_GENERIC_HOSTNAME
	string "hostname"

config BR2_JLEVEL
	int
config BR2_GLOBAL_PATCH_DIR
	string
config BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS
	def_bool y
`,
			"Config.in.legacy": "config BR2_OLD\n\tbool \"old\"\n\tselect BR2_LEGACY\n",
		})
		testutil.WriteFiles(t, ext, map[string]string{
			"external.desc":     "name: APP\ndesc: an app\n",
			"external.mk":       "include $(sort $(wildcard $(BR2_EXTERNAL_APP_PATH)/package/*/*.mk))\n",
			"BUILDROOT_VERSION": "2026.02.3\n",
			"Config.in":         "source \"$BR2_EXTERNAL_APP_PATH/package/app/Config.in\"\n",
			"package/app/Config.in": "config BR2_PACKAGE_APP\n\tbool \"app\"\n" +
				"\tdepends on BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS\n",
			"package/app/app.mk": "APP_VERSION = 1\nAPP_SITE = $(BR2_EXTERNAL_APP_PATH)/..\nAPP_SITE_METHOD = local\n" +
				"APP_GOMOD = example.com/app\n$(eval $(golang-package))\n",
			"../go.mod":             "module example.com/app\n\ngo 1.26.0\n",
			"../main.go":            "package main\n",
			"configs/app_defconfig": "BR2_aarch64=y\nBR2_PACKAGE_APP=y\n" + defconfig,
		})
		return ext, br
	}
	t.Run("clean", func(t *testing.T) {
		ext, br := setup(t, "BR2_JLEVEL=4\nBR2_TARGET_GENERIC_HOSTNAME=\"kvm\"\nBR2_GLOBAL_PATCH_DIR=\"board/x/patches\"\n")
		ps, err := Check(ext, br)
		if err != nil || len(ps) > 0 {
			t.Fatalf("Check = %v, %v; want no problems", ps, err)
		}
	})
	const dc = "configs/app_defconfig"
	for _, tt := range []struct{ name, defconfig, file, want string }{
		{"unknown", "BR2_NOPE=y\n", dc, "BR2_NOPE: no such option in Buildroot 2026.02.3"},
		{"unknown, unset", "# BR2_NOPE is not set\n", dc, "BR2_NOPE: no such option"},
		{"only in a help text", "BR2_IN_HELP=y\n", dc, "BR2_IN_HELP: no such option"},
		{"legacy", "BR2_OLD=y\n", dc, "BR2_OLD: a legacy option"},
		{"int", "BR2_JLEVEL=four\n", dc, "not a int value"},
		{"bool", "BR2_aarch64=\"y\"\n", dc, "set again"},
		{"string", "BR2_TARGET_GENERIC_HOSTNAME=kvm\n", dc, "not a string value"},
		{"missing Buildroot path", "BR2_GLOBAL_PATCH_DIR=\"board/y/patches\"\n", dc, "board/y/patches does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ext, br := setup(t, tt.defconfig)
			expectProblem(t, ext, br, tt.file, tt.want)
		})
	}
	t.Run("other release", func(t *testing.T) {
		ext, br := setup(t, "")
		testutil.WriteFiles(t, ext, map[string]string{"BUILDROOT_VERSION": "2025.02.1\n"})
		expectProblem(t, ext, br, VersionFile, "pins Buildroot 2025.02.1, checked against 2026.02.3")
	})
	t.Run("Go too old", func(t *testing.T) {
		ext, br := setup(t, "")
		testutil.WriteFiles(t, ext, map[string]string{"../go.mod": "module example.com/app\n\ngo 1.27\n"})
		expectProblem(t, ext, br, "package/app/app.mk", `go.mod asks for go 1.27, Buildroot 2026.02.3 builds with go "1.26.3"`)
	})
}

func TestQuoted(t *testing.T) {
	for v, want := range map[string]bool{
		`""`: true, `"a b"`: true, `"a\"b"`: true, `"a\\"`: true,
		`"a"b"`: false, `"a\"`: false, `a`: false, `"`: false, `"a`: false,
	} {
		if got := quoted(v); got != want {
			t.Errorf("quoted(%s) = %v, want %v", v, got, want)
		}
		if want && strings.Contains(unquote(v), `\`) && v != `"a\\"` {
			t.Errorf("unquote(%s) = %s", v, unquote(v))
		}
	}
	if got := unquote(`"a\"b\\c"`); got != `a"b\c` {
		t.Errorf("unquote = %s", got)
	}
}

func TestVersionLess(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"1.26.3", "1.26.0", false}, {"1.26.3", "1.27", true}, {"1.26", "1.26.0", false},
		{"1.26", "1.26.1", true}, {"1.9", "1.10", true}, {"", "1.0", true}, {"x", "1", true},
	} {
		if got := versionLess(tt.a, tt.b); got != tt.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestLogicalLines(t *testing.T) {
	got := logicalLines("A = 1 \\\n  2\nB = 3")
	if len(got) != 2 || got[0].n != 1 || got[0].text != "A = 1    2" || got[1].n != 3 {
		t.Errorf("logicalLines = %+v", got)
	}
}
