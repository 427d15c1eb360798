package main

import (
	"bytes"
	"encoding/json"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/internal/fixture"
	"kvmd/internal/testutil"
)

// getAs sends GET path to the daemon at addr as admin and returns the
// answer.
func getAs(t *testing.T, addr, path, passwd string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	req.SetBasicAuth("admin", passwd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestServeStreamer runs kvmd serve on a Raspberry Pi 4's tree (a
// TC358743 on unicam) with Debian's ustreamer: the capture node is not
// on this machine, so ustreamer serves its "NO SIGNAL" picture, which a
// snapshot gets with allow_offline and only then; the socket is in the
// given directory; the daemon's log has ustreamer's. Then with a
// --streamer that does not exist: the rest of the API works, and the
// streamer endpoints say what is missing.
// rpi4Root unpacks the Raspberry Pi 4's tree (a TC358743 on unicam) for
// kvmd serve --root.
func rpi4Root(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile("../../board/testdata/rpi4.ttar", root); err != nil {
		t.Fatal(err)
	}
	return root
}

// sockDir is a directory for the streamer's socket, short enough for a
// unix socket's path (t.TempDir's can be too long).
func sockDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kvst")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestServeStreamer(t *testing.T) {
	ustreamer := testutil.NeedTool(t, "ustreamer", "ustreamer")
	root, sockDir := rpi4Root(t), sockDir(t)
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", ustreamer, "--streamer-dir", sockDir, "--streamer-shutdown-delay", "1s")
	d.stderr.wait(t, `kvmd listening`)
	d.stderr.wait(t, `video streamer.*version=4\.`)

	resp, body := getAs(t, addr, "/api/streamer/snapshot?allow_offline=1", "pw")
	if resp.StatusCode != 200 || resp.Header.Get("X-UStreamer-Online") != "false" {
		t.Fatalf("snapshot: %d %v %.200s", resp.StatusCode, resp.Header, body)
	}
	if cfg, err := jpeg.DecodeConfig(bytes.NewReader(body)); err != nil || cfg.Width != 640 {
		t.Errorf("ustreamer's placeholder: %+v %v", cfg, err)
	}
	if _, err := os.Stat(filepath.Join(sockDir, "ustreamer.sock")); err != nil {
		t.Errorf("the socket is not in --streamer-dir: %v", err)
	}
	d.stderr.wait(t, `ustreamer: .*Using V4L2 device: /dev/video0`)
	if resp, body := getAs(t, addr, "/api/streamer/snapshot", "pw"); resp.StatusCode != 503 || !strings.Contains(string(body), "No signal") {
		t.Errorf("snapshot of the placeholder: %d %s, want 503 saying no signal", resp.StatusCode, body)
	}
	var st struct {
		Result struct {
			Features map[string]bool `json:"features"`
			Streamer *struct {
				Encoder struct{ Type string } `json:"encoder"`
			} `json:"streamer"`
		} `json:"result"`
	}
	_, body = getAs(t, addr, "/api/streamer", "pw")
	if err := json.Unmarshal(body, &st); err != nil || !st.Result.Features["quality"] || st.Result.Streamer == nil || st.Result.Streamer.Encoder.Type != "CPU" {
		t.Errorf("/api/streamer: %s", body)
	}
	d.stderr.wait(t, `streamer started.*--device=/dev/video0 --persistent --dv-timings --format=UYVY`)
	// kvmd's system.streamer: the program, as --version and --features say.
	if _, body := getAs(t, addr, "/api/info?fields=system", "pw"); !strings.Contains(string(body), `"streamer":{"app":"ustreamer","version":"4.`) ||
		!strings.Contains(string(body), `"HAS_PDEATHSIG":true`) {
		t.Errorf("system.streamer: %s", body)
	}
	d.stderr.wait(t, `stopping the streamer.*why="no clients"`)
	if err := d.stop(t); err != nil {
		t.Errorf("stop: %v", err)
	}

	// No ustreamer.
	addr = testutil.FreeAddr(t)
	d = startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--root", root,
		"--streamer", "/nonexistent/ustreamer")
	d.stderr.wait(t, `no video streamer: the streamer endpoints answer 503`)
	d.stderr.wait(t, `kvmd listening`)
	if resp, body := getAs(t, addr, "/api/auth/check", "pw"); resp.StatusCode != 200 {
		t.Errorf("auth/check without ustreamer: %d %s", resp.StatusCode, body)
	}
	start := time.Now()
	if resp, body := getAs(t, addr, "/api/streamer/snapshot", "pw"); resp.StatusCode != 503 || !strings.Contains(string(body), "ustreamer is not installed") {
		t.Errorf("snapshot without ustreamer: %d %s", resp.StatusCode, body)
	}
	if resp, body := getAs(t, addr, "/streamer/stream", "pw"); resp.StatusCode != 503 || !strings.Contains(string(body), "not installed") {
		t.Errorf("stream without ustreamer: %d %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the answers took %v", took)
	}
	if _, body := getAs(t, addr, "/api/streamer", "pw"); !strings.Contains(string(body), `"error":"ustreamer is not installed"`) {
		t.Errorf("/api/streamer without ustreamer: %s", body)
	}
}

// TestStreamerDirAfterKill: the daemon's own streamer directory in $TMPDIR
// does not outlive it, even killed by SIGKILL: the next start removes the
// one no running daemon holds, and leaves a running daemon's alone. Each
// kill -9 used to leave a /tmp/kvmd-streamer-* for good.
func TestStreamerDirAfterKill(t *testing.T) {
	tmp := t.TempDir()
	users := usersFile(t, "admin", "admin-pw")
	streamerDirs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "kvmd-streamer-*"))
		return m
	}
	start := func() *proc {
		addr := testutil.FreeAddr(t)
		d := startDaemon(t, []string{"TMPDIR=" + tmp, "RUNTIME_DIRECTORY="}, nil, "serve", "--users", users, "--listen", addr)
		d.stderr.wait(t, `kvmd listening`)
		return d
	}
	first := start()
	if got := streamerDirs(); len(got) != 1 {
		t.Fatalf("after a start: %q", got)
	}
	firstDir := streamerDirs()[0]
	second := start() // beside the first: its directory stays
	if got := streamerDirs(); len(got) != 2 {
		t.Fatalf("two daemons: %q", got)
	}
	for _, d := range []*proc{first, second} {
		d.cmd.Process.Kill()
		d.done <- <-d.done // for the cleanup's wait
	}
	if got := streamerDirs(); len(got) != 2 {
		t.Fatalf("after kill -9: %q, want both left", got)
	}
	third := start()
	got := streamerDirs()
	if len(got) != 1 || got[0] == firstDir {
		t.Errorf("after the next start: %q, want its own only", got)
	}
	if err := third.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := streamerDirs(); len(got) != 0 {
		t.Errorf("after a clean stop: %q", got)
	}
}
