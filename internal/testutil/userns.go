package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// AsRoot lets a test that needs root (to mount a small file system, say)
// run when the test process is not root: it runs the test again, alone,
// in a child process in a user and mount namespace of its own (unshare
// --user --map-root-user --mount), where it is root over what it mounts,
// and reports true: the test is done, its outcome the child's, and the
// caller returns. Run as root (and in that child), it reports false and
// the test goes on. Where no user namespace can be made, it ends t through
// Missing: a skip, or a failure under RequireEnv.
func AsRoot(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		return false
	}
	unshare, err := FindTool("unshare")
	if err != nil {
		Missing(t, fmt.Sprintf("not root, and %v to run %s in a user namespace (apt-get install util-linux)", err, t.Name()))
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	if probe, err := exec.Command(unshare, "--user", "--map-root-user", "--mount", "true").CombinedOutput(); err != nil {
		Missing(t, fmt.Sprintf("not root, and no user namespace for %s: unshare: %v: %s (sysctl kernel.unprivileged_userns_clone=1?)",
			t.Name(), err, strings.TrimSpace(string(probe))))
	}
	cmd := exec.Command(unshare, "--user", "--map-root-user", "--mount", "--",
		os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	t.Logf("run again as root in a user and mount namespace:\n%s", out)
	switch {
	case err != nil:
		t.Errorf("%s in a user namespace: %v", t.Name(), err)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Errorf("%s in a user namespace did not pass (skipped, or not run)", t.Name())
	}
	return true
}
