package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// depsList runs scripts/deps.sh in dry-run mode with an empty PATH (so
// every tool it looks up by name is missing) and returns the Debian
// packages it would install.
func depsList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"../../scripts/deps.sh"}, args...)...)
	cmd.Env = []string{"PATH=/nonexistent", "DEPS_DRY_RUN=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deps.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	list, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "would install:")
	if !ok && strings.TrimSpace(string(out)) != "" {
		t.Fatalf("deps.sh %s: %q, want \"would install: ...\" or nothing", strings.Join(args, " "), out)
	}
	return strings.Fields(list)
}

// TestMakeRunDeps: make run installs only what the demo uses (journalctl
// and systemd-journal-remote, for its journal; ffmpeg, its H.264 encoder,
// without which it shows MJPEG and says why), not every test tool: those
// fail where apt cannot reach them, and a newcomer's first command must
// not. make test (deps) still installs them all.
func TestMakeRunDeps(t *testing.T) {
	demo := depsList(t, "demo")
	for _, p := range demo {
		if p != "systemd" && p != "systemd-journal-remote" && p != "ffmpeg" {
			t.Errorf("the demo's deps install %s", p)
		}
	}
	all := depsList(t)
	// The tools it finds by name (others by path, present here).
	for _, p := range []string{"chromium", "prometheus", "qemu-user", "lintian", "ldap-utils", "systemd"} {
		if !slices.Contains(all, p) {
			t.Errorf("make deps (make test) no longer installs %s: %q", p, all)
		}
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cmd := exec.Command("make", "-n", "run")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	var depsLines []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "deps.sh") {
			depsLines = append(depsLines, strings.TrimSpace(line))
		}
	}
	if len(depsLines) != 1 || !strings.HasSuffix(depsLines[0], "deps.sh demo") {
		t.Errorf("make run runs %q, want only deps.sh demo", depsLines)
	}
}
