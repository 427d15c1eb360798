// Package devices gives the state of kvmd's subsystems that this daemon
// can read (GPIO channels, HID, MSD) in the shapes of kvmd's GET
// /api/gpio, /api/hid, /api/msd and of the events of the same names on
// /api/ws, and reports their changes. The streamer's state is package
// streamer's.
//
// The shapes follow github.com/pikvm/kvmd (read at f14596e8):
// kvmd/apps/kvmd/ugpio.py, kvmd/plugins/hid/otg/__init__.py,
// kvmd/plugins/msd/disabled.py. What they carry comes from the hardware
// as package info reads it: the board's named pins, the USB gadget in
// configfs; the MSD's from package msd.
package devices

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"kvmd/hid"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/msd"
	"kvmd/ugpio"
)

// Source builds the states from the machine's hardware.
type Source struct {
	// Hardware returns the machine's state (info.Source.Hardware).
	Hardware func() info.Hardware
	// Pins are the board's named pins: the ones not of the ATX board are
	// GPIO channels.
	Pins []hw.PinSpec
	// HIDLive, when set, is the keyboard and mouse as the daemon drives
	// them (package hid): whether the host takes their reports, the
	// keyboard's LEDs, a print under way, the jiggler.
	HIDLive func() hid.State
	// Wake, when set, makes Watch compare the states at once (the HID's
	// LEDs changed) rather than at its next tick.
	Wake <-chan struct{}
	// MSD gives the virtual media's state (package msd's Manager, which
	// publishes its own changes); nil: kvmd's disabled MSD.
	MSD func() msd.State
	// Outputs, when set, are the GPIO output channels (package ugpio's
	// Outputs).
	Outputs interface {
		Schemes() map[string]ugpio.Scheme
		States() map[string]ugpio.State
	}
}

// Channels are the pins shown as GPIO channels: every named pin but the
// ATX board's, which /api/atx drives.
func (s *Source) Channels() []hw.PinSpec {
	var out []hw.PinSpec
	for _, p := range s.Pins {
		if !strings.HasPrefix(p.Name, "atx_") {
			out = append(out, p)
		}
	}
	return out
}

// GPIOState is kvmd's /api/gpio result.
type GPIOState struct {
	Model struct {
		Scheme struct {
			Inputs  map[string]scheme       `json:"inputs"`
			Outputs map[string]ugpio.Scheme `json:"outputs"`
		} `json:"scheme"`
		View struct {
			Header struct {
				Title []viewItem `json:"title"`
			} `json:"header"`
			Table [][]viewItem `json:"table"`
		} `json:"view"`
	} `json:"model"`
	State struct {
		Inputs  map[string]inputState  `json:"inputs"`
		Outputs map[string]ugpio.State `json:"outputs"`
	} `json:"state"`
}

type scheme struct {
	HW struct {
		Driver string `json:"driver"`
		Pin    string `json:"pin"`
	} `json:"hw"`
}

type viewItem struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Channel string `json:"channel,omitempty"`
	// Confirm and Hide are an output's (kvmd's __make_item_output).
	Confirm *bool  `json:"confirm,omitempty"`
	Hide    *bool  `json:"hide,omitempty"`
	Color   string `json:"color,omitempty"`
}

type inputState struct {
	Online bool `json:"online"`
	State  bool `json:"state"`
}

