// Package devices is two of kvmd's subsystems that this daemon reads from
// the hardware (package subsystem's shape): "gpio", the board's named pins
// as GPIO channels, and "hid", the keyboard and mouse as the USB gadget and
// package hid show them, in the shapes of kvmd's GET /api/gpio and
// /api/hid and of the events of the same names on /api/ws.
//
// The shapes follow github.com/pikvm/kvmd (read at f14596e8):
// kvmd/apps/kvmd/ugpio.py, kvmd/plugins/hid/otg/__init__.py. What they
// carry comes from the hardware as package info reads it: the board's
// named pins, the USB gadget in configfs.
package devices

import (
	"context"
	"strings"
	"time"

	"kvmd/hid"
	"kvmd/hw"
	"kvmd/info"
	"kvmd/subsystem"
)

// PollEvery is how often the states are read for their changes (the
// keyboard's and mouse's are also read at once when package hid says they
// changed).
const PollEvery = 500 * time.Millisecond

// Machine is the machine's state as the daemon reads it (info.Source).
type Machine interface {
	Hardware() info.Hardware
}

// GPIO is the "gpio" subsystem: the board's named pins but the ATX
// board's, which /api/atx drives.
type GPIO struct {
	Machine Machine
	Pins    []hw.PinSpec
}

// Name is kvmd's.
func (g GPIO) Name() string { return EventGPIO }

// State is the channels' model and state now.
func (g GPIO) State(context.Context) GPIOState { return g.read(g.Machine.Hardware()) }

// Watch publishes each change of the state until ctx ends.
func (g GPIO) Watch(ctx context.Context, publish func(GPIOState)) {
	subsystem.Poll[GPIOState, GPIOState]{Every: PollEvery, Changes: subsystem.IfChanged[GPIOState],
		Read: g.State}.Run(ctx, publish)
}

// Channels are the pins shown as GPIO channels: every named pin but the
// ATX board's.
func (g GPIO) Channels() []hw.PinSpec {
	var out []hw.PinSpec
	for _, p := range g.Pins {
		if !strings.HasPrefix(p.Name, "atx_") {
			out = append(out, p)
		}
	}
	return out
}

// HasChannel says whether name is a GPIO channel, for /api/gpio/switch
// and /pulse.
func (g GPIO) HasChannel(name string) bool {
	for _, p := range g.Channels() {
		if p.Name == name {
			return true
		}
	}
	return false
}

// GPIOState is kvmd's /api/gpio result.
type GPIOState struct {
	Model struct {
		Scheme struct {
			Inputs  map[string]scheme `json:"inputs"`
			Outputs map[string]scheme `json:"outputs"`
		} `json:"scheme"`
		View struct {
			Header struct {
				Title []viewItem `json:"title"`
			} `json:"header"`
			Table [][]viewItem `json:"table"`
		} `json:"view"`
	} `json:"model"`
	State struct {
		Inputs  map[string]inputState `json:"inputs"`
		Outputs map[string]inputState `json:"outputs"`
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
	Color   string `json:"color,omitempty"`
}

type inputState struct {
	Online bool `json:"online"`
	State  bool `json:"state"`
}

// read returns the channels' model and state. Every channel is an input
// here: the daemon only watches the board's pins (hw.ReadPins), it never
// drives one it was not told is safe to drive, so switch and pulse are
// refused for all of them. A pin that cannot be read is offline.
func (gp GPIO) read(h info.Hardware) GPIOState {
	var g GPIOState
	g.Model.Scheme.Inputs = map[string]scheme{}
	g.Model.Scheme.Outputs = map[string]scheme{}
	g.State.Inputs = map[string]inputState{}
	g.State.Outputs = map[string]inputState{}
	g.Model.View.Header.Title = []viewItem{{Type: "label", Text: "GPIO"}}
	g.Model.View.Table = [][]viewItem{}
	for _, p := range gp.Channels() {
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

// HID is the "hid" subsystem: the gadget's keyboard and mouse functions,
// and the keyboard and mouse as package hid drives them. Make it with
// NewHID.
type HID struct {
	Machine Machine
	// Live, when set, is the keyboard and mouse as the daemon drives them
	// (package hid): whether the host takes their reports, the
	// keyboard's LEDs, a print under way, the jiggler.
	Live interface{ State() hid.State }
	wake chan struct{}
}

// NewHID returns the "hid" subsystem of m's gadget; set Live before its
// Watch runs.
func NewHID(m Machine) *HID { return &HID{Machine: m, wake: make(chan struct{}, 1)} }

// Name is kvmd's.
func (h *HID) Name() string { return EventHID }

// State is the keyboard's and mouse's state now.
func (h *HID) State(context.Context) HIDState { return h.read(h.Machine.Hardware()) }

// Changed makes Watch read the state at once (package hid's OnChange: the
// LEDs changed, a device went on- or offline).
func (h *HID) Changed() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Watch publishes each change of the state until ctx ends.
func (h *HID) Watch(ctx context.Context, publish func(HIDState)) {
	subsystem.Poll[HIDState, HIDState]{Every: PollEvery, Wake: h.wake, Changes: subsystem.IfChanged[HIDState],
		Read: h.State}.Run(ctx, publish)
}

// read reports the gadget's keyboard and mouse functions: enabled when a
// configuration links one, online when a host configured the gadget.
// connected is the host's state (kvmd leaves it null on its OTG HID: it
// cannot tell). With Live, a device is online only while the host takes
// its reports (kvmd's OTG HID: a write that fails or times out makes it
// offline), and the LEDs, busy and the jiggler are the live ones. The
// outputs are kvmd's OTG HID's: the keyboard has none to choose from; the
// mouse has usb and usb_rel when the gadget has both mice (Live says
// which), and mouse.absolute and online are the chosen one's.
func (h *HID) read(m info.Hardware) HIDState {
	var st HIDState
	st.Keyboard.Outputs.Available, st.Mouse.Outputs.Available = []string{}, []string{}
	st.Jiggler.Interval = hid.JigglerInterval
	var live *hid.State
	if h.Live != nil {
		l := h.Live.State()
		live = &l
		st.Jiggler.Enabled = l.Jiggler.Enabled
		st.Busy = l.Busy
		st.Jiggler.Active = l.Jiggler.Active
		st.Keyboard.Leds.Caps, st.Keyboard.Leds.Scroll, st.Keyboard.Leds.Num = l.Keyboard.LEDs.Caps, l.Keyboard.LEDs.Scroll, l.Keyboard.LEDs.Num
		if len(l.Mouse.Outputs) > 0 {
			st.Mouse.Outputs.Available, st.Mouse.Outputs.Active = l.Mouse.Outputs, l.Mouse.Output
		}
	}
	u := m.USB
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
)
