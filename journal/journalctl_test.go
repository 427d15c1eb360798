package journal

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"kvmd/journal/journaltest"
)

// TestClassify runs the real journalctl into each failure that means "no
// entries" and classifies what it says; anything else is no kind.
func TestClassify(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, dir, "system", []journaltest.Entry{{Time: time.Now(), Unit: "kvmd.service", Message: "one boot only"}})
	r := New(Config{Dir: dir, Units: []string{"nothing-like-it-*.service"}})
	for _, tc := range []struct {
		name string
		q    Query
		want error
	}{
		{"a boot before the first", Query{Output: "short", Boot: "-1"}, ErrNoSuchBoot},
		{"no unit matches the globs", Query{Output: "short", Units: true}, ErrNoUnitEntries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("journalctl", r.Args(tc.q)...)
			cmd.Env = append(cmd.Environ(), "LC_ALL=C.UTF-8")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatalf("journalctl %q succeeded; stderr %q", r.Args(tc.q), stderr.String())
			}
			got := Classify(stderr.String())
			if !errors.Is(got, tc.want) || !NoEntries(got) {
				t.Errorf("Classify(%q) = %v, want %v", stderr.String(), got, tc.want)
			}
			xe := &exitError{stderr: stderr.String()}
			if !errors.Is(xe, tc.want) {
				t.Errorf("the exit error is not %v", tc.want)
			}
		})
	}
	for _, s := range []string{"", "Failed to open files: Permission denied", "journalctl: invalid option"} {
		if err := Classify(s); err != nil || NoEntries(err) {
			t.Errorf("Classify(%q) = %v, want nil", s, err)
		}
	}
}

// TestArgs pins the command lines of the two users: Open's stream and a
// bundle's file.
func TestArgs(t *testing.T) {
	r := New(Config{Dir: "/j", Units: []string{"kvmd.service"}})
	since := time.Unix(1700000000, 123456789)
	for _, tc := range []struct {
		q    Query
		want string
	}{
		{Query{Units: true, Boot: BootCurrent, Follow: true},
			"--quiet --no-pager --output=export --output-fields=_SYSTEMD_UNIT,MESSAGE --directory=/j --unit=kvmd.service --follow --lines=all --boot"},
		{Query{Units: true, Since: since, Follow: true},
			"--quiet --no-pager --output=export --output-fields=_SYSTEMD_UNIT,MESSAGE --directory=/j --unit=kvmd.service --since=@1700000000.123456 --follow --lines=all --merge"},
		{Query{Output: "short-iso-precise", Units: true, Lines: 20000, Boot: "-1"},
			"--quiet --no-pager --output=short-iso-precise --directory=/j --unit=kvmd.service --lines=20000 --boot=-1"},
		{Query{Output: "short-iso-precise", Dmesg: true, Priority: "warning", Boot: "0"},
			"--quiet --no-pager --output=short-iso-precise --directory=/j --dmesg --priority=warning --boot=0"},
	} {
		if got := strings.Join(r.Args(tc.q), " "); got != tc.want {
			t.Errorf("Args(%+v)\n got %s\nwant %s", tc.q, got, tc.want)
		}
	}
}
