// Package hid makes the daemon the host's keyboard and mouse: it turns
// kvmd's input events (key presses, mouse buttons, moves and wheel, text
// to type) into the reports of the USB gadget's HID functions and writes
// them to their /dev/hidgN nodes, and reads back the keyboard's LEDs as
// the host sets them.
//
// Shapes and behaviour follow PiKVM's kvmd (github.com/pikvm/kvmd at
// f14596e8: kvmd/plugins/hid/otg/, kvmd/plugins/hid/__init__.py,
// kvmd/keyboard/printer.py, kvmd/apps/kvmd/api/hid.py). Where this package
// differs it says so.
//
// Nothing here waits for the host: each device has a bounded queue that
// one goroutine writes without blocking (O_NONBLOCK, a deadline per
// report), and a full queue coalesces (every report is the device's whole
// state). When the host goes away (the gadget unbound, the cable pulled)
// everything held is released, so that no key is held when it comes back.
package hid

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"

	"kvmd/gadget"
	"kvmd/hw"
)

// Config is what New needs.
type Config struct {
	// FS is the machine's root: the gadget's functions are read from its
	// configfs and their nodes opened under it.
	FS hw.FS
	// Open, when set, opens a function's node in place of the node
	// gadget.HIDNode finds (the demo's stand-in host). write is false for
	// the keyboard, which is also read.
	Open func(function string, writeOnly bool) (File, error)
	// Log receives the devices' comings and goings.
	Log *slog.Logger
	// OnChange is called (never with a lock held) when the state changes:
	// a device on- or offline, the LEDs, busy, the jiggler.
	OnChange func()
	// QueueLen bounds the reports waiting for each device; 0: 64.
	QueueLen int
	// Keymaps are the keymaps print types with; nil: the built-in ones.
	Keymaps *Keymaps
	// Clock times the jiggler and the inactivity; nil: the real one.
	Clock clockwork.Clock
}

// HID is the keyboard and the mouse. Create it with New, start it with Run.
type HID struct {
	cfg     Config
	log     *slog.Logger
	kbd     *device
	keymaps *Keymaps
	clock   clockwork.Clock
	// mice are the gadget's mouse (gadget.Mouse) and its second one
	// (gadget.MouseAlt, kvmd's mouse_alt); input goes to mice[current].
	mice     [2]*pointer
	current  atomic.Int32
	outputMu sync.Mutex // held while the output is switched

	// kbdState is guarded by kbd.mu.
	kbdState keyboard

	jobSeq sync.Mutex // held by startJob throughout: one new job at a time
	jobMu  sync.Mutex // guards job
	job    *job
	busy   atomic.Bool
	active atomic.Int64 // the last input, unix nanoseconds

	jiggler   atomic.Bool
	lastMoveX atomic.Int32
	lastMoveY atomic.Int32

	dropped [numDropReasons]atomic.Uint64
}

// New returns the keyboard and mouse of cfg's gadget.
func New(cfg Config) *HID {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.QueueLen < 4 {
		cfg.QueueLen = 64
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	h := &HID{cfg: cfg, log: cfg.Log, keymaps: cfg.Keymaps, clock: cfg.Clock}
	if h.keymaps == nil {
		h.keymaps = BuiltinKeymaps()
	}
	h.kbd = newDevice("keyboard", cfg.QueueLen, h.openKeyboard, cfg.Log, h.changed)
	h.kbd.leds = true
	h.kbd.clearState = h.kbdState.clear
	h.mice[0] = h.newPointer("mouse", gadget.Mouse, MouseFormat{Absolute: true, HorizontalWheel: true})
	h.mice[1] = h.newPointer("mouse_alt", gadget.MouseAlt, MouseFormat{Absolute: false, HorizontalWheel: true})
	h.bump()
	return h
}

func (h *HID) changed() {
	if h.cfg.OnChange != nil {
		h.cfg.OnChange()
	}
}

// Run writes to the devices and runs the jiggler until ctx ends; then it
// releases everything held and returns.
func (h *HID) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.kbd.run(ctx) })
	for _, p := range h.mice {
		wg.Go(func() { p.dev.run(ctx) })
	}
	wg.Go(func() { h.jiggle(ctx) })
	<-ctx.Done()
	h.cancelJob()
	wg.Wait()
}