// GPIO returns the channels' model and state. The board's pins are
// inputs: the daemon only watches them (hw.ReadPins), and a pin that
// cannot be read is offline. The outputs are the configuration's
// (Source.Outputs, package ugpio), each a row of the view's table but
// kvmd's __wol__, for which PiKVM's page has a button of its own.
func (s *Source) GPIO(h info.Hardware) GPIOState {
	var g GPIOState
	g.Model.Scheme.Inputs = map[string]scheme{}
	g.Model.Scheme.Outputs = map[string]ugpio.Scheme{}
	g.State.Inputs = map[string]inputState{}
	g.State.Outputs = map[string]ugpio.State{}
	g.Model.View.Header.Title = []viewItem{{Type: "label", Text: "GPIO"}}
	g.Model.View.Table = [][]viewItem{}
	for _, p := range s.Channels() {
		var sc scheme
		sc.HW.Driver = "__gpio__" // kvmd's name for its built-in driver
		sc.HW.Pin = strings.TrimPrefix(p.GPIO, "GPIO")
		g.Model.Scheme.Inputs[p.Name] = sc
		var st inputState
		if ps, ok := h.GPIO[p.Name]; ok && ps.Level != nil {
			st = inputState{Online: true, State: *ps.Level}
		}
		g.State.Inputs[p.Name] = st
		g.Model.View.Table = append(g.Model.View.Table, []viewItem{
			{Type: "input", Channel: p.Name, Color: "green"},
			{Type: "label", Text: p.Name},
		})
	}
	if s.Outputs != nil {
		g.Model.Scheme.Outputs = s.Outputs.Schemes()
		g.State.Outputs = s.Outputs.States()
		names := make([]string, 0, len(g.Model.Scheme.Outputs))
		for name := range g.Model.Scheme.Outputs {
			if name != ugpio.WoLChannel {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		no := false
		for _, name := range names {
			g.Model.View.Table = append(g.Model.View.Table, []viewItem{
				{Type: "output", Channel: name, Text: "Click", Confirm: &no, Hide: &no},
				{Type: "label", Text: name},
			})
		}
	}
	return g
}

// HIDState is kvmd's /api/hid result.
type HIDState struct {
	Enabled   bool  `json:"enabled"`
	Online    bool  `json:"online"`
	Busy      bool  `json:"busy"`
	Connected *bool `json:"connected"`
	Keyboard  struct {
		Online bool `json:"online"`
		Leds   struct {
			Caps   bool `json:"caps"`
			Scroll bool `json:"scroll"`
			Num    bool `json:"num"`
		} `json:"leds"`
		Outputs outputs `json:"outputs"`
	} `json:"keyboard"`
	Mouse struct {
		Online   bool    `json:"online"`
		Absolute bool    `json:"absolute"`
		Outputs  outputs `json:"outputs"`
	} `json:"mouse"`
	Jiggler struct {
		Enabled  bool `json:"enabled"`
		Active   bool `json:"active"`
		Interval int  `json:"interval"`
	} `json:"jiggler"`
}

type outputs struct {
	Available []string `json:"available"`
	Active    string   `json:"active"`
}

// HID reports the gadget's keyboard and mouse functions: enabled when a
// configuration links one, online when a host configured the gadget.
// connected is the host's state (kvmd leaves it null on its OTG HID: it
// cannot tell). With HIDLive, a device is online only while the host
// takes its reports (kvmd's OTG HID: a write that fails or times out
// makes it offline), and the LEDs, busy and the jiggler are the live
// ones. The outputs are kvmd's OTG HID's: the keyboard has none to choose
// from; the mouse has usb and usb_rel when the gadget has both mice
// (HIDLive says which), and mouse.absolute and online are the chosen
// one's.
func (s *Source) HID(h info.Hardware) HIDState {
	var st HIDState
	st.Keyboard.Outputs.Available, st.Mouse.Outputs.Available = []string{}, []string{}
	st.Jiggler.Interval = hid.JigglerInterval
	var live *hid.State
	if s.HIDLive != nil {
		l := s.HIDLive()
		live = &l
		st.Jiggler.Enabled = l.Jiggler.Enabled
		st.Busy = l.Busy
		st.Jiggler.Active = l.Jiggler.Active
		st.Keyboard.Leds.Caps, st.Keyboard.Leds.Scroll, st.Keyboard.Leds.Num = l.Keyboard.LEDs.Caps, l.Keyboard.LEDs.Scroll, l.Keyboard.LEDs.Num
		if len(l.Mouse.Outputs) > 0 {
			st.Mouse.Outputs.Available, st.Mouse.Outputs.Active = l.Mouse.Outputs, l.Mouse.Output
		}
	}
	u := h.USB
	if u == nil || u.Gadget == nil {
		return st
	}
	var kbd, mouse bool
	for _, f := range u.Gadget.Functions {
		if f.Type == "hid" && f.Enabled {
			kbd = kbd || f.Kind == "keyboard"
			mouse = mouse || f.Kind == "mouse"
		}
	}
	st.Enabled = kbd || mouse
	if !st.Enabled {
		return st
	}
	c := u.Connected
	st.Connected = &c
	st.Online = c
	st.Keyboard.Online = kbd && c && (live == nil || live.Keyboard.Online)
	st.Mouse.Online = mouse && c && (live == nil || live.Mouse.Online)
	// PiKVM's gadget mouse is absolute (usb-hid's report descriptor with
	// protocol 0); hw names it "mouse" either way.
	st.Mouse.Absolute = mouse && (live == nil || live.Mouse.Format.Absolute)
	return st
}

// Event types, kvmd's names (kvmd/apps/kvmd/server.py).
const (
	EventGPIO = "gpio"
	EventHID  = "hid"
	EventMSD  = "msd"
)

// State returns the state of one event type.
func (s *Source) State(eventType string) any { return s.state(s.Hardware(), eventType) }

func (s *Source) state(h info.Hardware, eventType string) any {
	switch eventType {
	case EventGPIO:
		return s.GPIO(h)
	case EventHID:
		return s.HID(h)
	case EventMSD:
		if s.MSD != nil {
			return s.MSD()
		}
		return msd.Disabled()
	}
	return nil
}

// Watch reads the states every interval until ctx ends and calls publish
// with each one that changed. The MSD's, when there is one, is left to
// its own watcher (msd.Manager.Run).
func (s *Source) Watch(ctx context.Context, interval time.Duration, publish func(eventType string, state any)) {
	types := []string{EventGPIO, EventHID}
	if s.MSD == nil {
		types = append(types, EventMSD)
	}
	prev := map[string][]byte{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		h := s.Hardware()
		for _, typ := range types {
			st := s.state(h, typ)
			b, _ := json.Marshal(st)
			if old, ok := prev[typ]; ok && !bytes.Equal(old, b) {
				publish(typ, st)
			}
			prev[typ] = b
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.Wake:
		}
	}
}
