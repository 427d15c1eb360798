package firmware

import (
	"testing"

	"kvmd/internal/testutil"
)

// requireTools skips t when one of the commands is missing, or fails it
// when testutil.Required (make test, as CI runs it): pkg is the Debian
// package that provides them.
func requireTools(t *testing.T, pkg string, names ...string) {
	t.Helper()
	for _, name := range names {
		testutil.NeedTool(t, pkg, name)
	}
}
