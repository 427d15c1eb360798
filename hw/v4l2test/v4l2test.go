// Package v4l2test is a fake hw.V4L2: video capture devices, bridge
// sub-devices and media devices whose answers a test or a demo sets and
// changes while the daemon runs.
package v4l2test

import (
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"kvmd/hw"
)

// Device is the state of a fake node: a video node, a sub-device node or
// a media device node.
type Device struct {
	// Timings and Err answer DVTimings: Err (hw.ErrNoSignal,
	// hw.ErrNoLock, hw.ErrOutOfRange, hw.ErrNotSupported, ...) when set,
	// else Timings.
	Timings hw.Timings
	Err     error
	// Fmt and FmtErr answer Format the same way.
	Fmt    hw.Format
	FmtErr error
	// Topology and TopoErr answer Topology, for a media device node. A
	// node without either has no graph: hw.ErrNotSupported.
	Topology *hw.Topology
	TopoErr  error
}

// Fake is a set of nodes by name: the path the caller passes
// ("/tmp/root/dev/video0"), or its last element ("video0",
// "v4l-subdev2", "media0"), which matches under any FS root. A node it
// does not hold does not exist. The zero Fake holds no node.
//
// A Fake holds its own lock: it is safe for concurrent use, and one Fake
// changing does not hold up another.
type Fake struct {
	mu   sync.RWMutex
	devs map[string]Device
}

var _ hw.V4L2 = (*Fake)(nil)

// New returns a Fake holding devs.
func New(devs map[string]Device) *Fake {
	f := &Fake{}
	for node, d := range devs {
		f.Set(node, d)
	}
	return f
}

// DVTimings implements hw.V4L2.
func (f *Fake) DVTimings(dev string) (hw.Timings, error) {
	d, err := f.lookup(dev)
	if err != nil {
		return hw.Timings{}, err
	}
	if d.Err != nil {
		return hw.Timings{}, d.Err
	}
	return d.Timings, nil
}

// Format implements hw.V4L2.
func (f *Fake) Format(dev string) (hw.Format, error) {
	d, err := f.lookup(dev)
	if err != nil {
		return hw.Format{}, err
	}
	if d.FmtErr != nil {
		return hw.Format{}, d.FmtErr
	}
	return d.Fmt, nil
}

// Topology implements hw.V4L2. The graph returned is the caller's own.
func (f *Fake) Topology(media string) (hw.Topology, error) {
	d, err := f.lookup(media)
	switch {
	case err != nil:
		return hw.Topology{}, err
	case d.TopoErr != nil:
		return hw.Topology{}, d.TopoErr
	case d.Topology == nil:
		return hw.Topology{}, hw.ErrNotSupported
	}
	t := *d.Topology
	t.Entities = slices.Clone(t.Entities)
	t.Interfaces = slices.Clone(t.Interfaces)
	t.Pads = slices.Clone(t.Pads)
	t.Links = slices.Clone(t.Links)
	return t, nil
}

// Set gives the node the state d, adding it if need be: a signal appears,
// goes, or changes mode.
func (f *Fake) Set(node string, d Device) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.devs == nil {
		f.devs = map[string]Device{}
	}
	f.devs[node] = d
}

// Remove unplugs the node.
func (f *Fake) Remove(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.devs, node)
}

func (f *Fake) lookup(dev string) (Device, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if d, ok := f.devs[dev]; ok {
		return d, nil
	}
	if d, ok := f.devs[filepath.Base(dev)]; ok {
		return d, nil
	}
	return Device{}, &fs.PathError{Op: "open", Path: dev, Err: fs.ErrNotExist}
}
