package imagetest

import (
	"fmt"
	goimage "image"
	"image/png"
	"os"
	"strings"
	"testing"
	"time"

	"kvmd/internal/colorbars"
	"kvmd/internal/viewertest"
)

// vncGuestPort is where the daemon serves VNC in testVNC (--vnc-listen);
// the machine forwards vncPort on the host's loopback to it.
const vncGuestPort = 5900

// testVNC: a VNC viewer on the host sees vivid and types into the guest.
// The daemon is given --vnc-listen (VeNCrypt with the certificate first
// boot made, the kvmd.yaml restored after); TigerVNC's viewer under Xvfb
// connects through the forwarded port with X509Plain, the certificate
// checked against /etc/kvmd/tls.crt and the banner's password sent inside
// TLS; its window (read from Xvfb's screen) shows vivid's colour bars, and
// a line xdotool types into it arrives at the guest's input layer as an
// en-us host's key codes.
func (s *system) testVNC(t *testing.T) {
	sh := s.m.shell
	start := time.Now()
	if _, st := sh.run(t, "command -v kvmd-input"); st != 0 {
		s.buildGuestTool(t) // the hid subtests did not run
	}
	// vivid at 640x480, as the streamer subtest has it: under emulation
	// ustreamer makes few frames of a bigger picture.
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=0 -c dv_timings_signal_mode=4")
	sh.must(t, fmt.Sprintf("cp -a /etc/kvmd/kvmd.yaml /run/kvmd-imagetest.yaml && echo 'vnc-listen: \":%d\"' >>/etc/kvmd/kvmd.yaml && systemctl restart kvmd", vncGuestPort))
	t.Cleanup(func() { sh.must(t, "mv /run/kvmd-imagetest.yaml /etc/kvmd/kvmd.yaml && systemctl restart kvmd") })
	ca := s.shotPath("vnc-ca.pem")
	if err := os.WriteFile(ca, []byte(sh.must(t, "cat /etc/kvmd/tls.crt")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kbd, _ := s.inputNodes(t)
	w := s.startWatch(t, "vnc", kbd)
	defer sh.run(t, "kill "+w.pid)

	d := viewertest.Start(t, 800, 600)
	connect := time.Now()
	d.TigerVNC(t, fmt.Sprintf("127.0.0.1:%d", s.m.vncPort), ca, "admin", s.passwd)
	bars := func(img goimage.Image) bool {
		_, err := colorbars.CheckWhole(img, 0.6)
		return err == nil
	}
	img := d.WaitScreen(t, goimage.Rect(0, 0, 640, 480), 60*time.Second, bars)
	shown := time.Since(connect)
	if got, err := colorbars.CheckWhole(img, 0.6); err != nil {
		s.saveShot(t, "vnc-viewer.png", img)
		t.Fatalf("the viewer's window does not show vivid's colour bars after %v: %v (colours %v)\n%s", shown.Round(100*time.Millisecond), err, got,
			sh.must(t, "journalctl -b -o cat -u kvmd.service | grep -i vnc | tail -20"))
	}
	t.Logf("viewer started to vivid's bars in its window: %v", shown.Round(100*time.Millisecond))

	// A line typed into the viewer's window, at the guest's keyboard.
	const line = "Hello, VNC! kvmd_42"
	typing := time.Now()
	d.Type(t, "kvmd", line)
	n := 0
	evs := w.events(t, 30*time.Second, quiet(&n))
	if got := typed(evs, usLayout); got != line+"\n" {
		t.Errorf("typed into the viewer %q, the guest's keyboard got %q\n%s", line+"\n", got, describeEvents(keyEvents(evs)))
	}
	if held := sh.must(t, "kvmd-input held "+kbd); held != "" {
		t.Errorf("after typing through VNC, keys held at the guest: %s", held)
	}
	if log := sh.must(t, "journalctl -b -o cat -u kvmd.service | grep 'VNC client connected' || true"); !strings.Contains(log, "size=640x480") {
		t.Errorf("the daemon's journal has no VNC connection of 640x480: %q", log)
	}
	t.Logf("the line typed and read at the guest in %v; %v in all", time.Since(typing).Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// saveShot keeps img as name beside the consoles (KVMD_IMAGETEST_LOGDIR).
func (s *system) saveShot(t *testing.T, name string, img goimage.Image) {
	t.Helper()
	f, err := os.Create(s.shotPath(name))
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Error(err)
	}
	t.Logf("the picture is in %s", f.Name())
}
