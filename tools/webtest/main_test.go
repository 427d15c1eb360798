package webtest

import (
	"fmt"
	"os"
	"testing"

	"kvmd/client/clienttest"
)

// repoRoot is the product module's directory, the parent of the tools
// module.
const repoRoot = "../.."

// kvmdBin is the kvmd binary built once for the package's tests, in the
// product module, with its go.mod (clienttest.Build).
var kvmdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmd-webtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvmdBin, err = clienttest.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
