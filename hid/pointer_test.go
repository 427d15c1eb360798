package hid

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/gadget"
	"kvmd/hw"
)

// withMouseAlt adds kvmd's second mouse to a fixture gadget: the relative
// boot mouse of kvmd otg (protocol 2, reportLen bytes).
func withMouseAlt(t *testing.T, fs hw.FS, reportLen int) hw.FS {
	t.Helper()
	dir := filepath.Join(fs.Root(), filepath.FromSlash(gadget.FunctionDir(gadget.MouseAlt)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"protocol": "2", "subclass": "1", "report_length": fmt.Sprint(reportLen)} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

func outputsOf(s State) string {
	return fmt.Sprintf("%v %q absolute=%v", s.Mouse.Outputs, s.Mouse.Output, s.Mouse.Format.Absolute)
}

// TestMouseOutputs: with kvmd's two mice, the input goes to the absolute
// one (usb) or the relative one (usb_rel) as set_params chooses, each
// ignoring the other's moves as kvmd's do; leaving a mouse releases its
// buttons; the state says which, as kvmd's does.
func TestMouseOutputs(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{FS: withMouseAlt(t, fixtureGadget(t, 7), 5)})
	if got := outputsOf(d.State()); got != `[usb usb_rel] "usb" absolute=true` {
		t.Errorf("at start: %s", got)
	}
	left, _ := ButtonByName("left")
	d.MouseRelative([]Delta{{5, -3}}, false) // the absolute mouse ignores it
	d.MouseMove(0, 0)
	d.MouseButton(left, true)
	for _, want := range []string{"00ff3fff3f0000", "01ff3fff3f0000"} {
		if got := h.read(gadget.Mouse, time.Second); got != want {
			t.Fatalf("absolute mouse got %q, want %s", got, want)
		}
	}

	d.SetMouseOutput(OutputRelative)
	if got := outputsOf(d.State()); got != `[usb usb_rel] "usb_rel" absolute=false` {
		t.Errorf("usb_rel: %s", got)
	}
	// The button the absolute mouse held is released where it is.
	if got := h.read(gadget.Mouse, time.Second); got != "00ff3fff3f0000" {
		t.Errorf("leaving the absolute mouse: %q, want its button released", got)
	}
	d.MouseMove(100, 100) // the relative mouse ignores it
	d.MouseRelative([]Delta{{5, -3}, {-127, 127}}, false)
	d.MouseButton(left, true)
	d.MouseWheel([]Delta{{1, -1}}, false)
	for _, want := range []string{"0005fd0000", "00817f0000", "0100000000", "010000ff01"} {
		if got := h.read(gadget.MouseAlt, time.Second); got != want {
			t.Fatalf("relative mouse got %q, want %s", got, want)
		}
	}
	if got := h.read(gadget.Mouse, 100*time.Millisecond); got != "" {
		t.Errorf("the absolute mouse got %q while the relative one was chosen", got)
	}
	eventually(t, func() bool { return d.State().Mouse.Online }, func() string { return "the relative mouse is not online" })

	// Choosing the output chosen, or one the gadget does not have,
	// changes nothing.
	for _, o := range []string{OutputRelative, "usb_win98", "ps2", ""} {
		d.SetMouseOutput(o)
		if got := h.read(gadget.MouseAlt, 50*time.Millisecond); got != "" {
			t.Errorf("%q: the relative mouse got %q", o, got)
		}
	}
	d.SetMouseOutput(OutputAbsolute)
	if got := h.read(gadget.MouseAlt, time.Second); got != "0000000000" {
		t.Errorf("leaving the relative mouse: %q, want its button released", got)
	}
	d.MouseMove(MoveMax, MoveMax)
	if got := h.read(gadget.Mouse, time.Second); got != "00ff7fff7f0000" {
		t.Errorf("back on usb: %q", got)
	}
	if got := outputsOf(d.State()); got != `[usb usb_rel] "usb" absolute=true` {
		t.Errorf("back on usb: %s", got)
	}
	// A reset releases both.
	d.SetMouseOutput(OutputRelative)
	d.Reset()
	if a, r := h.read(gadget.Mouse, time.Second), h.read(gadget.MouseAlt, time.Second); a != "00ff7fff7f0000" || r != "0000000000" {
		t.Errorf("reset: the mice got %q and %q", a, r)
	}
}

// TestOneMouse: a gadget with one mouse (kvmd's without a mouse_alt, or
// ours with relative-mouse off) has no outputs to choose from, as kvmd
// says it, and usb_rel changes nothing.
func TestOneMouse(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	d.SetMouseOutput(OutputRelative)
	if got := outputsOf(d.State()); got != `[] "" absolute=true` {
		t.Errorf("one mouse: %s", got)
	}
	d.MouseMove(0, 0)
	if got := h.read(gadget.Mouse, time.Second); got != "00ff3fff3f0000" {
		t.Errorf("after usb_rel, the one mouse got %q", got)
	}
	h.mu.Lock()
	n := h.opened[gadget.MouseAlt]
	h.mu.Unlock()
	if n != 0 {
		t.Errorf("the missing second mouse was opened %d times", n)
	}
}

// TestJiggler: after the interval without input, an absolute mouse moves
// 100 units away and back five times and rests where it was; a relative
// one moves by 10 and back five times (kvmd's BaseHid.systask); not
// before the interval, nor when off.
func TestJiggler(t *testing.T) {
	shorten(t)
	h := newHost(t)
	clk := clockwork.NewFakeClock()
	d := start(t, h, Config{FS: withMouseAlt(t, fixtureGadget(t, 7), 5), Clock: clk})
	// advance moves the clock on by d, a second at a time, collecting
	// what function gets until it has want reports.
	advance := func(function string, d time.Duration, want int) []string {
		var got []string
		for end := clk.Now().Add(d); clk.Now().Before(end) && len(got) < want; {
			// A second fires the ticker, or the wait between moves.
			clk.Advance(time.Second)
			if r := h.read(function, 5*time.Millisecond); r != "" {
				got = append(got, r)
			}
		}
		return got
	}
	d.MouseMove(0, 0)
	h.read(gadget.Mouse, time.Second)
	if got := advance(gadget.Mouse, 2*JigglerInterval*time.Second, 1); len(got) != 0 {
		t.Errorf("off, the jiggler moved the mouse: %v", got)
	}
	d.SetJiggler(true)
	d.MouseMove(0, 0)
	h.read(gadget.Mouse, time.Second)
	if got := advance(gadget.Mouse, (JigglerInterval-1)*time.Second, 1); len(got) != 0 {
		t.Errorf("before the interval: %v", got)
	}
	var xs []int
	for _, r := range advance(gadget.Mouse, 90*time.Second, 11) {
		b := []byte{}
		fmt.Sscanf(r, "%x", &b)
		x, y := binary.LittleEndian.Uint16(b[1:]), binary.LittleEndian.Uint16(b[3:])
		if x != y {
			t.Errorf("a jiggle to %d, %d", x, y)
		}
		xs = append(xs, int(x))
	}
	hi, lo, rest := int(toReport(100)), int(toReport(-100)), int(toReport(0))
	if want := []int{hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, rest}; !slices.Equal(xs, want) {
		t.Errorf("absolute jiggle: X %v, want %v", xs, want)
	}

	d.SetMouseOutput(OutputRelative)
	if got := h.read(gadget.Mouse, time.Second); got != "00ff3fff3f0000" {
		t.Errorf("the absolute mouse left: %q, want the release of its buttons", got)
	}
	got := advance(gadget.MouseAlt, 2*JigglerInterval*time.Second, 10)
	want := []string{"000a0a0000", "00f6f60000", "000a0a0000", "00f6f60000", "000a0a0000", "00f6f60000", "000a0a0000", "00f6f60000", "000a0a0000", "00f6f60000"}
	if !slices.Equal(got, want) {
		t.Errorf("relative jiggle:\n got %v\nwant %v", got, want)
	}
	if got := h.read(gadget.Mouse, 50*time.Millisecond); got != "" {
		t.Errorf("the absolute mouse moved while usb_rel: %q", got)
	}
}

// TestLEDsEach: each lock light the host sets in its output report (num
// 1, caps 2, scroll 4; HID Usage Tables' LED page, usages 1..3 in bit
// order) shows alone in the state, and Compose and Kana in none.
func TestLEDsEach(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	for _, tc := range []struct {
		bits byte
		want LEDs
	}{
		{0x01, LEDs{Num: true}},
		{0x02, LEDs{Caps: true}},
		{0x04, LEDs{Scroll: true}},
		{0x18, LEDs{}}, // Compose, Kana
		{0x07, LEDs{Num: true, Caps: true, Scroll: true}},
		{0x00, LEDs{}},
	} {
		if _, err := h.end(gadget.Keyboard).Write([]byte{tc.bits}); err != nil {
			t.Fatal(err)
		}
		// Each report is read in turn: the state shows it before the next.
		eventually(t, func() bool { return d.State().Keyboard.LEDs == tc.want && d.kbd.ledBits.Load() == uint32(tc.bits) },
			func() string { return fmt.Sprintf("LED report %#02x: state %+v", tc.bits, d.State().Keyboard.LEDs) })
	}
}
