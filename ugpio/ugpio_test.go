package ugpio

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// recLine is a line that records each level written, with the fake
// clock's time since the test began.
type recLine struct {
	mu     sync.Mutex
	clock  clockwork.Clock
	start  time.Time
	level  bool
	writes []string
	fail   error // every write fails with it when set
}

func newRecLine(c clockwork.Clock) *recLine { return &recLine{clock: c, start: c.Now()} }

func (l *recLine) Write(level bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.level = level
	l.writes = append(l.writes, fmt.Sprintf("%v@%v", level, l.clock.Since(l.start)))
	return nil
}

func (l *recLine) Read() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.level, l.fail
}

func (l *recLine) log() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.writes, " ")
}

// setup makes outputs of the lines' channels on a fake clock, closed
// when the test ends; changes counts OnChange calls.
func setup(t *testing.T, clock clockwork.FakeClock, outs ...Output) (*Outputs, *countCalls) {
	t.Helper()
	n := &countCalls{}
	o, err := New(Config{Outputs: outs, Clock: clock, OnChange: n.inc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o, n
}

type countCalls struct {
	mu sync.Mutex
	n  int
}

func (c *countCalls) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countCalls) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// advance moves the fake clock once the operation's goroutine waits on
// it.
func advance(t *testing.T, c clockwork.FakeClock, d time.Duration) {
	t.Helper()
	c.BlockUntil(1)
	c.Advance(d)
}

// waitIdle waits for channel name to leave its busy region.
func waitIdle(t *testing.T, o *Outputs, name string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !o.States()[name].Busy {
			return
		}
	}
	t.Fatalf("%s still busy", name)
}

func TestSwitch(t *testing.T) {
	clock := clockwork.NewFakeClock()
	line := newRecLine(clock)
	o, changes := setup(t, clock, DefaultOutput("relay", line))
	ctx := context.Background()

	if err := o.Switch(ctx, "relay", true, false); err != nil {
		t.Fatal(err)
	}
	// Busy from the call on, its level not read meanwhile (kvmd).
	if st := o.States()["relay"]; st != (State{Online: true, Busy: true}) {
		t.Errorf("during the switch: %+v", st)
	}
	if err := o.Switch(ctx, "relay", false, false); !errors.Is(err, ErrBusy) {
		t.Errorf("a second switch while busy: %v", err)
	}
	if err := o.Pulse(ctx, "relay", 0, false); !errors.Is(err, ErrBusy) {
		t.Errorf("a pulse while busy: %v", err)
	}
	advance(t, clock, 199*time.Millisecond)
	if !o.States()["relay"].Busy {
		t.Error("idle before its busy delay (0.2 s) ended")
	}
	advance(t, clock, time.Millisecond)
	waitIdle(t, o, "relay")
	if st := o.States()["relay"]; st != (State{Online: true, State: true}) {
		t.Errorf("after the switch: %+v", st)
	}
	if got, want := line.log(), "false@0s true@0s"; got != want {
		t.Errorf("writes %q, want %q (the initial level, then on)", got, want)
	}
	if changes.get() != 2 {
		t.Errorf("%d changes, want 2 (busy, idle)", changes.get())
	}
}

func TestPulse(t *testing.T) {
	for _, tt := range []struct {
		name  string
		delay time.Duration
		want  string
	}{
		{"default", 0, "true@0s false@100ms"},
		{"below min", time.Millisecond, "true@0s false@100ms"},
		{"within", 700 * time.Millisecond, "true@0s false@700ms"},
		{"above max", time.Hour, "true@0s false@2s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			line := newRecLine(clock)
			out := DefaultOutput("button", line)
			out.Switch, out.MaxPulse = false, 2*time.Second
			o, _ := setup(t, clock, out)
			line.writes = nil // the initial level
			done := make(chan error, 1)
			go func() { done <- o.Pulse(context.Background(), "button", tt.delay, true) }()
			advance(t, clock, min(max(tt.delay, 100*time.Millisecond), 2*time.Second)) // the pulse
			advance(t, clock, 200*time.Millisecond)                                    // the busy delay
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := line.log(); got != tt.want {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
			if err := o.Switch(context.Background(), "button", true, true); !errors.Is(err, ErrSwitchNotSupported) {
				t.Errorf("switch of a pulse-only channel: %v", err)
			}
		})
	}
}

