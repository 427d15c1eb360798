package brcheck

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/testutil"
)

// TestBuildrootBuild builds kvmd as Buildroot's golang-package
// infrastructure does with buildroot/package/kvmd/kvmd.mk, for the ARMv6
// image (Zero W): the source tree vendored first (the .mk's pre-build
// hook runs go mod vendor; here the module cache serves it, GOPROXY=off),
// then go build with -mod=vendor, GOPROXY=off and GOTOOLCHAIN=local, as
// Buildroot's environment has them, and the .mk's GO_ENV, LDFLAGS, GOMOD
// and BUILD_TARGETS. The binary must be static and run under qemu on an
// ARM1176, printing the version the .mk stamped. (The firmware package's
// tests check the Makefile's builds the same way.)
func TestBuildrootBuild(t *testing.T) {
	qemu := []string{testutil.NeedTool(t, "qemu-user", "qemu-arm", "qemu-arm-static"), "-cpu", "arm1176"}
	t.Parallel()
	moduleRoot, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := PackageVars(filepath.Join(moduleRoot, "buildroot/package/kvmd/kvmd.mk"))
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := testutil.CopyTree(moduleRoot, src, ".git", "bin", "dist"); err != nil {
		t.Fatal(err)
	}
	goCmd := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd([]string{"GOFLAGS=-mod=mod", "GOPROXY=off"}, "mod", "vendor")

	const version = "buildroot-test"
	ldflags := strings.ReplaceAll(vars["LDFLAGS"], "$(KVMD_VERSION)", version)
	env := []string{"GOOS=linux", "GOARCH=arm", "GOARM=6",
		"GOFLAGS=-mod=vendor", "GOPROXY=off", "GOTOOLCHAIN=local"}
	env = append(env, strings.Fields(vars["GO_ENV"])...)
	out := filepath.Join(t.TempDir(), "kvmd")
	goCmd(env, "build", "-ldflags", ldflags, "-modcacherw", "-trimpath", "-buildvcs=false",
		"-o", out, vars["GOMOD"]+"/"+vars["BUILD_TARGETS"])

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("Buildroot's build has a %v program header: dynamically linked", p.Type)
		}
	}
	f.Close()
	got, err := exec.Command(qemu[0], append(qemu[1:], out, "version")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != "kvmd "+version {
		t.Errorf("kvmd version under %s: %q, %v; want %q", strings.Join(qemu, " "), got, err, "kvmd "+version)
	}
}