// ErrNoFunction is returned when the gadget has no such function, or its
// attributes are not those of kvmd's gadget.
var ErrNoFunction = errors.New("hid: no such gadget function")

func (h *HID) attr(function, name string) (int, error) {
	s, err := h.cfg.FS.ReadString(path.Join(gadget.FunctionDir(function), name))
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrNoFunction, function, err)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s/%s is %q", ErrNoFunction, function, name, s)
	}
	return n, nil
}

func (h *HID) openKeyboard() (File, error) {
	n, err := h.attr(gadget.Keyboard, "report_length")
	if err != nil {
		return nil, err
	}
	if n != KeyboardReportLen {
		return nil, fmt.Errorf("%w: %s has %d-byte reports, not a boot keyboard's 8", ErrNoFunction, gadget.Keyboard, n)
	}
	return h.openNode(gadget.Keyboard, false)
}

func (h *HID) openNode(function string, writeOnly bool) (File, error) {
	if h.cfg.Open != nil {
		return h.cfg.Open(function, writeOnly)
	}
	node, err := gadget.HIDNode(h.cfg.FS, function)
	if err != nil {
		return nil, err
	}
	flag := os.O_RDWR
	if writeOnly {
		flag = os.O_WRONLY
	}
	// O_NONBLOCK: Go's poller waits for the node (hidg supports poll), so
	// a write deadline bounds each report.
	return h.cfg.FS.OpenFile(node, flag|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}

func (h *HID) bump() { h.active.Store(h.clock.Now().UnixNano()) }

// Key presses or releases a key (kvmd's send_key_event): with finish, a
// press is followed by its release, except for modifiers and PrintScreen
// (held for Alt+SysRq combinations).
func (h *HID) Key(k Key, press, finish bool) {
	h.kbd.send(context.Background(), false, 0, 0, func() [][]byte {
		out := h.kbdState.key(k, press)
		if press && finish && !k.Modifier() && k.Name != "PrintScreen" {
			out = append(out, h.kbdState.key(k, false)...)
		}
		return out
	})
	h.bump()
}

// MouseButton presses or releases a mouse button.
func (h *HID) MouseButton(b Button, press bool) {
	h.pointer().send(func(m *mouse) [][]byte { return m.button(b, press) })
	h.bump()
}

// MouseMove moves an absolute mouse to x, y in MoveMin..MoveMax over the
// whole screen; a relative mouse ignores it.
func (h *HID) MouseMove(x, y int) {
	h.lastMoveX.Store(int32(x))
	h.lastMoveY.Store(int32(y))
	h.pointer().send(func(m *mouse) [][]byte { return m.move(x, y) })
	h.bump()
}

// Delta is a relative move or a wheel step, each axis in DeltaMin..DeltaMax.
type Delta struct{ X, Y int8 }

// MouseRelative moves a relative mouse; an absolute one ignores it, as
// kvmd's does.
func (h *HID) MouseRelative(deltas []Delta, squash bool) {
	p := h.pointer()
	for _, d := range squashDeltas(deltas, squash) {
		p.send(func(m *mouse) [][]byte { return m.relative(d.X, d.Y) })
	}
	h.bump()
}

// MouseWheel turns the wheel: Y up (positive) or down, X right or left
// (only where the mouse has a horizontal wheel).
func (h *HID) MouseWheel(deltas []Delta, squash bool) {
	p := h.pointer()
	for _, d := range squashDeltas(deltas, squash) {
		p.send(func(m *mouse) [][]byte { return m.wheel(d.X, d.Y) })
	}
	h.bump()
}

// squashDeltas sums consecutive deltas while each sum stays within
// DeltaMin..DeltaMax (kvmd's __process_mouse_delta_event).
func squashDeltas(deltas []Delta, squash bool) []Delta {
	if !squash {
		return deltas
	}
	var out []Delta
	var px, py int
	for _, d := range deltas {
		cx, cy := int(d.X), int(d.Y)
		if abs(px+cx) > DeltaMax || abs(py+cy) > DeltaMax {
			out = append(out, Delta{int8(px), int8(py)})
			px, py = cx, cy
		} else {
			px, py = px+cx, py+cy
		}
	}
	if px != 0 || py != 0 {
		out = append(out, Delta{int8(px), int8(py)})
	}
	return out
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// Apply sends one parsed input event.
func (h *HID) Apply(ev Event) {
	switch ev.Kind {
	case EventKey:
		h.Key(ev.Key, ev.State, ev.Finish)
	case EventMouseButton:
		h.MouseButton(ev.Button, ev.State)
	case EventMouseMove:
		h.MouseMove(ev.X, ev.Y)
	case EventMouseRelative:
		h.MouseRelative(ev.Deltas, ev.Squash)
	case EventMouseWheel:
		h.MouseWheel(ev.Deltas, ev.Squash)
	}
}

// ReleaseAll releases every key and button held, when something is
// (kvmd's clear_events when a WebSocket client leaves).
func (h *HID) ReleaseAll() {
	h.kbd.mu.Lock()
	held := h.kbdState.held()
	h.kbd.mu.Unlock()
	if held {
		h.kbd.clear()
	}
	for _, p := range h.mice {
		p.dev.mu.Lock()
		held := p.state.held()
		p.dev.mu.Unlock()
		if held {
			p.dev.clear()
		}
	}
}

// Reset stops a print or shortcut under way and releases everything on
// both devices (kvmd's reset).
func (h *HID) Reset() {
	h.cancelJob()
	h.kbd.clear()
	for _, p := range h.mice {
		p.dev.clear()
	}
}

// Errors of the long operations (print, shortcuts).
var (
	// ErrInterrupted: a reset, another print or shortcut, or the host
	// going away stopped it; every key was released.
	ErrInterrupted = errors.New("hid: interrupted")
	// ErrStalled: the host took no report for PrintStall; every key was
	// released.
	ErrStalled = errors.New("hid: the host is not reading the keyboard")
	// ErrUnavailable: the keyboard has no node, or no host (the gadget is
	// not bound, the cable not plugged in).
	ErrUnavailable = errors.New("hid: the keyboard is not connected to a host")
)

// PrintStall is how long print and shortcuts wait for the host to take a
// report before they give up.
var PrintStall = 5 * time.Second

// KeyPress is one step of a sequence: a key pressed or released.
type KeyPress struct {
	Key   Key
	Press bool
}

type job struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// startJob stops the job under way (it releases what it held) and waits
// for it, then makes ctx's the current one.
func (h *HID) startJob(ctx context.Context) (context.Context, func()) {
	h.jobSeq.Lock()
	defer h.jobSeq.Unlock()
	h.cancelJob()
	ctx, cancel := context.WithCancelCause(ctx)
	j := &job{cancel: cancel, done: make(chan struct{})}
	h.jobMu.Lock()
	h.job = j
	h.jobMu.Unlock()
	h.busy.Store(true)
	h.changed()
	return ctx, func() {
		cancel(nil)
		h.jobMu.Lock()
		if h.job == j {
			h.job = nil
			h.busy.Store(false)
		}
		h.jobMu.Unlock()
		close(j.done)
		h.changed()
	}
}

func (h *HID) cancelJob() {
	h.jobMu.Lock()
	j := h.job
	h.jobMu.Unlock()
	if j != nil {
		j.cancel(ErrInterrupted)
		<-j.done
	}
}

// SendKeys types a sequence, waiting delay before each step, as the only
// long operation: one under way is stopped first. It returns when the host
// has taken the last report, or with ctx's error, ErrInterrupted or
// ErrStalled; then every key was released.
func (h *HID) SendKeys(ctx context.Context, seq []KeyPress, delay time.Duration) error {
	return h.sendKeys(ctx, slices.Values(seq), delay)
}

// sendKeys is SendKeys of a sequence made as it is typed: the job is the
// current one (a reset or another print stops it) before the first step
// is made.
func (h *HID) sendKeys(ctx context.Context, seq iter.Seq[KeyPress], delay time.Duration) error {
	if h.kbd.gone.Load() {
		return ErrUnavailable
	}
	ctx, end := h.startJob(ctx)
	defer end()
	gen := h.kbd.generation()
	for kp := range seq {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		err := ctx.Err()
		if err == nil {
			err = h.kbd.send(ctx, true, gen, PrintStall, func() [][]byte { return h.kbdState.key(kp.Key, kp.Press) })
		}
		if err != nil {
			return h.endKeys(ctx, err)
		}
		h.bump()
	}
	// Typed when the host has taken the last report.
	if err := h.kbd.drain(ctx, gen, PrintStall); err != nil {
		return h.endKeys(ctx, err)
	}
	return nil
}

// endKeys turns the error that stopped a sequence into this package's,
// releasing every key unless whoever interrupted it did.
func (h *HID) endKeys(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errInterrupted):
		return ErrInterrupted
	case errors.Is(err, errStalled):
		err = ErrStalled
	case errors.Is(context.Cause(ctx), ErrInterrupted):
		err = ErrInterrupted
	}
	h.kbd.clear()
	return err
}

