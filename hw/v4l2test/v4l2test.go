// Package v4l2test is a fake hw.V4L2: video capture devices whose signal a
// test or a demo sets and changes while the daemon runs.
package v4l2test

import (
	"io/fs"
	"path/filepath"
	"sync"

	"kvmd/hw"
)

// Device is the state of a fake capture device.
type Device struct {
	// Timings and Err answer DVTimings: Err (hw.ErrNoSignal,
	// hw.ErrNoLock, hw.ErrOutOfRange, hw.ErrNotSupported, ...) when set,
	// else Timings.
	Timings hw.Timings
	Err     error
	// Fmt and FmtErr answer Format the same way.
	Fmt    hw.Format
	FmtErr error
}

// Fake is a set of capture devices by node: the path the caller passes
// ("/tmp/root/dev/video0"), or its last element ("video0"), which matches
// under any FS root. A node it does not hold does not exist.
//
// Fake is safe for concurrent use as long as devices are changed only
// through Set and Remove, never by writing to the map or a Device.
type Fake map[string]*Device

// mu guards every Fake: a map type has no room for its own lock.
var mu sync.RWMutex

var _ hw.V4L2 = Fake(nil)

// DVTimings implements hw.V4L2.
func (f Fake) DVTimings(dev string) (hw.Timings, error) {
	mu.RLock()
	defer mu.RUnlock()
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
func (f Fake) Format(dev string) (hw.Format, error) {
	mu.RLock()
	defer mu.RUnlock()
	d, err := f.lookup(dev)
	if err != nil {
		return hw.Format{}, err
	}
	if d.FmtErr != nil {
		return hw.Format{}, d.FmtErr
	}
	return d.Fmt, nil
}

// Set gives the device at node the state d, adding it if need be: a
// signal appears, goes, or changes mode.
func (f Fake) Set(node string, d Device) {
	mu.Lock()
	defer mu.Unlock()
	f[node] = &d
}

// Remove unplugs the device at node.
func (f Fake) Remove(node string) {
	mu.Lock()
	defer mu.Unlock()
	delete(f, node)
}

func (f Fake) lookup(dev string) (*Device, error) {
	if d, ok := f[dev]; ok && d != nil {
		return d, nil
	}
	if d, ok := f[filepath.Base(dev)]; ok && d != nil {
		return d, nil
	}
	return nil, &fs.PathError{Op: "open", Path: dev, Err: fs.ErrNotExist}
}
