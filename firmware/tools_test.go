package firmware

import (
	"os"
	"os/exec"
	"testing"
)

// requireTools skips t when one of the commands is missing, or fails it
// when KVMD_REQUIRE_QEMU=1 (make smoke, as CI runs it): install says how
// to get them.
func requireTools(t *testing.T, install string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			msg := "firmware: " + name + " is not installed (" + install + ", or make deps)"
			if os.Getenv("KVMD_REQUIRE_QEMU") == "1" {
				t.Fatal(msg + "; failing because KVMD_REQUIRE_QEMU=1")
			}
			t.Skip(msg + "; set KVMD_REQUIRE_QEMU=1 to fail instead of skipping")
		}
	}
}