// Shortcut presses keys in order and releases them in reverse, 50 ms
// apart (kvmd's send_shortcut).
func (h *HID) Shortcut(ctx context.Context, keys []Key) error {
	var seq []KeyPress
	for _, k := range keys {
		seq = append(seq, KeyPress{k, true})
	}
	for i := len(keys) - 1; i >= 0; i-- {
		seq = append(seq, KeyPress{keys[i], false})
	}
	return h.SendKeys(ctx, seq, 50*time.Millisecond)
}

// Print types text with the named keymap ("" for the default), waiting
// delay before each key event (see SendKeys). The key events are made
// from the text as it is typed, a character at a time (typeSeq), so a
// print holds its text and one character's events, never one event of
// every character at once (a 1 MiB text made 230 MiB of them before it
// typed the first); and a reset stops it from its start.
func (h *HID) Print(ctx context.Context, text, keymap string, delay time.Duration) error {
	km, err := h.keymaps.Get(keymap)
	if err != nil {
		return err
	}
	return h.sendKeys(ctx, typeSeq(km, text), delay)
}

// typeSeq is the key presses of km.Type(text), made as they are taken.
func typeSeq(km *Keymap, text string) iter.Seq[KeyPress] {
	return func(yield func(KeyPress) bool) {
		t := km.Typer()
		var buf []KeyPress // one character's presses, its array reused
		for _, r := range text {
			buf = t.Rune(buf[:0], r)
			for _, kp := range buf {
				if !yield(kp) {
					return
				}
			}
		}
		for _, kp := range t.End(buf[:0]) {
			if !yield(kp) {
				return
			}
		}
	}
}

