package webtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/testutil"
)

// repoRoot is the product module's directory, the parent of the tools
// module.
const repoRoot = "../.."

// kvmdBin is the kvmd binary built once for the package's tests.
var kvmdBin string

// TestMain builds kvmd in the product module, with its own go.mod (not
// the tools module's requirements), as make demo does: the release build
// plus --demo (-tags demo).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmd-webtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvmdBin = filepath.Join(dir, "kvmd")
	build := exec.Command("go", "build", "-tags", "demo", "-o", kvmdBin, "./cmd/kvmd")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kvmd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startDaemon runs the kvmd binary with args until the test ends.
func startDaemon(t *testing.T, args ...string) *testutil.Proc {
	t.Helper()
	return testutil.StartProc(t, exec.Command(kvmdBin, args...))
}

// usersFile makes a users file holding user with passwd, through
// kvmd user add.
func usersFile(t *testing.T, user, passwd string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htpasswd")
	cmd := exec.Command(kvmdBin, "user", "add", user, "--users", path)
	cmd.Stdin = strings.NewReader(passwd + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("user add: %v %s", err, out)
	}
	return path
}