func TestInverted(t *testing.T) {
	pin := &gpiotest.Pin{N: "TEST_INV", L: gpio.Low}
	out := DefaultOutput("inv", NewPin(pin))
	out.Inverted, out.Initial = true, false
	clock := clockwork.NewFakeClock()
	o, _ := setup(t, clock, out)
	if pin.Read() != gpio.High {
		t.Fatal("an inverted channel off at start: its pin should be high")
	}
	if st := o.States()["inv"]; st.State || !st.Online {
		t.Errorf("state %+v, want off", st)
	}
	done := make(chan error, 1)
	go func() { done <- o.Switch(context.Background(), "inv", true, true) }()
	advance(t, clock, 200*time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pin.Read() != gpio.Low || !o.States()["inv"].State {
		t.Errorf("switched on: pin %v, state %+v", pin.Read(), o.States()["inv"])
	}
}

func TestErrors(t *testing.T) {
	clock := clockwork.NewFakeClock()
	broken := newRecLine(clock)
	sw := DefaultOutput("sw", newRecLine(clock))
	sw.Pulse = 0
	konst := DefaultOutput("const", newRecLine(clock))
	konst.Switch, konst.Pulse = false, 0
	o, _ := setup(t, clock, DefaultOutput("broken", broken), sw, konst)
	broken.mu.Lock()
	broken.fail = errors.New("EIO")
	broken.mu.Unlock()
	ctx := context.Background()
	for _, tt := range []struct {
		what string
		err  error
		want error
	}{
		{"unknown switch", o.Switch(ctx, "nope", true, true), ErrNotFound},
		{"unknown pulse", o.Pulse(ctx, "nope", 0, true), ErrNotFound},
		{"pulse of a switch", o.Pulse(ctx, "sw", 0, true), ErrPulseNotSupported},
		{"switch of a constant", o.Switch(ctx, "const", true, true), ErrSwitchNotSupported},
		{"pulse of a constant", o.Pulse(ctx, "const", 0, true), ErrPulseNotSupported},
		{"a line that fails, waited for", o.Switch(ctx, "broken", true, true), ErrOffline},
	} {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.what, tt.err, tt.want)
		}
	}
	clock.Advance(time.Second) // nothing waits: the failed switch ended at once
	// Not waited for: begun, and only logged, as in kvmd.
	if err := o.Pulse(ctx, "broken", 0, false); err != nil {
		t.Errorf("a line that fails, not waited for: %v", err)
	}
	waitIdle(t, o, "broken")
	if st := o.States()["broken"]; st.Online {
		t.Errorf("a line that fails reads online: %+v", st)
	}
	if _, ok := o.Schemes()["const"]; ok {
		t.Error("a channel that can neither switch nor pulse is in the scheme")
	}
	if _, ok := o.States()["const"]; ok || !o.Has("const") {
		t.Error("a constant channel: left out of the state, but a channel")
	}
}