// Keymaps returns the keymaps print knows.
func (h *HID) Keymaps() *Keymaps { return h.keymaps }

// LEDs are the keyboard's lock lights as the host last set them.
type LEDs struct {
	Caps, Scroll, Num bool
}

// State is the devices' state as this package drives them.
type State struct {
	Keyboard struct {
		Online bool
		LEDs   LEDs
	}
	// Mouse is the mouse that input goes to.
	Mouse struct {
		Online bool
		Format MouseFormat
		// Outputs are the mouse outputs to choose from (OutputAbsolute
		// and OutputRelative when the gadget has both mice; none
		// otherwise), Output the one chosen ("" without a choice).
		Outputs []string
		Output  string
	}
	// Busy is set while a print or shortcut is typing.
	Busy    bool
	Jiggler Jiggler
}

// Jiggler is kvmd's mouse jiggler: when active, the mouse moves a little
// after Interval seconds (give or take a quarter) without input, so that
// the host does not sleep.
type Jiggler struct {
	Enabled, Active bool
	Interval        int
}

// JigglerInterval is the jiggler's interval in seconds (kvmd's default).
const JigglerInterval = 60

// State returns the current state.
func (h *HID) State() State {
	var s State
	s.Keyboard.Online = h.kbd.online.Load()
	b := h.kbd.ledBits.Load()
	s.Keyboard.LEDs = LEDs{Caps: b&2 != 0, Scroll: b&4 != 0, Num: b&1 != 0}
	p := h.pointer()
	s.Mouse.Online = p.dev.online.Load()
	s.Mouse.Format, _ = p.format()
	s.Mouse.Outputs, s.Mouse.Output = h.mouseOutputs()
	s.Busy = h.busy.Load()
	s.Jiggler = Jiggler{Enabled: true, Active: h.jiggler.Load(), Interval: JigglerInterval}
	return s
}

