package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// releaseTargets are the GOOS/GOARCH pairs make cross builds.
var releaseTargets = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}, {"linux", "arm"}}

// forbiddenDep tells why a package must not be in the release binary, or
// "" if it may. std's internal/testlog and internal/synctest are runtime
// plumbing that os and sync import in every program; anything else named
// *test, testing itself, and the demo's fakes and fixtures are not.
func forbiddenDep(path string, std bool) string {
	last := path[strings.LastIndex(path, "/")+1:]
	switch {
	case path == "testing" || strings.HasPrefix(path, "testing/"):
		return "the testing package"
	case std && strings.HasPrefix(path, "internal/"):
		return ""
	case path == "github.com/pion/ice/v4/internal/fakenet":
		// Not a test fake despite its name: pion's ICE wraps a TCP or TLS
		// connection to a TURN server in it as a packet connection
		// (gather.go, gatherCandidatesRelay).
		return ""
	case strings.HasSuffix(last, "test") || strings.Contains(last, "fake"):
		return "a test package"
	case strings.Contains(path, "demo"):
		return "demo mode"
	case strings.HasSuffix(path, "/internal/fixture"):
		return "the fixture unpacker"
	case strings.Contains(path, "chromedp"):
		return "a browser driver"
	}
	return ""
}

// badDeps lists the packages of go list -deps ./cmd/kvmd, built with
// tags for goos/goarch, that forbiddenDep refuses.
func badDeps(t *testing.T, goos, goarch, tags string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags="+tags, "-f", "{{.ImportPath}} {{.Standard}}", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	for line := range strings.Lines(string(out)) {
		path, std, _ := strings.Cut(strings.TrimSpace(line), " ")
		if why := forbiddenDep(path, std == "true"); why != "" {
			bad = append(bad, path+" ("+why+")")
		}
	}
	return bad
}

// TestReleaseDeps keeps test fakes, fixtures and demo mode out of the
// binary that ships: the build without -tags demo imports none of them,
// on every release target. The demo build must import them (else this
// check sees nothing).
func TestReleaseDeps(t *testing.T) {
	for _, tg := range releaseTargets {
		if bad := badDeps(t, tg[0], tg[1], ""); len(bad) > 0 {
			t.Errorf("the release build for %s/%s imports:\n%s", tg[0], tg[1], strings.Join(bad, "\n"))
		}
	}
	bad := strings.Join(badDeps(t, "linux", "amd64", "demo"), "\n")
	for _, want := range []string{"periph.io/x/conn/v3/gpio/gpiotest", "kvmd/hw/v4l2test", "kvmd/hw/mailboxtest", "kvmd/streamer/streamertest", "kvmd/internal/fixture", "kvmd/journal/demo", "kvmd/hid/hidtest", "kvmd/msd/msdtest"} {
		if !strings.Contains(bad, want+" (") {
			t.Errorf("the check misses %s in the demo build; it found:\n%s", want, bad)
		}
	}
}

// TestReleaseBinary builds kvmd without -tags demo, as make build does, and reads what Go
// recorded in it (go version -m): no demo tag, no module of a test tool.
// Its --demo says how to get a demo build.
func TestReleaseBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kvmd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	deps := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "dep":
			deps++
			if why := forbiddenDep(f[1], false); why != "" {
				t.Errorf("module %s (%s) in the release binary", f[1], why)
			}
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "-tags="):
			t.Errorf("release binary built with %s", f[1])
		}
	}
	if deps < 5 {
		t.Fatalf("go version -m lists %d modules; want kvmd's dependencies:\n%s", deps, out)
	}

	for _, args := range [][]string{
		{"serve", "--demo", "--listen", "127.0.0.1:0"},
		{"serve", "--config", writeConfig(t, "demo: true\nlisten: [\"127.0.0.1:0\"]\n")},
	} {
		cmd := exec.Command(bin, args...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "this build has no demo mode; build with make run") {
			t.Errorf("kvmd %s: %v, %q: want an error saying how to get demo mode", strings.Join(args, " "), err, out)
		}
	}
}

func writeConfig(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kvmd.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
