package hid

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/gadget"
	"kvmd/hw"
)

// host is the far end of a stand-in function node: a SOCK_SEQPACKET
// socketpair keeps each report a message, answers EAGAIN when its buffer
// is full (a host that does not read) and EPIPE once the host end is
// closed (a host that is gone), as a hidg node answers EAGAIN and
// ESHUTDOWN.
type host struct {
	t      *testing.T
	mu     sync.Mutex
	errs   map[string]error // function -> the error Open gives
	ends   map[string]*os.File
	opened map[string]int
	small  bool // a tiny send buffer, so the host stops taking reports
}

func newHost(t *testing.T) *host {
	return &host{t: t, errs: map[string]error{}, ends: map[string]*os.File{}, opened: map[string]int{}}
}

func (h *host) open(function string, _ bool) (File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.errs[function]; err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.small {
		unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 1)
	}
	dev := os.NewFile(uintptr(fds[0]), "dev-"+function)
	end := os.NewFile(uintptr(fds[1]), "host-"+function)
	h.ends[function] = end
	h.opened[function]++
	h.t.Cleanup(func() { end.Close() })
	return dev, nil
}

func (h *host) end(function string) *os.File {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		f := h.ends[function]
		h.mu.Unlock()
		if f != nil {
			return f
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("%s never opened", function)
	return nil
}

// read returns the next report the host gets, "" after a timeout.
func (h *host) read(function string, timeout time.Duration) string {
	h.t.Helper()
	f := h.end(function)
	f.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", buf[:n])
}

// fixtureGadget writes a fixture configfs with kvmd's two functions.
func fixtureGadget(t *testing.T, mouseLen int) hw.FS {
	root := t.TempDir()
	for fn, attrs := range map[string]map[string]string{
		gadget.Keyboard: {"protocol": "1", "report_length": "8"},
		gadget.Mouse:    {"protocol": "0", "report_length": fmt.Sprint(mouseLen)},
	} {
		dir := filepath.Join(root, filepath.FromSlash(gadget.FunctionDir(fn)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range attrs {
			os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644)
		}
	}
	return hw.New(root)
}

func start(t *testing.T, h *host, cfg Config) *HID {
	t.Helper()
	if cfg.FS.Root() == "" || cfg.FS.Root() == "/" {
		cfg.FS = fixtureGadget(t, 7)
	}
	cfg.Open = h.open
	d := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

func shorten(t *testing.T) {
	ow, or, os := writeTimeout, retryInterval, PrintStall
	writeTimeout, retryInterval, PrintStall = 20*time.Millisecond, 20*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { writeTimeout, retryInterval, PrintStall = ow, or, os })
}

func TestKeysReachTheHost(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	d.Key(key(t, "KeyA"), true, true)
	for _, want := range []string{"0000040000000000", "0000000000000000"} {
		if got := h.read(gadget.Keyboard, time.Second); got != want {
			t.Fatalf("host got %q, want %q", got, want)
		}
	}
	left, _ := ButtonByName("left")
	d.MouseMove(MoveMax, MoveMin)
	d.MouseButton(left, true)
	d.MouseWheel([]Delta{{0, -1}}, false)
	for _, want := range []string{"00ff7f00000000", "01ff7f00000000", "01ff7f0000ff00"} {
		if got := h.read(gadget.Mouse, time.Second); got != want {
			t.Fatalf("host got %q, want %q", got, want)
		}
	}
	// The writer counts a report after the host could read it.
	eventually(t, func() bool { c := d.Counts(); return c.KeyboardWritten == 2 && c.MouseWritten == 3 },
		func() string { return fmt.Sprintf("counts %+v", d.Counts()) })
	if s := d.State(); !s.Keyboard.Online || !s.Mouse.Online || !s.Mouse.Format.Absolute || !s.Mouse.Format.HorizontalWheel {
		t.Errorf("state %+v", s)
	}
}

// TestLEDs: the host's output report is read and published.
func TestLEDs(t *testing.T) {
	shorten(t)
	h := newHost(t)
	changed := make(chan struct{}, 16)
	d := start(t, h, Config{OnChange: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if _, err := h.end(gadget.Keyboard).Write([]byte{2}); err != nil { // caps
		t.Fatal(err)
	}
	deadline := time.After(2 * time.Second)
	for !d.State().Keyboard.LEDs.Caps {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("caps lock never seen: %+v", d.State())
		}
	}
	h.end(gadget.Keyboard).Write([]byte{5}) // num and scroll
	for d.State().Keyboard.LEDs != (LEDs{Num: true, Scroll: true}) {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("num and scroll never seen: %+v", d.State())
		}
	}
}

// TestHostNotReading: a host that takes no reports blocks no sender; the
// queue coalesces, and when the host reads again the last report it gets
// is the state at the end.
func TestHostNotReading(t *testing.T) {
	shorten(t)
	h := newHost(t)
	h.small = true
	d := start(t, h, Config{QueueLen: 8})
	end := h.end(gadget.Keyboard)
	a, b := key(t, "KeyA"), key(t, "KeyB")
	start := time.Now()
	for i := range 5000 {
		d.Key(a, i%2 == 0, false)
	}
	d.Key(b, true, false)
	if el := time.Since(start); el > time.Second {
		t.Errorf("5001 events took %v with the host not reading", el)
	}
	time.Sleep(100 * time.Millisecond)
	if d.State().Keyboard.Online {
		t.Error("a host not reading left the keyboard online")
	}
	if d.Counts().KeyboardDropped == 0 {
		t.Error("nothing coalesced")
	}
	// The host reads again: it drains, ending with B held and A not.
	var last string
	buf := make([]byte, 64)
	for {
		end.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := end.Read(buf)
		if err != nil {
			break
		}
		last = fmt.Sprintf("%x", buf[:n])
	}
	if last != "0000050000000000" {
		t.Errorf("the host's last report %q, want B alone held", last)
	}
	if !d.State().Keyboard.Online {
		t.Error("online not back once the host read")
	}
}

// TestHostGone: when writes fail (the host end closed: the gadget
// unbound), what was held is released, input meanwhile is dropped, and
// the first report when the host is back is the release of everything.
func TestHostGone(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	d.Key(key(t, "ShiftLeft"), true, false)
	d.Key(key(t, "KeyA"), true, false)
	h.read(gadget.Keyboard, time.Second)
	if got := h.read(gadget.Keyboard, time.Second); got != "0200040000000000" {
		t.Fatalf("held: %q", got)
	}
	// Unplug: the host end goes away; the next write fails.
	h.mu.Lock()
	h.ends[gadget.Keyboard].Close()
	h.ends[gadget.Keyboard] = nil
	h.errs[gadget.Keyboard] = errors.New("unbound")
	h.mu.Unlock()
	d.Key(key(t, "KeyB"), true, false)
	deadline := time.Now().Add(2 * time.Second)
	for !d.kbd.gone.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !d.kbd.gone.Load() || d.State().Keyboard.Online {
		t.Fatalf("not gone after the host end closed: %+v", d.State())
	}
	d.Key(key(t, "KeyC"), true, false) // while gone: dropped
	h.mu.Lock()
	delete(h.errs, gadget.Keyboard)
	h.mu.Unlock()
	if got := h.read(gadget.Keyboard, 2*time.Second); got != "0000000000000000" {
		t.Errorf("first report after the host is back: %q, want all released", got)
	}
	if got := h.read(gadget.Keyboard, 100*time.Millisecond); got != "" {
		t.Errorf("then %q, want nothing", got)
	}
	d.Key(key(t, "KeyD"), true, false)
	if got := h.read(gadget.Keyboard, time.Second); got != "0000070000000000" {
		t.Errorf("after: %q, want D alone", got)
	}
}

// TestGadgetMadeAnew: a descriptor of a gadget made anew (kvmd otg stop
// and start, found by the booted test) fails its next write though the
// host is there: the node is opened again and the report goes through,
// with no print interrupted and the host never called gone.
func TestGadgetMadeAnew(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	d.Key(key(t, "KeyA"), true, false)
	d.Key(key(t, "KeyA"), false, false)
	for _, want := range []string{"0000040000000000", "0000000000000000"} {
		if got := h.read(gadget.Keyboard, time.Second); got != want {
			t.Fatalf("before: %q, want %s", got, want)
		}
	}
	// The old node's far end is gone; a new one opens fine.
	h.mu.Lock()
	h.ends[gadget.Keyboard].Close()
	h.ends[gadget.Keyboard] = nil
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- d.Print(context.Background(), "b", "", 0) }()
	var got []string
	for r := h.read(gadget.Keyboard, time.Second); r != ""; r = h.read(gadget.Keyboard, 200*time.Millisecond) {
		got = append(got, r)
	}
	if err := <-done; err != nil {
		t.Errorf("print across the new node: %v", err)
	}
	if d.kbd.gone.Load() {
		t.Error("the host was called gone")
	}
	if h.opened[gadget.Keyboard] != 2 {
		t.Errorf("opened %d times, want 2", h.opened[gadget.Keyboard])
	}
	if fmt.Sprint(got) != "[0000050000000000 0000000000000000]" {
		t.Errorf("the new node got %v, want b pressed and released", got)
	}
}

func TestPrint(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	if err := d.Print(context.Background(), "Hi!", "", 0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		r := h.read(gadget.Keyboard, 200*time.Millisecond)
		if r == "" {
			break
		}
		got = append(got, r)
	}
	want := "[0200000000000000 02000b0000000000 0200000000000000 0000000000000000 00000c0000000000 0000000000000000 " +
		"0200000000000000 02001e0000000000 0200000000000000 0000000000000000]"
	if fmt.Sprint(got) != want {
		t.Errorf("host got\n%v\nwant\n%s", got, want)
	}
	if err := d.Print(context.Background(), "x", "nope", 0); !errors.Is(err, ErrNoKeymap) {
		t.Errorf("unknown keymap: %v", err)
	}
}

// TestPrintInterrupted: a reset, a new print and the caller's context
// each stop a print, and every key is released.
func TestPrintInterrupted(t *testing.T) {
	shorten(t)
	for _, how := range []string{"reset", "print", "context", "stall"} {
		t.Run(how, func(t *testing.T) {
			h := newHost(t)
			delay := 5 * time.Millisecond
			if how == "stall" {
				// Before the device starts: it opens the keyboard at once.
				delay = 0
				h.small = true
			}
			d := start(t, h, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				errc <- d.Print(ctx, strings.Repeat("A", 2000) /* more than a socket queues (net.unix.max_dgram_qlen: 512) */, "", delay)
			}()
			end := h.end(gadget.Keyboard)
			if how != "stall" {
				for !d.State().Busy {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(30 * time.Millisecond)
			}
			switch how {
			case "reset":
				d.Reset()
			case "print":
				go d.Print(context.Background(), "", "", 0)
			case "context":
				cancel()
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(5 * time.Second):
				t.Fatal("print not stopped")
			}
			want := map[string]error{"reset": ErrInterrupted, "print": ErrInterrupted, "context": context.Canceled, "stall": ErrStalled}[how]
			if !errors.Is(err, want) {
				t.Errorf("print returned %v, want %v", err, want)
			}
			// The host's last report releases everything.
			var last string
			buf := make([]byte, 64)
			for {
				end.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				n, err := end.Read(buf)
				if err != nil {
					break
				}
				last = fmt.Sprintf("%x", buf[:n])
			}
			if last != "0000000000000000" {
				t.Errorf("last report %q, want everything released", last)
			}
			for d.State().Busy {
				time.Sleep(time.Millisecond)
			}
		})
	}
}

func TestNoFunction(t *testing.T) {
	shorten(t)
	fs := fixtureGadget(t, 9)
	h := newHost(t)
	d := start(t, h, Config{FS: fs})
	time.Sleep(100 * time.Millisecond)
	if d.State().Mouse.Online {
		t.Error("a mouse of no known layout is online")
	}
	h.mu.Lock()
	opened := h.opened[gadget.Mouse]
	h.mu.Unlock()
	if opened != 0 {
		t.Error("the mouse of no known layout was opened")
	}
	if !d.State().Keyboard.Online {
		t.Error("the keyboard should still work")
	}
}

// eventually waits up to two seconds for cond.
func eventually(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