// SetJiggler turns the jiggler on or off.
func (h *HID) SetJiggler(on bool) {
	if h.jiggler.Swap(on) != on {
		h.changed()
	}
}

// Inactivity is the time since the last input, in whole seconds.
func (h *HID) Inactivity() int {
	return int(h.clock.Since(time.Unix(0, h.active.Load())) / time.Second)
}

// jiggle moves the mouse when the jiggler is on and the host has had no
// input for the interval (kvmd's BaseHid.systask): an absolute mouse
// around where it last was, a relative one back and forth.
func (h *HID) jiggle(ctx context.Context) {
	t := h.clock.NewTicker(time.Second)
	defer t.Stop()
	next := time.Duration(JigglerInterval) * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		if !h.jiggler.Load() || h.clock.Since(time.Unix(0, h.active.Load())) < next {
			continue
		}
		f, _ := h.pointer().format()
		abs := f.Absolute
		x, y := int(h.lastMoveX.Load()), int(h.lastMoveY.Load())
		for i := range 11 {
			step := 100
			if i%2 == 1 {
				step = -100
			}
			if i == 10 {
				step = 0
			}
			if abs {
				h.MouseMove(min(max(x+step, MoveMin), MoveMax), min(max(y+step, MoveMin), MoveMax))
			} else if i < 10 {
				h.MouseRelative([]Delta{{int8(step / 10), int8(step / 10)}}, false)
			}
			select {
			case <-ctx.Done():
				return
			case <-h.clock.After(100 * time.Millisecond):
			}
		}
		jitter := JigglerInterval / 4
		next = time.Duration(JigglerInterval-jitter+rand.IntN(2*jitter+1)) * time.Second
	}
}

// DropReason says why an input message was dropped.
type DropReason int

// The reasons, as the metrics label them.
const (
	// DropMalformed: the message did not parse, or a value was out of
	// kvmd's range or unknown (a key name).
	DropMalformed DropReason = iota
	// DropForbidden: the sender may only watch (viewer role).
	DropForbidden
	numDropReasons
)

func (r DropReason) String() string {
	return [...]string{"malformed", "forbidden"}[r]
}

// Dropped counts a dropped input message.
func (h *HID) Dropped(r DropReason) { h.dropped[r].Add(1) }

// Counts are the counters the metrics show.
type Counts struct {
	// Written and Coalesced count the reports written to each device
	// and those dropped from its queue (superseded while the host was not
	// reading, or released when it went away).
	KeyboardWritten, KeyboardDropped uint64
	MouseWritten, MouseDropped       uint64
	// Dropped counts the input messages dropped, by reason.
	Dropped map[string]uint64
}

// Counts returns the counters.
func (h *HID) Counts() Counts {
	c := Counts{
		KeyboardWritten: h.kbd.written.Load(), KeyboardDropped: h.kbd.dropped.Load(),
		Dropped: map[string]uint64{},
	}
	for _, p := range h.mice {
		c.MouseWritten += p.dev.written.Load()
		c.MouseDropped += p.dev.dropped.Load()
	}
	for r := range numDropReasons {
		c.Dropped[r.String()] = h.dropped[r].Load()
	}
	return c
}
