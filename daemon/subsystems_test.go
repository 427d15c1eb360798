package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/info"
	"kvmd/internal/fixture"
	"kvmd/streamer/streamertest"
)

// TestSubsystems: the daemon registers kvmd's subsystems in the order of
// kvmd's greeting (kvmd/apps/kvmd/server.py: GPIO, HID, ATX, MSD,
// Streamer, Info, then hid_keymaps and clients), and runs a watcher for
// each, the GPIO outputs' release before them (stopped after them), the
// ATX board's work (none: no wiring on a fixture root) after them, so that
// it is stopped before them; the H.264 encoder's pipeline after the
// streamer whose picture it takes, and WebRTC after it, so that the peers
// go before the pipeline.
func TestSubsystems(t *testing.T) {
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", "rpi4.ttar"), root); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Root, cfg.MSDDir, cfg.StreamerDir = root, t.TempDir(), t.TempDir()
	// Taken whether or not ffmpeg is installed here (its clients are
	// told why it cannot run).
	cfg.H264Encoder = h264Software
	log := slog.New(slog.DiscardHandler)
	m := &machine{fs: hw.New(root), v4l2: &v4l2test.Fake{}, launcher: &streamertest.Launcher{}, log: log, close: func() {}}
	src := info.New(info.Config{FS: m.fs, V4L2: m.v4l2})
	sup := &Supervisor{}
	d, err := addDevices(sup, cfg, Env{Version: "1.2"}, m, src, log)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range d.http.Subsystems {
		names = append(names, s.Name())
		if got := s.Greeting(context.Background()); len(got) == 0 {
			t.Errorf("%s greets with nothing", s.Name())
		}
	}
	if got, want := strings.Join(names, " "), "gpio hid atx msd streamer info hid_keymaps clients"; got != want {
		t.Errorf("subsystems %q, want %q", got, want)
	}
	var children []string
	for _, c := range sup.children {
		children = append(children, c.Name)
	}
	if got, want := strings.Join(children, ", "), "hid, streamer, gpio outputs, h264, webrtc, gpio events, hid events, atx events, msd events, streamer events, info events, hid_keymaps events, clients events"; got != want {
		t.Errorf("children %q, want %q", got, want)
	}
	if d.http.MSD == nil || d.http.ATX != nil || d.http.GPIO == nil || d.http.HID == nil || d.http.Streamer == nil ||
		d.http.H264 == nil || d.http.WebRTC == nil {
		t.Errorf("devices %+v: want the MSD, no ATX wiring, the rest", d.http)
	}
}
