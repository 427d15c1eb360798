package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		t.Setenv(RequireEnv, tc.value)
		if got := Required(); got != tc.want {
			t.Errorf("%s=%q: Required() = %v, want %v", RequireEnv, tc.value, got, tc.want)
		}
	}
}

func TestFindTool(t *testing.T) {
	dir := t.TempDir()
	WriteFiles(t, dir, map[string]string{"tool-b": "#!/bin/sh\n", "tool-c": "#!/bin/sh\n"})
	t.Setenv("PATH", dir)
	for _, tc := range []struct {
		names []string
		want  string // "" for an error
	}{
		{[]string{"tool-b"}, filepath.Join(dir, "tool-b")},
		{[]string{"tool-a", "tool-c", "tool-b"}, filepath.Join(dir, "tool-c")}, // the first found
		{[]string{filepath.Join(dir, "tool-b")}, filepath.Join(dir, "tool-b")},
		{[]string{"tool-a", filepath.Join(dir, "tool-a")}, ""},
	} {
		got, err := FindTool(tc.names...)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("FindTool(%q) = %q, want an error", tc.names, got)
		case tc.want == "" && !strings.Contains(err.Error(), strings.Join(tc.names, " or ")):
			t.Errorf("FindTool(%q): error %q does not name what is missing", tc.names, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("FindTool(%q) = %q, %v; want %q", tc.names, got, err, tc.want)
		}
	}
}

// TestNeedToolMissing runs TestHelperNeedTool in a child test binary, with
// and without RequireEnv: a missing tool skips, or fails.
func TestNeedToolMissing(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string
		fail bool
	}{
		{"", "--- SKIP: TestHelperNeedTool", false},
		{"0", "--- SKIP: TestHelperNeedTool", false},
		{"1", "--- FAIL: TestHelperNeedTool", true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNeedTool$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTUTIL_HELPER=1", RequireEnv+"="+tc.env)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fail || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "no-such-tool-kvmd not installed (apt-get install no-such-package") {
			t.Errorf("%s=%q: exit %v, output:\n%s\nwant %q", RequireEnv, tc.env, err, out, tc.want)
		}
		if strings.Contains(string(out), "after NeedTool") {
			t.Errorf("%s=%q: the test went on after NeedTool:\n%s", RequireEnv, tc.env, out)
		}
	}
}

func TestHelperNeedTool(t *testing.T) {
	if os.Getenv("TESTUTIL_HELPER") != "1" {
		t.Skip("run by TestNeedToolMissing")
	}
	NeedTool(t, "no-such-package", "no-such-tool-kvmd")
	t.Log("after NeedTool")
}
