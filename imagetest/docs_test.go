package imagetest

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// installDoc is the manual's page on installing, whose table "Files made
// at first boot" gives the owner and mode of every file first boot makes.
const installDoc = "../docs/install.md"

// docModeRow is a row of that table: the path, then "user:group mode".
var docModeRow = regexp.MustCompile("^\\| `(/[^`]+)` \\| `([a-z_][a-z0-9_-]*:[a-z_][a-z0-9_-]*) (0?[0-7]{3})` \\|")

// parseDocModes returns the owners and modes of the table under the
// heading "Files made at first boot", as stat -c '%U:%G %a' prints them
// ("root:kvmd 640").
func parseDocModes(text string) map[string]string {
	modes := map[string]string{}
	in := false
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(strings.TrimLeft(line, "#")) == "Files made at first boot"
			continue
		}
		if !in {
			continue
		}
		if m := docModeRow.FindStringSubmatch(line); m != nil {
			mode, _ := strconv.ParseUint(m[3], 8, 32)
			modes[m[1]] = m[2] + " " + strconv.FormatUint(mode, 8)
		}
	}
	return modes
}

// docModes reads the table of installDoc.
func docModes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatal(err)
	}
	modes := parseDocModes(string(b))
	if len(modes) < 9 {
		t.Fatalf("%s: found %d rows of owner and mode under \"Files made at first boot\", want every file first boot makes: %v", installDoc, len(modes), modes)
	}
	return modes
}

// TestDocModes checks, without booting, that the table parses: every
// file first boot makes is in it.
func TestDocModes(t *testing.T) {
	got := docModes(t)
	for _, p := range []string{"/etc/kvmd", "/etc/kvmd/kvmd.yaml", "/etc/kvmd/htpasswd", "/etc/kvmd/totp.secret",
		"/etc/kvmd/tls.key", "/etc/kvmd/tls.crt", "/etc/issue.d/kvmd.issue", "/var/lib/kvmd",
		"/var/lib/kvmd/admin-password", "/var/lib/kvmd/secret"} {
		if _, ok := got[p]; !ok {
			t.Errorf("%s: no row for %s", installDoc, p)
		}
	}
	if m := parseDocModes("## Files made at first boot\n| `/x` | `root:kvmd 0640` | y |\n## Other\n| `/z` | `root:root 0600` | w |\n"); len(m) != 1 || m["/x"] != "root:kvmd 640" {
		t.Errorf("parseDocModes: %v, want only /x root:kvmd 640", m)
	}
}
