package imagetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/testutil"
)

// TestCIRefusesSkip runs CI's entry point, .ci/run, and make test as a
// newcomer runs them, as make's dry run (MAKEFLAGS=n: nothing but the
// recipes that run make again is executed, and the booted test's step is
// one) on a host that cannot run the booted test (its cache under /proc:
// no room). CI's must fail, even with KVMD_IMAGETEST=0 in its
// environment, and the newcomer's pass; each last line of the step says
// the booted test did not run, and why.
func TestCIRefusesSkip(t *testing.T) {
	makeBin := testutil.NeedTool(t, "make", "make")
	bash := testutil.NeedTool(t, "bash", "bash")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cmd     []string
		env     string // KVMD_IMAGETEST
		fail    bool
		lastHas string
	}{
		{"CI", []string{bash, ".ci/run"}, "0", true, "make test: FAILED: the booted test did not run, and KVMD_IMAGETEST=1 (CI) requires it: this host cannot run it: less than 4 GiB free"},
		{"newcomer", []string{makeBin, "test"}, "", false, "make test: the booted test did NOT run: this host cannot run it: less than 4 GiB free"},
		{"KVMD_IMAGETEST=0", []string{makeBin, "test"}, "0", false, "make test: the booted test did NOT run: KVMD_IMAGETEST=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.cmd[0], tc.cmd[1:]...)
			cmd.Dir = root
			var env []string
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				switch k {
				case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "KVMD_IMAGETEST", "KVMD_IMAGETEST_CACHE":
				default:
					env = append(env, kv)
				}
			}
			cmd.Env = append(env, "MAKEFLAGS=n", "KVMD_IMAGETEST_CACHE=/proc/kvmd-imagetest-none", "KVMD_IMAGETEST="+tc.env)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fail {
				t.Errorf("exit %v, want failure %v:\n%s", err, tc.fail, tail(string(out), 2000))
			}
			var step string
			for l := range strings.Lines(string(out)) {
				if strings.HasPrefix(l, "make test: ") {
					step = strings.TrimSpace(l)
				}
			}
			if !strings.HasPrefix(step, tc.lastHas) {
				t.Errorf("the step's last line %q, want it to start %q:\n%s", step, tc.lastHas, tail(string(out), 2000))
			}
		})
	}
}
