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
	"kvmd/msd"
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

// TestMSD: the MSD's state is package msd's; without one, kvmd's disabled
// MSD (plugins/msd/disabled.py), whatever the gadget holds.
func TestMSD(t *testing.T) {
	s := &Source{Hardware: func() info.Hardware { return info.Hardware{USB: pikvmUSB("configured")} }}
	if got := jsonOf(t, s.State(EventMSD)); got != `{"enabled":false,"online":false,"busy":false,"storage":null,"drive":null}` {
		t.Errorf("no MSD: %s", got)
	}
	s.MSD = func() msd.State { return msd.State{Enabled: true} }
	if got := jsonOf(t, s.State(EventMSD)); got != `{"enabled":true,"online":false,"busy":false,"storage":null,"drive":null}` {
		t.Errorf("from the MSD: %s", got)
	}
}

func TestHID(t *testing.T) {
	s := &Source{}
	got := jsonOf(t, s.HID(info.Hardware{USB: pikvmUSB("configured")}))
	want := `{"enabled":true,"online":true,"busy":false,"connected":true,"keyboard":{"online":true,"leds":{"caps":false,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":true,"absolute":true,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("configured:\ngot  %s\nwant %s", got, want)
	}
	got = jsonOf(t, s.HID(info.Hardware{USB: pikvmUSB("not attached")}))
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
	ls := &Source{HIDLive: func() hid.State { return live }}
	got = jsonOf(t, ls.HID(info.Hardware{USB: pikvmUSB("configured")}))
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
	got = jsonOf(t, ls.HID(info.Hardware{USB: pikvmUSB("configured")}))
	want = `{"enabled":true,"online":true,"busy":false,"connected":true,"keyboard":{"online":true,"leds":{"caps":false,"scroll":true,"num":true},"outputs":{"available":[],"active":""}},"mouse":{"online":true,"absolute":false,"outputs":{"available":["usb","usb_rel"],"active":"usb_rel"}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("usb_rel:\ngot  %s\nwant %s", got, want)
	}
	got = jsonOf(t, s.HID(info.Hardware{}))
	want = `{"enabled":false,"online":false,"busy":false,"connected":null,"keyboard":{"online":false,"leds":{"caps":false,"scroll":false,"num":false},"outputs":{"available":[],"active":""}},"mouse":{"online":false,"absolute":false,"outputs":{"available":[],"active":""}},"jiggler":{"enabled":false,"active":false,"interval":60}}`
	if got != want {
		t.Errorf("no gadget:\ngot  %s\nwant %s", got, want)
	}
}

func TestGPIO(t *testing.T) {
	s := &Source{Pins: []hw.PinSpec{
		{Name: "atx_power_led", GPIO: "GPIO24"},
		{Name: "v4_locator", GPIO: "GPIO12"},
		{Name: "hid_reset", GPIO: "GPIO25", ActiveLow: true},
	}}
	h := info.Hardware{GPIO: map[string]hw.PinState{
		"atx_power_led": {GPIO: "GPIO24", Direction: ref("in"), Level: ref(true)},
		"v4_locator":    {GPIO: "GPIO12", Direction: ref("out"), Level: ref(true)},
		"hid_reset":     {GPIO: "GPIO25", ActiveLow: true},
	}}
	got := jsonOf(t, s.GPIO(h))
	want := `{"model":{"scheme":{"inputs":{"hid_reset":{"hw":{"driver":"__gpio__","pin":"25"}},"v4_locator":{"hw":{"driver":"__gpio__","pin":"12"}}},"outputs":{}},` +
		`"view":{"header":{"title":[{"type":"label","text":"GPIO"}]},"table":[[{"type":"input","channel":"v4_locator","color":"green"},{"type":"label","text":"v4_locator"}],[{"type":"input","channel":"hid_reset","color":"green"},{"type":"label","text":"hid_reset"}]]}},` +
		`"state":{"inputs":{"hid_reset":{"online":false,"state":false},"v4_locator":{"online":true,"state":true}},"outputs":{}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestWatch: a change is published once, with its event type; an
// unchanged state is not.
func TestWatch(t *testing.T) {
	var mu sync.Mutex
	usb := pikvmUSB("not attached")
	s := &Source{Hardware: func() info.Hardware {
		mu.Lock()
		defer mu.Unlock()
		return info.Hardware{USB: usb}
	}}
	got := make(chan string, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Watch(ctx, 5*time.Millisecond, func(typ string, st any) { got <- typ })
		close(done)
	}()
	defer func() { cancel(); <-done }()
	time.Sleep(30 * time.Millisecond)
	select {
	case typ := <-got:
		t.Fatalf("published %s with nothing changed", typ)
	default:
	}
	mu.Lock()
	usb = pikvmUSB("configured")
	mu.Unlock()
	// The host connects: hid changes (online, connected); msd, without
	// a drive, stays disabled.
	seen := map[string]bool{}
	timeout := time.After(3 * time.Second)
	for len(seen) < 1 {
		select {
		case typ := <-got:
			if seen[typ] {
				t.Errorf("%s published twice", typ)
			}
			seen[typ] = true
		case <-timeout:
			t.Fatalf("published %v, want hid", seen)
		}
	}
	time.Sleep(30 * time.Millisecond)
	for len(got) > 0 {
		seen[<-got] = true
	}
	if !seen["hid"] || len(seen) != 1 {
		t.Errorf("published %v, want hid only", seen)
	}
}
