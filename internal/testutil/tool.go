package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RequireEnv names the environment variable that decides what a test does
// when a tool it needs is missing: skip (unset, or "0"), or fail (any
// other value; make test sets it to 1, after make deps installed every
// such tool). The name is older than its use for every tool: it began
// with the journal tests.
const RequireEnv = "JOURNALTEST_REQUIRE"

// Required reports whether a missing tool fails a test rather than skips
// it (RequireEnv is set).
func Required() bool {
	v := os.Getenv(RequireEnv)
	return v != "" && v != "0"
}

// Missing ends t for a missing tool, saying why (msg: what is missing and
// how to install it): it fails t when Required, and skips it otherwise.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s; failing because %s is set", msg, RequireEnv)
	}
	t.Skipf("%s; set %s=1 to fail instead of skipping", msg, RequireEnv)
}

// NeedTool returns the path of the first of names that is installed: a
// command on PATH or in /usr/sbin or /sbin (not on every user's PATH), or
// an absolute path to an executable file. Without any, it ends t through
// Missing, naming the Debian package pkg that provides them.
func NeedTool(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	path, err := FindTool(names...)
	if err != nil {
		Missing(t, fmt.Sprintf("%v (apt-get install %s, or make deps)", err, pkg))
	}
	return path
}

// WantTool is NeedTool for a test that has more to check without the
// tool: when none of names is installed it fails t if Required, and
// otherwise returns false for the test to go on without it.
func WantTool(t testing.TB, pkg string, names ...string) (string, bool) {
	t.Helper()
	path, err := FindTool(names...)
	if err != nil {
		if Required() {
			t.Fatalf("%v (apt-get install %s, or make deps); failing because %s is set", err, pkg, RequireEnv)
		}
		return "", false
	}
	return path, true
}

// FindTool returns the path of the first of names that is installed, as
// NeedTool looks for them.
func FindTool(names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		if filepath.IsAbs(name) {
			continue
		}
		for _, dir := range []string{"/usr/sbin", "/sbin"} {
			if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not installed", strings.Join(names, " or "))
}

// PiKVMRepoEnv names the variable that holds the path of a git mirror of
// github.com/pikvm/kvmd, whose web pages the tests of PiKVM's own pages
// serve (they are never kept in this repository). Without it the mirror is
// looked for at DefaultPiKVMRepo, where this workplace's fetch tool puts
// it.
const (
	PiKVMRepoEnv     = "KVMD_PIKVM_REPO"
	DefaultPiKVMRepo = "/work/.mirror/pikvm+kvmd/repo"
)

// FindPiKVMRepo returns the mirror of PiKVM's repository (PiKVMRepoEnv),
// or an error saying where none was found.
func FindPiKVMRepo() (string, error) {
	repo := os.Getenv(PiKVMRepoEnv)
	if repo == "" {
		repo = DefaultPiKVMRepo
	}
	if _, err := os.Stat(repo); err != nil {
		return "", fmt.Errorf("no mirror of github.com/pikvm/kvmd at %s (set %s to a clone or bare mirror)", repo, PiKVMRepoEnv)
	}
	return repo, nil
}

// PiKVMRequireEnv, set to 1, makes a missing mirror of PiKVM's repository
// a failure. It is apart from RequireEnv because the mirror is no package:
// make deps cannot install it, and CI reaches package registries only, so
// under make test a missing mirror skips, saying so, and the tests of
// PiKVM's pages run wherever a mirror is present.
const PiKVMRequireEnv = "KVMD_PIKVM_REQUIRE"

// PiKVMRequired reports whether a missing mirror of PiKVM's repository
// fails a test (PiKVMRequireEnv).
func PiKVMRequired() bool { return os.Getenv(PiKVMRequireEnv) == "1" }

// NeedPiKVMRepo returns the mirror of PiKVM's repository, or ends t: a
// failure under PiKVMRequireEnv, else a skip that names what was not
// checked.
func NeedPiKVMRepo(t testing.TB) string {
	t.Helper()
	repo, err := FindPiKVMRepo()
	if err != nil {
		if PiKVMRequired() {
			t.Fatalf("%v; failing because %s=1", err, PiKVMRequireEnv)
		}
		t.Skipf("PiKVM's own pages not checked: %v; set %s=1 to fail instead", err, PiKVMRequireEnv)
	}
	return repo
}
