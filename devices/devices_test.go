package devices

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"kvmd/hid"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/subsystem"
)

func ref[T any](v T) *T { return &v }

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pikvmUSB is the gadget kvmd-otg makes (hw's gadget tests read it from a
// configfs tree): keyboard, mouse, CD-ROM with an image.
func pikvmUSB(state string) *hw.USB {
	return &hw.USB{
		UDC: ref("fe980000.usb"), State: ref(state), Connected: state == "configured", Status: hw.USBOK,
		Gadget: &hw.Gadget{Name: "kvmd", Functions: []hw.Function{
			{Name: "hid.usb0", Type: "hid", Kind: "keyboard", Enabled: true},
			{Name: "hid.usb1", Type: "hid", Kind: "mouse", Enabled: true},
			{Name: "mass_storage.usb0", Type: "mass_storage", Kind: "cdrom",
				Image: ref("/var/lib/kvmd/msd/images/debian-12.iso"), ReadOnly: ref(true), Enabled: true},
		}},
	}
}

// machine is a Machine of fixed hardware.
type machine struct {
	mu sync.Mutex
	h  info.Hardware
}

func (m *machine) Hardware() info.Hardware {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.h
}

func (m *machine) set(h info.Hardware) {
	m.mu.Lock()
	m.h = h
	m.mu.Unlock()
}

// liveHID is a keyboard and mouse's live state.
type liveHID hid.State

func (l liveHID) State() hid.State { return hid.State(l) }

func TestHID(t *testing.T) {
	s := NewHID(nil)
	got := jsonOf(t, s.read(info.Hardware{USB: pikvmUSB("configured")}))
	want := `{"enabled":true,"online":true,"busy":false,"connected":true,"keyboard":{"online":true,"leds":{"caps":false,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":true,"absolute":true,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("configured:\ngot  %s\nwant %s", got, want)
	}
	got = jsonOf(t, s.read(info.Hardware{USB: pikvmUSB("not attached")}))
	want = `{"enabled":true,"online":false,"busy":false,"connected":false,"keyboard":{"online":false,"leds":{"caps":false,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":false,"absolute":true,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("not attached:\ngot  %s\nwant %s", got, want)
	}
	// The live state: the host stopped reading the mouse, caps lock is on,
	// a print is typing, the jiggler is on.
	var live hid.State
	live.Keyboard.Online = true
	live.Keyboard.LEDs.Caps = true
	live.Mouse.Format = hid.MouseFormat{Absolute: true}
	live.Busy = true
	live.Jiggler = hid.Jiggler{Enabled: true, Active: true, Interval: 60}
	ls := NewHID(&machine{h: info.Hardware{USB: pikvmUSB("configured")}})
	ls.Live = liveHID(live)
	got = jsonOf(t, ls.State(context.Background()))
	want = `{"enabled":true,"online":true,"busy":true,"connected":true,"keyboard":{"online":true,"leds":{"caps":true,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":false,"absolute":true,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":true,"active":true,"interval":60}}`
	if got != want {
		t.Errorf("live:\ngot  %s\nwant %s", got, want)
	}
	// Both mice, the relative one chosen; the host set Num and Scroll Lock.
	live = hid.State{}
	live.Keyboard.Online = true
	live.Keyboard.LEDs = hid.LEDs{Num: true, Scroll: true}
	live.Mouse.Online = true
	live.Mouse.Format = hid.MouseFormat{Absolute: false}
	live.Mouse.Outputs, live.Mouse.Output = []string{hid.OutputAbsolute, hid.OutputRelative}, hid.OutputRelative
	ls.Live = liveHID(live)
	got = jsonOf(t, ls.State(context.Background()))
	want = `{"enabled":true,"online":true,"busy":false,"connected":true,"keyboard":{"online":true,"leds":{"caps":false,"scroll":true,"num":true},"outputs":{"available":[],"active":""}},"mouse":{"online":true,"absolute":false,"outputs":{"available":["usb","usb_rel"],"active":"usb_rel"}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("usb_rel:\ngot  %s\nwant %s", got, want)
	}
	got = jsonOf(t, s.read(info.Hardware{}))
	want = `{"enabled":false,"online":false,"busy":false,"connected":null,"keyboard":{"online":false,"leds":{"caps":false,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":false,"absolute":false,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("no gadget:\ngot  %s\nwant %s", got, want)
	}
}

func TestGPIO(t *testing.T) {
	s := GPIO{Pins: []hw.PinSpec{
		{Name: "atx_power_led", GPIO: "GPIO24"},
		{Name: "v4_locator", GPIO: "GPIO12"},
		{Name: "hid_reset", GPIO: "GPIO25", ActiveLow: true},
	}}
	h := info.Hardware{GPIO: map[string]hw.PinState{
		"atx_power_led": {GPIO: "GPIO24", Direction: ref("in"), Level: ref(true)},
		"v4_locator":    {GPIO: "GPIO12", Direction: ref("out"), Level: ref(true)},
		"hid_reset":     {GPIO: "GPIO25", ActiveLow: true},
	}}
	got := jsonOf(t, s.read(h))
	if !s.HasChannel("v4_locator") || s.HasChannel("atx_power_led") || s.HasChannel("nope") {
		t.Error("HasChannel: the ATX board's pin is no channel, the others are")
	}
	want := `{"model":{"scheme":{"inputs":{"hid_reset":{"hw":{"driver":"__gpio__","pin":"25"}},"v4_locator":{"hw":{"driver":"__gpio__","pin":"12"}}},"outputs":{}},` +
		`"view":{"header":{"title":[{"type":"label","text":"GPIO"}]},"table":[[{"type":"input","channel":"v4_locator","color":"green"},{"type":"label","text":"v4_locator"}],[{"type":"input","channel":"hid_reset","color":"green"},{"type":"label","text":"hid_reset"}]]}},` +
		`"state":{"inputs":{"hid_reset":{"online":false,"state":false},"v4_locator":{"online":true,"state":true}},"outputs":{}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestWatch: a change is published once, by the subsystem it is of; an
// unchanged state is not; the keyboard's Changed reads at once.
func TestWatch(t *testing.T) {
	m := &machine{h: info.Hardware{USB: pikvmUSB("not attached")}}
	type event struct {
		typ string
		st  any
	}
	got := make(chan event, 10)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hs := NewHID(m)
	for _, s := range []subsystem.Subsystem{subsystem.Of[GPIOState](GPIO{Machine: m}), subsystem.Of[HIDState](hs)} {
		wg.Go(func() { s.Watch(ctx, func(st any) { got <- event{s.Name(), st} }) })
	}
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(30 * time.Millisecond)
	select {
	case ev := <-got:
		t.Fatalf("published %s with nothing changed", ev.typ)
	default:
	}
	// The host connects: hid changes (online, connected); the GPIO
	// channels do not. Changed makes it seen well before the next poll.
	m.set(info.Hardware{USB: pikvmUSB("configured")})
	hs.Changed()
	select {
	case ev := <-got:
		if st, ok := ev.st.(HIDState); ev.typ != EventHID || !ok || !st.Online {
			t.Errorf("published %s %+v, want hid online", ev.typ, ev.st)
		}
	case <-time.After(PollEvery / 2):
		t.Fatal("no event within half a poll of Changed")
	}
	time.Sleep(30 * time.Millisecond)
	if len(got) > 0 {
		t.Errorf("published %s too", (<-got).typ)
	}
}
