// Package hidtest stands in for the USB host at the far side of the
// gadget's HID functions, where there is no gadget (tests, the demo): each
// function's node is one end of a SOCK_SEQPACKET socketpair, which keeps
// every report a message, answers EAGAIN when its buffer is full (a host
// that does not read) and EPIPE when the host's end is closed (a host that
// is gone), as a hidg node answers EAGAIN and ESHUTDOWN.
//
// Only tests and the demo build import it.
package hidtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/gadget"
	"kvmd/hid"
)

// Host is the stand-in host. The zero value is not usable: use NewHost.
type Host struct {
	mu     sync.Mutex
	ends   map[string]*os.File
	opened chan string
	gone   map[string]bool
	closed bool
}

// NewHost returns a host with every function plugged in.
func NewHost() *Host {
	return &Host{ends: map[string]*os.File{}, opened: make(chan string, 64), gone: map[string]bool{}}
}

// ErrUnplugged is what Open answers for an unplugged function.
var ErrUnplugged = errors.New("hidtest: unplugged")

// Open is hid.Config.Open: a new connection to the host for function.
func (h *Host) Open(function string, _ bool) (hid.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone[function] || h.closed {
		return nil, ErrUnplugged
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if old := h.ends[function]; old != nil {
		old.Close()
	}
	h.ends[function] = os.NewFile(uintptr(fds[1]), "host-"+function)
	select {
	case h.opened <- function:
	default:
	}
	return os.NewFile(uintptr(fds[0]), "dev-"+function), nil
}

func (h *Host) end(function string, wait time.Duration) (*os.File, error) {
	deadline := time.Now().Add(wait)
	for {
		h.mu.Lock()
		f := h.ends[function]
		h.mu.Unlock()
		if f != nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("hidtest: %s is not open", function)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Read returns the next report the host gets from function, waiting at
// most timeout (os.ErrDeadlineExceeded then).
func (h *Host) Read(function string, timeout time.Duration) ([]byte, error) {
	f, err := h.end(function, timeout)
	if err != nil {
		return nil, err
	}
	f.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// ReadAll returns the reports that come until none has for quiet.
func (h *Host) ReadAll(function string, quiet time.Duration) [][]byte {
	var out [][]byte
	for {
		r, err := h.Read(function, quiet)
		if err != nil {
			return out
		}
		out = append(out, r)
	}
}

// SetLEDs sends the keyboard function the host's LED output report.
func (h *Host) SetLEDs(function string, bits byte) error {
	f, err := h.end(function, time.Second)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{bits})
	return err
}

// Unplug takes function away: its connection closes and it cannot be
// opened until Plug.
func (h *Host) Unplug(function string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone[function] = true
	if f := h.ends[function]; f != nil {
		f.Close()
		h.ends[function] = nil
	}
}

// Plug lets function be opened again.
func (h *Host) Plug(function string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.gone, function)
}

// Close closes every connection.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for fn, f := range h.ends {
		if f != nil {
			f.Close()
		}
		delete(h.ends, fn)
	}
}

// Keys describes a boot keyboard report: the modifiers' and keys' names
// held, "" when none is.
func Keys(report []byte) string {
	if len(report) != hid.KeyboardReportLen {
		return fmt.Sprintf("(%d bytes)", len(report))
	}
	var names []string
	for _, k := range hid.Keys() {
		if k.Modifier() && report[0]&(1<<(k.Usage-0xe0)) != 0 {
			names = append(names, k.Name)
		}
	}
	for _, u := range report[2:] {
		if u == 0 {
			continue
		}
		for _, k := range hid.Keys() {
			if k.Usage == u {
				names = append(names, k.Name)
			}
		}
	}
	return strings.Join(names, "+")
}

// Gadget writes, below root, the configfs attributes of kvmd's keyboard
// and absolute mouse functions that package hid reads (protocol,
// report_length; the mouse's report of mouseLen bytes: 6, or 7 with the
// horizontal wheel).
func Gadget(root string, mouseLen int) error {
	return functions(root, map[string]map[string]string{
		gadget.Keyboard: {"protocol": "1", "subclass": "1", "report_length": "8"},
		gadget.Mouse:    {"protocol": "0", "subclass": "0", "report_length": fmt.Sprint(mouseLen)},
	})
}

// GadgetMouseAlt adds kvmd otg's second mouse to a Gadget: the relative
// boot mouse, its report of reportLen bytes (4, or 5 with the horizontal
// wheel).
func GadgetMouseAlt(root string, reportLen int) error {
	return functions(root, map[string]map[string]string{
		gadget.MouseAlt: {"protocol": "2", "subclass": "1", "report_length": fmt.Sprint(reportLen)},
	})
}

// functions writes the attributes of functions below root.
func functions(root string, fns map[string]map[string]string) error {
	for fn, attrs := range fns {
		dir := filepath.Join(root, filepath.FromSlash(gadget.FunctionDir(fn)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for k, v := range attrs {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
