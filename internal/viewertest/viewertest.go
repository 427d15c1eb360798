// Package viewertest runs VNC viewers for tests, as a person would: an X
// server (Xvfb) whose screen is read from the file it keeps it in,
// TigerVNC's viewer on it, and xdotool typing into the viewer's window.
// Only tests import it.
package viewertest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvmd/internal/procgroup"
	"kvmd/internal/testutil"
)

// Display is an X server (Xvfb) whose screen is a file the test reads.
type Display struct {
	// Name is the display, ":N", for DISPLAY.
	Name  string
	fbdir string
}

// Start starts Xvfb on a display it chooses, its screen of w x h pixels
// (24 bits) in a file; it is killed when t ends. Without Xvfb it ends t
// through testutil.Missing.
func Start(t *testing.T, w, h int) *Display {
	t.Helper()
	xvfb := testutil.NeedTool(t, "xvfb", "Xvfb")
	d := &Display{fbdir: t.TempDir()}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(xvfb, "-displayfd", "3", "-screen", "0", fmt.Sprintf("%dx%dx24", w, h), "-fbdir", d.fbdir, "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
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
		d.Name = ":" + n
	case <-time.After(10 * time.Second):
		t.Fatal("Xvfb did not start")
	}
	return d
}

// Screen reads the display's screen (Xvfb's XWD file), the part x, y, w, h.
func (d *Display) Screen(t *testing.T, x, y, w, h int) image.Image {
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

// MeanDiff is the mean difference of a colour channel between a and b
// over r (every third pixel of each third row).
func MeanDiff(a, b image.Image, r image.Rectangle) float64 {
	var sum, n float64
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			ca := color.RGBAModel.Convert(a.At(a.Bounds().Min.X+x, a.Bounds().Min.Y+y)).(color.RGBA)
			cb := color.RGBAModel.Convert(b.At(b.Bounds().Min.X+x, b.Bounds().Min.Y+y)).(color.RGBA)
			sum += diff(ca.R, cb.R) + diff(ca.G, cb.G) + diff(ca.B, cb.B)
			n += 3
		}
	}
	return sum / n
}

func diff(a, b uint8) float64 {
	if a > b {
		return float64(a - b)
	}
	return float64(b - a)
}

// TigerVNC starts TigerVNC's viewer on d, at the screen's top left,
// connected to the VNC server at addr (host:port) through VeNCrypt's
// X509Plain, the server's certificate checked against the PEM file ca,
// user and passwd given as its environment lets them be. It is killed
// when t ends; its output is logged if t failed.
func (d *Display) TigerVNC(t *testing.T, addr, ca, user, passwd string) {
	t.Helper()
	viewer := testutil.NeedTool(t, "tigervnc-viewer", "xtigervncviewer")
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(viewer, "-SecurityTypes=X509Plain", "-X509CA="+ca, "-geometry=+0+0",
		"-AlertOnFatalError=0", "-Shared", host+"::"+port)
	cmd.Env = append(os.Environ(), "DISPLAY="+d.Name, "VNC_USERNAME="+user, "VNC_PASSWORD="+passwd, "HOME="+t.TempDir())
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		procgroup.Kill(cmd.Process)
		cmd.Wait()
		if t.Failed() {
			t.Logf("the viewer's output:\n%s", out.String())
		}
	})
}

// WaitScreen reads the part r of the screen until ok says it is right,
// for at most d; it returns the last read.
func (d *Display) WaitScreen(t *testing.T, r image.Rectangle, wait time.Duration, ok func(image.Image) bool) image.Image {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		img := d.Screen(t, r.Min.X, r.Min.Y, r.Dx(), r.Dy())
		if ok(img) || time.Now().After(deadline) {
			return img
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Type has xdotool type text and then Return into the window whose name
// has window in it, once the window is there.
func (d *Display) Type(t *testing.T, window, text string) {
	t.Helper()
	xdotool := testutil.NeedTool(t, "xdotool", "xdotool")
	run := func(args ...string) string {
		cmd := exec.Command(xdotool, args...)
		cmd.Env = append(os.Environ(), "DISPLAY="+d.Name)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("xdotool %s: %v %s", args[0], err, b)
		}
		return string(b)
	}
	id := strings.Fields(run("search", "--sync", "--name", window))[0]
	run("windowfocus", "--sync", id)
	run("type", "--delay", "40", text)
	run("key", "Return")
}
