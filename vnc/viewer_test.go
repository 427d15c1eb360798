package vnc

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"io"
	_ "image/png"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvmd/internal/procgroup"
	"kvmd/internal/testutil"
)

// display is an X server (Xvfb) whose screen is a file the test reads.
type display struct {
	name  string // ":N"
	fbdir string
}

// startXvfb starts Xvfb on a display it chooses, its screen in a file.
func startXvfb(t *testing.T) *display {
	t.Helper()
	xvfb := testutil.NeedTool(t, "xvfb", "Xvfb")
	d := &display{fbdir: t.TempDir()}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", "1024x768x24", "-fbdir", d.fbdir, "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { procgroup.Kill(cmd.Process); cmd.Wait(); r.Close() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case n := <-line:
		if _, err := strconv.Atoi(n); err != nil {
			t.Fatalf("Xvfb gave no display: %q", n)
		}
		d.name = ":" + n
	case <-time.After(10 * time.Second):
		t.Fatal("Xvfb did not start")
	}
	return d
}

// screen reads the display's screen (Xvfb's XWD file), the part x, y, w, h.
func (d *display) screen(t *testing.T, x, y, w, h int) image.Image {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.fbdir, "Xvfb_screen0"))
	if err != nil {
		t.Fatal(err)
	}
	// The XWD header: 25 CARD32 in the writer's byte order (X11's
	// XWDFile.h), then the window's name and the colour map.
	var bo binary.ByteOrder = binary.BigEndian
	if binary.BigEndian.Uint32(b) > 1<<16 {
		bo = binary.LittleEndian
	}
	f := func(i int) int { return int(bo.Uint32(b[4*i:])) }
	hdr, bpp, bpl, ncolors, order := f(0), f(11), f(12), f(19), f(7)
	if bpp != 32 {
		t.Fatalf("XWD of %d bits per pixel", bpp)
	}
	data := b[hdr+12*ncolors:]
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for j := range h {
		for i := range w {
			o := (y+j)*bpl + (x+i)*4
			var v uint32
			if order == 0 { // LSBFirst
				v = binary.LittleEndian.Uint32(data[o:])
			} else {
				v = binary.BigEndian.Uint32(data[o:])
			}
			img.SetRGBA(i, j, color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255})
		}
	}
	return img
}

// TestTigerVNC: TigerVNC's viewer, under Xvfb, connects through
// VeNCrypt's X509Plain with the test's certificate as its CA, shows the
// bars (read from Xvfb's screen), and types a line that xdotool types
// into its window: the keyboard's reports on the host decode to it.
func TestTigerVNC(t *testing.T) {
	viewer := testutil.NeedTool(t, "tigervnc-viewer", "xtigervncviewer")
	xdotool := testutil.NeedTool(t, "xdotool", "xdotool")
	e := newEnv(t, envOpts{})
	d := startXvfb(t)

	_, port, _ := strings.Cut(e.addr, ":")
	cmd := exec.Command(viewer, "-SecurityTypes=X509Plain", "-X509CA="+e.caPEM, "-geometry=+0+0",
		"-AlertOnFatalError=0", "-Shared", "127.0.0.1::"+port)
	cmd.Env = append(os.Environ(), "DISPLAY="+d.name, "VNC_USERNAME=oper", "VNC_PASSWORD=operpass", "HOME="+t.TempDir())
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		procgroup.Kill(cmd.Process)
		cmd.Wait()
		if t.Failed() {
			t.Logf("the viewer's output:\n%s", out.String())
		}
	}()

	// The bars on the viewer's screen.
	deadline := time.Now().Add(20 * time.Second)
	var diff float64
	for {
		diff = barsDiff(d.screen(t, 0, 0, 640, 480))
		if diff < 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if diff >= 10 {
		t.Fatalf("the viewer's screen differs from the bars by %.1f\nserver log:\n%s", diff, e.logs)
	}
	if !strings.Contains(e.logs.String(), `VNC client connected`) {
		t.Errorf("the server's log has no connection:\n%s", e.logs)
	}

	// xdotool types into the viewer's window.
	search := exec.Command(xdotool, "search", "--sync", "--name", "kvmd")
	search.Env = append(os.Environ(), "DISPLAY="+d.name)
	win, err := search.Output()
	if err != nil {
		t.Fatalf("the viewer's window: %v", err)
	}
	id := strings.Fields(string(win))[0]
	const line = "Hello, VNC! 42 <kvmd>"
	for _, args := range [][]string{
		{"windowfocus", "--sync", id},
		{"type", "--delay", "40", line},
		{"key", "Return"},
	} {
		x := exec.Command(xdotool, args...)
		x.Env = append(os.Environ(), "DISPLAY="+d.name)
		if b, err := x.CombinedOutput(); err != nil {
			t.Fatalf("xdotool %s: %v %s", args[0], err, b)
		}
	}
	if got := e.keysTyped(time.Second); got != line+"\n" {
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
	if !strings.Contains(e.logs.String(), "VNC connection refused") {
		t.Errorf("the server's log has no refusal:\n%s", e.logs)
	}
}
