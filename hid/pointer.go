package hid

import (
	"context"
	"fmt"
)

// The mouse outputs, kvmd's names (kvmd/plugins/hid/otg/__init__.py):
// the absolute mouse and the relative one.
const (
	OutputAbsolute = "usb"
	OutputRelative = "usb_rel"
)

// pointer is one of the gadget's mice: its function, the device that
// writes its reports and what the host has been told of it.
type pointer struct {
	function string
	dev      *device
	// state is guarded by dev.mu.
	state mouse
	// known is set while the function's attributes read as one of kvmd's
	// layouts (state.format is then the function's).
	known bool // guarded by dev.mu
}

// newPointer makes the mouse of function, named name in the log, its
// format read from configfs (def until it can be).
func (h *HID) newPointer(name, function string, def MouseFormat) *pointer {
	p := &pointer{function: function}
	p.state.format = def
	if f, err := h.mouseFormat(function); err == nil {
		p.state.format, p.known = f, true
	}
	p.dev = newDevice(name, h.cfg.QueueLen, func() (File, error) { return h.openPointer(p) }, h.log, h.changed)
	p.dev.clearState = p.state.clear
	return p
}

// openPointer opens p's node once its attributes say which layout it has.
func (h *HID) openPointer(p *pointer) (File, error) {
	f, err := h.mouseFormat(p.function)
	p.dev.mu.Lock()
	was := p.known
	p.known = err == nil
	if err == nil && p.state.format != f {
		p.state = mouse{format: f}
	}
	p.dev.mu.Unlock()
	if was != (err == nil) {
		h.changed() // the outputs to choose from changed
	}
	if err != nil {
		return nil, err
	}
	return h.openNode(p.function, true)
}

func (h *HID) mouseFormat(function string) (MouseFormat, error) {
	proto, err := h.attr(function, "protocol")
	if err != nil {
		return MouseFormat{}, err
	}
	n, err := h.attr(function, "report_length")
	if err != nil {
		return MouseFormat{}, err
	}
	f, err := MouseFormatFor(proto, n)
	if err != nil {
		return MouseFormat{}, fmt.Errorf("%w: %w", ErrNoFunction, err)
	}
	return f, nil
}

// format returns p's format and whether its function is known.
func (p *pointer) format() (MouseFormat, bool) {
	p.dev.mu.Lock()
	defer p.dev.mu.Unlock()
	return p.state.format, p.known
}

// send applies change to p's state and queues the reports it gives.
func (p *pointer) send(change func(m *mouse) [][]byte) {
	p.dev.send(context.Background(), false, 0, 0, func() [][]byte { return change(&p.state) })
}

// outputs returns the mouse outputs to choose from and the index of the
// mouse each names: both when the gadget has two known mice, one absolute
// and one relative (kvmd's mouse and mouse_alt); none otherwise, as kvmd
// without a mouse_alt.
func (h *HID) outputs() map[string]int {
	f0, ok0 := h.mice[0].format()
	f1, ok1 := h.mice[1].format()
	if !ok0 || !ok1 || f0.Absolute == f1.Absolute {
		return nil
	}
	if f0.Absolute {
		return map[string]int{OutputAbsolute: 0, OutputRelative: 1}
	}
	return map[string]int{OutputAbsolute: 1, OutputRelative: 0}
}

// pointer returns the mouse that input goes to: the chosen one while
// there is a choice, else the gadget's first.
func (h *HID) pointer() *pointer {
	if i := h.current.Load(); i != 0 && h.outputs() != nil {
		return h.mice[i]
	}
	return h.mice[0]
}

// SetMouseOutput sends the pointer's input to the mouse of the named
// output (OutputAbsolute or OutputRelative), as kvmd's set_params does:
// the buttons held by the mouse left are released, and the jiggler moves
// the new one its way. An output the gadget does not have, or the one
// already chosen, changes nothing.
func (h *HID) SetMouseOutput(name string) {
	h.outputMu.Lock()
	defer h.outputMu.Unlock()
	i, ok := h.outputs()[name]
	old := h.pointer()
	if !ok || h.mice[i] == old {
		return
	}
	old.dev.clear()
	h.current.Store(int32(i))
	h.changed()
}

// mouseOutputs returns the state's outputs: those to choose from, in
// kvmd's order, and the one chosen; none and "" without a choice.
func (h *HID) mouseOutputs() ([]string, string) {
	outs := h.outputs()
	if outs == nil {
		return []string{}, ""
	}
	f, _ := h.pointer().format()
	if f.Absolute {
		return []string{OutputAbsolute, OutputRelative}, OutputAbsolute
	}
	return []string{OutputAbsolute, OutputRelative}, OutputRelative
}