func TestNewRefuses(t *testing.T) {
	line := newRecLine(clockwork.NewFakeClock())
	ok := DefaultOutput("ok", line)
	bad := func(f func(*Output)) Output { o := DefaultOutput("x", line); f(&o); return o }
	for _, tt := range []struct {
		name string
		out  Output
	}{
		{"name", bad(func(o *Output) { o.Name = "a b" })},
		{"empty name", bad(func(o *Output) { o.Name = "" })},
		{"long name", bad(func(o *Output) { o.Name = strings.Repeat("a", 256) })},
		{"no line", bad(func(o *Output) { o.Line = nil })},
		{"negative busy", bad(func(o *Output) { o.BusyDelay = -1 })},
		{"busy too long", bad(func(o *Output) { o.BusyDelay = MaxDelay + 1 })},
		{"min pulse too short", bad(func(o *Output) { o.MinPulse = time.Millisecond })},
		{"max below min", bad(func(o *Output) { o.MaxPulse = 50 * time.Millisecond; o.MinPulse = 100 * time.Millisecond })},
		{"twice", ok},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := New(Config{Outputs: []Output{ok, tt.out}})
			if err == nil {
				t.Fatal("no error")
			}
			if !o.Has("ok") || len(o.Names()) != 1 {
				t.Errorf("channels %v: the good one should stay, alone", o.Names())
			}
		})
	}
	failing := &recLine{clock: clockwork.NewFakeClock(), fail: errors.New("EBUSY")}
	o, err := New(Config{Outputs: []Output{DefaultOutput("taken", failing)}})
	if err == nil || o.Has("taken") {
		t.Errorf("a line that cannot take its initial level: %v, channel kept %v", err, o.Has("taken"))
	}
}

// TestCloseEndsPulse: the daemon stopping in the middle of a pulse turns
// the channel off at once and waits for nothing; what comes after is
// refused, and no goroutine is left.
func TestCloseEndsPulse(t *testing.T) {
	before := runtime.NumGoroutine()
	clock := clockwork.NewFakeClock()
	line := newRecLine(clock)
	out := DefaultOutput("long", line)
	out.Pulse, out.MaxPulse = time.Minute, time.Minute
	o, err := New(Config{Outputs: []Output{out}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Pulse(context.Background(), "long", 0, false); err != nil {
		t.Fatal(err)
	}
	clock.BlockUntil(1)
	o.Close()
	if got, want := line.log(), "false@0s true@0s false@0s"; got != want {
		t.Errorf("writes %q, want %q", got, want)
	}
	if err := o.Switch(context.Background(), "long", true, false); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	o.Close() // twice is fine
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
	}
}

// TestWaitCanceled: a client that stops waiting leaves the operation to
// finish.
func TestWaitCanceled(t *testing.T) {
	clock := clockwork.NewFakeClock()
	line := newRecLine(clock)
	o, _ := setup(t, clock, DefaultOutput("c", line))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Pulse(ctx, "c", 0, true) }()
	clock.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	advance(t, clock, 100*time.Millisecond)
	advance(t, clock, 200*time.Millisecond)
	waitIdle(t, o, "c")
	if l, _ := line.Read(); l {
		t.Error("the pulse did not end")
	}
}

func TestSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want time.Duration
		ok   bool
	}{
		{0, 0, true}, {0.1, 100 * time.Millisecond, true}, {3600, time.Hour, true},
		{-0.1, 0, false}, {3600.5, 0, false}, {nan(), 0, false},
	} {
		got, err := Seconds(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Seconds(%v) = %v, %v", tt.in, got, err)
		}
	}
}

func nan() float64 { var z float64; return z / z }

// readTrap is a pin whose Read must not be called: periph's
// character-device lines turn an output into an input to read it.
type readTrap struct {
	*gpiotest.Pin
	t *testing.T
}

func (r readTrap) Read() gpio.Level {
	r.t.Error("the output pin was read")
	return r.Pin.Read()
}

// TestPinNeverRead: the state of an output on a pin is the level it was
// driven to, never read from the pin.
func TestPinNeverRead(t *testing.T) {
	pin := readTrap{&gpiotest.Pin{N: "TEST_TRAP"}, t}
	o, _ := setup(t, clockwork.NewFakeClock(), DefaultOutput("trap", NewPin(pin)))
	if st := o.States()["trap"]; !st.Online || st.State {
		t.Errorf("state %+v", st)
	}
	if _, err := NewPin(pin).Read(); err == nil {
		t.Error("a pin never driven reads without an error")
	}
}
