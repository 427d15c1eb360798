package vnc

import (
	"fmt"
	"image"
	_ "image/png"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
	"kvmd/internal/viewertest"
)

// TestTigerVNC: TigerVNC's viewer, under Xvfb, connects through
// VeNCrypt's X509Plain with the test's certificate as its CA, shows the
// bars (read from Xvfb's screen), and types a line that xdotool types
// into its window: the keyboard's reports on the host decode to it.
func TestTigerVNC(t *testing.T) {
	testutil.NeedTool(t, "tigervnc-viewer", "xtigervncviewer")
	testutil.NeedTool(t, "xdotool", "xdotool")
	e := newEnv(t, envOpts{})
	d := viewertest.Start(t, 1024, 768)
	d.TigerVNC(t, e.addr, e.caPEM, "oper", "operpass")

	// The bars on the viewer's screen.
	img := d.WaitScreen(t, image.Rect(0, 0, 640, 480), 20*time.Second, func(img image.Image) bool { return barsDiff(img) < 10 })
	if diff := barsDiff(img); diff >= 10 {
		t.Fatalf("the viewer's screen differs from the bars by %.1f\nserver log:\n%s", diff, e.logs)
	}
	// It takes Tight JPEG at quality 90 (its level 8): the stream's JPEG
	// as it is.
	if !e.logged(`tight_jpeg_quality=90 resize=-308`) {
		t.Errorf("the viewer's encodings are not Tight JPEG at 90 with ExtendedDesktopSize:\n%s", e.logs)
	}
	// A new resolution: the viewer's window follows.
	e.src.set(t, bars(800, 600))
	img = d.WaitScreen(t, image.Rect(0, 0, 800, 600), 20*time.Second, func(img image.Image) bool { return barsDiff(img) < 10 })
	if diff := barsDiff(img); diff >= 10 {
		t.Fatalf("after the resize to 800x600 the viewer's screen differs from the bars by %.1f", diff)
	}

	// xdotool types into the viewer's window.
	const line = "Hello, VNC! 42 <kvmd>"
	d.Type(t, "kvmd", line)
	if got := e.typed(line + "\n"); got != line+"\n" {
		t.Errorf("the host was typed %q, want %q", got, line+"\n")
	}
}

// TestGvncCapture: gtk-vnc's gvnccapture (gvncviewer's package) connects
// through VeNCrypt's X509Plain, the user name and password typed at its
// prompt, and saves the bars; with a wrong password it says it was
// refused, with the server's reason.
func TestGvncCapture(t *testing.T) {
	capture := testutil.NeedTool(t, "gvncviewer", "gvnccapture")
	unshare := testutil.NeedTool(t, "util-linux", "unshare")
	e := newEnv(t, envOpts{})
	_, port, _ := strings.Cut(e.addr, ":")
	n, _ := strconv.Atoi(port)
	// gtk-vnc takes its CA certificate from ~/.pki/CA/cacert.pem, the
	// home directory being the passwd file's (not $HOME): a tmpfs there,
	// in a mount namespace of the command's own, holds the test's.
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// It reads the password from a terminal: script(1) gives it one.
	const script = `mount -t tmpfs tmpfs "$1" && mkdir -p "$1/.pki/CA" && cp "$2" "$1/.pki/CA/cacert.pem" && shift 2 && exec script -qec "$*" /dev/null`
	run := func(passwd string, args ...string) (string, string, error) {
		out := filepath.Join(t.TempDir(), "screen.png")
		args = append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh", u.HomeDir, e.caPEM, capture},
			append(args, fmt.Sprintf("127.0.0.1:%d", n-5900), out)...)
		cmd := exec.Command(unshare, args...)
		// Each answer once its prompt is shown: it flushes what was
		// typed before its password prompt.
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var log testutil.SyncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		answers := []struct{ prompt, answer string }{{"Username:", "oper\n"}, {"Password:", passwd + "\n"}}
		for {
			select {
			case err := <-done:
				in.Close()
				return out, log.String(), err
			case <-time.After(20 * time.Millisecond):
			}
			if len(answers) > 0 && strings.Contains(log.String(), answers[0].prompt) {
				io.WriteString(in, answers[0].answer)
				answers = answers[1:]
			}
		}
	}
	png, log, err := run("operpass")
	if err != nil {
		t.Fatalf("gvnccapture: %v\n%s\nserver:\n%s", err, log, e.logs)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := image.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d := barsDiff(img); img.Bounds().Dx() != 640 || d > 10 {
		t.Errorf("gvnccapture's picture: %v, %.1f from the bars", img.Bounds(), d)
	}
	_, log, err = run("wrong", "--debug") // its debug output has the reason
	if err == nil || !strings.Contains(log, "Invalid user name or password") {
		t.Errorf("a wrong password: %v\n%s", err, log)
	}
}

// TestVncSnapshot: vncsnapshot speaks RFB 3.3, which cannot choose
// VeNCrypt: it is refused, and prints the server's reason.
func TestVncSnapshot(t *testing.T) {
	snapshot := testutil.NeedTool(t, "vncsnapshot", "vncsnapshot")
	e := newEnv(t, envOpts{})
	_, port, _ := strings.Cut(e.addr, ":")
	n, _ := strconv.Atoi(port)
	out, err := exec.Command(snapshot, fmt.Sprintf("127.0.0.1:%d", n-5900), filepath.Join(t.TempDir(), "s.jpg")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "needs VeNCrypt") {
		t.Errorf("vncsnapshot: %v, want the reason it is refused:\n%s", err, out)
	}
	if !e.logged("VNC connection refused") {
		t.Errorf("the server's log has no refusal:\n%s", e.logs)
	}
}
