package main

import (
	"image"
	"testing"
	"time"

	"kvmd/internal/colorbars"
	"kvmd/internal/demo"
	"kvmd/internal/testutil"
	"kvmd/internal/viewertest"
)

// TestServeVNC runs the demo with --vnc-listen and its certificate:
// TigerVNC's viewer under Xvfb logs in as the demo's admin through
// VeNCrypt, shows the demo's picture (its colour bars, read from Xvfb's
// screen) from the stand-in streamer, and a line xdotool types into it
// reaches the demo's host ("demo host typed"); the daemon's log has the
// connection. Without a certificate, --vnc-listen is refused at start.
func TestServeVNC(t *testing.T) {
	testutil.NeedTool(t, "tigervnc-viewer", "xtigervncviewer")
	testutil.NeedTool(t, "xdotool", "xdotool")
	dir := t.TempDir()
	ca := newCA(t, dir, "ca")
	crt, key := ca.leaf(t, "server", true)
	addr, vncAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--demo", "--listen", addr, "--tls-cert", crt, "--tls-key", key, "--vnc-listen", vncAddr)
	passwd := d.stdout.wait(t, `user admin, password (\S+)`)
	d.stderr.wait(t, `VNC listening`)

	x := viewertest.Start(t, 2000, 1200)
	x.TigerVNC(t, vncAddr, dir+"/ca.crt", "admin", passwd)
	// The bars: the top two thirds of the demo's 1920x1080 picture.
	bars := image.Rect(0, 0, 1920, 700)
	want := demo.Picture(time.Now(), 1920, 1080)
	img := x.WaitScreen(t, bars, 30*time.Second, func(img image.Image) bool { return viewertest.MeanDiff(img, want, bars) < 10 })
	if diff := viewertest.MeanDiff(img, want, bars); diff >= 10 {
		t.Fatalf("the viewer's screen differs from the demo's picture by %.1f\n%s", diff, d.stderr)
	}
	// And vivid's bars, as the booted test's checks see them.
	if _, err := colorbars.Check(img, [4]float64{0, 0, 1920, 1080}, 0.3); err != nil {
		t.Error(err)
	}
	d.stderr.wait(t, `VNC client connected.*user=admin`)

	x.Type(t, "kvmd on", "echo vnc 1+1")
	d.stderr.wait(t, `demo host typed.*echo vnc 1\+1`)
	if err := d.stop(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, d.stderr)
	}

	p := startDaemon(t, nil, nil, "serve", "--demo", "--listen", testutil.FreeAddr(t), "--vnc-listen", vncAddr)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup's wait
		if err == nil {
			t.Errorf("--vnc-listen without a certificate: exit status 0\n%s", p.stderr)
		}
		// The exit may come before the reader of its stderr has the line.
		p.stderr.wait(t, "--vnc-listen needs --tls-cert")
	case <-time.After(10 * time.Second):
		t.Error("--vnc-listen without a certificate: the daemon runs")
	}
}
