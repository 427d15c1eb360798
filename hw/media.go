package hw

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A capture pipeline in the media controller's terms: the video node
// streams what a CSI-2 receiver (a sub-device, "csi2" on the Pi 5's
// rp1-cfe) passes on from a source, here an HDMI-to-CSI bridge such as the
// TC358743 ("tc358743 11-000f"). Drivers in media-controller mode (rp1-cfe,
// unicam with brcm,media-controller) leave the source's timings to the
// source's own node, /dev/v4l-subdevN; sysfs names the nodes, the media
// device's topology (MEDIA_IOC_G_TOPOLOGY) says which is linked to which.

// SubDevice is a V4L2 sub-device node as sysfs describes it.
type SubDevice struct {
	// Node is "/dev/v4l-subdev2".
	Node string
	// Name is the sub-device's name: "csi2", or for an I2C chip its
	// driver, adapter and address, "tc358743 11-000f".
	Name string
	// Driver is the bound driver of the device behind the node:
	// "tc358743", "rp1-cfe"; empty when sysfs does not link one.
	Driver string
	// Dev is the device number, "81:5".
	Dev string
}

// MediaDevice is a media controller node as sysfs describes it.
type MediaDevice struct {
	// Node is "/dev/media0".
	Node string
	// Model is the driver's model name: "rp1-cfe", "unicam", or a USB
	// camera's product.
	Model string
	// parent is the device the media device belongs to, relative to the
	// root ("sys/devices/platform/axi/1000120000.pcie/1f00128000.csi"),
	// the same as its video nodes' device.
	parent string
}

// SubDevices lists the V4L2 sub-device nodes, in the order of their
// numbers. Without sysfs's video4linux class there are none.
func (f FS) SubDevices() ([]SubDevice, error) {
	dirs, err := f.Glob("sys/class/video4linux/v4l-subdev*")
	if err != nil {
		return nil, err
	}
	var out []SubDevice
	for _, d := range dirs {
		base := path.Base(d)
		if _, ok := nodeNumber(base, "v4l-subdev"); !ok {
			continue
		}
		sd := SubDevice{Node: "/dev/" + base}
		if sd.Name, err = f.readOptional(d + "/name"); err != nil {
			return nil, err
		}
		if sd.Dev, err = f.readOptional(d + "/dev"); err != nil {
			return nil, err
		}
		if drv, err := f.LinkName(d + "/device/driver"); err == nil {
			sd.Driver = drv
		} else if !Absent(err) {
			return nil, err
		}
		out = append(out, sd)
	}
	sortByNumber(out, func(s SubDevice) string { return s.Node }, "v4l-subdev")
	return out, nil
}

// MediaDevices lists the media controller nodes from sys/bus/media, in
// the order of their numbers.
func (f FS) MediaDevices() ([]MediaDevice, error) {
	dirs, err := f.Glob("sys/bus/media/devices/media*")
	if err != nil {
		return nil, err
	}
	var out []MediaDevice
	for _, d := range dirs {
		base := path.Base(d)
		if _, ok := nodeNumber(base, "media"); !ok {
			continue
		}
		m := MediaDevice{Node: "/dev/" + base}
		if m.Model, err = f.readOptional(d + "/model"); err != nil {
			return nil, err
		}
		// A media device sits on the media bus, not in a class, so sysfs
		// gives it no "device" link: its directory is below its parent's.
		real, err := f.resolve(d)
		if err != nil {
			return nil, err
		}
		m.parent = path.Dir(real)
		out = append(out, m)
	}
	sortByNumber(out, func(m MediaDevice) string { return m.Node }, "media")
	return out, nil
}

// resolve returns rel with every symbolic link resolved, relative to the
// root and slash-separated; it fails if the links lead out of the root.
func (f FS) resolve(rel string) (string, error) {
	root, err := filepath.EvalSymlinks(f.root)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(f.Path(rel))
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("hw: %s leads out of the root", rel)
	}
	return filepath.ToSlash(r), nil
}

// nodeNumber returns N of prefix+"N" ("v4l-subdev2", "media0").
func nodeNumber(name, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok || s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

func sortByNumber[T any](s []T, node func(T) string, prefix string) {
	slices.SortFunc(s, func(a, b T) int {
		m, _ := nodeNumber(path.Base(node(a)), prefix)
		n, _ := nodeNumber(path.Base(node(b)), prefix)
		return m - n
	})
}

// Topology is a media device's graph as MEDIA_IOC_G_TOPOLOGY reports it:
// entities (the video nodes, the receiver, the bridge) with pads, data
// links between pads, and interface links from device nodes to entities.
type Topology struct {
	Entities   []MediaEntity
	Interfaces []MediaInterface
	Pads       []MediaPad
	Links      []MediaLink
}

// MediaEntity is struct media_v2_entity.
type MediaEntity struct {
	ID       uint32
	Name     string
	Function uint32 // MEDIA_ENT_F_*
}

// MediaInterface is struct media_v2_interface: a device node.
type MediaInterface struct {
	ID           uint32
	Type         uint32 // MEDIA_INTF_T_*
	Major, Minor uint32
}

// MediaPad is struct media_v2_pad.
type MediaPad struct {
	ID     uint32
	Entity uint32
	Flags  uint32 // MEDIA_PAD_FL_*
}

// MediaLink is struct media_v2_link: from a source pad to a sink pad, or
// for an interface link from an interface to an entity.
type MediaLink struct {
	ID           uint32
	Source, Sink uint32
	Flags        uint32 // MEDIA_LNK_FL_*
}

// Constants of the media controller UAPI (include/uapi/linux/media.h).
const (
	MediaEntFIOV4L       = 0x00010001 // MEDIA_ENT_F_IO_V4L: a video node
	MediaEntFSubdevOther = 0x00020000 // MEDIA_ENT_F_V4L2_SUBDEV_UNKNOWN
	MediaEntFCamSensor   = 0x00020001 // MEDIA_ENT_F_CAM_SENSOR
	MediaEntFVidIFBridge = 0x00005002 // MEDIA_ENT_F_VID_IF_BRIDGE: tc358743
	MediaEntFDVDecoder   = 0x00006001 // MEDIA_ENT_F_DV_DECODER: adv7604, tda1997x

	MediaIntfV4LVideo  = 0x00000200 // MEDIA_INTF_T_V4L_VIDEO
	MediaIntfV4LSubdev = 0x00000203 // MEDIA_INTF_T_V4L_SUBDEV

	MediaPadFlSink   = 1 << 0
	MediaPadFlSource = 1 << 1

	MediaLnkFlEnabled       = 1 << 0
	MediaLnkFlImmutable     = 1 << 1
	MediaLnkFlLinkType      = 0xf << 28
	MediaLnkFlDataLink      = 0 << 28
	MediaLnkFlInterfaceLink = 1 << 28
)

// bridgeDrivers are the drivers of HDMI receivers that answer
// VIDIOC_SUBDEV_QUERY_DV_TIMINGS, for telling the bridge when the media
// graph cannot be read (a fixture tree has no /dev/media0): the TC358743 of
// PiKVM's DIY builds and of most HDMI-to-CSI boards, and the mainline
// kernel's other HDMI receivers with a CSI or parallel output.
var bridgeDrivers = []string{"tc358743", "adv7604", "adv7842", "tda1997x"}

// isBridgeName reports whether a sub-device's name is that of a known
// bridge: an I2C sub-device is named "<driver> <bus>-<address>".
func isBridgeName(name string) bool {
	drv, _, _ := strings.Cut(name, " ")
	return slices.Contains(bridgeDrivers, drv)
}

// Pipeline is what feeds a capture video node: the media device that
// holds the graph, the CSI-2 receiver sub-device between, and the bridge.
// Each is nil or empty when it is not there or cannot be found.
type Pipeline struct {
	// Media is "/dev/media0".
	Media string
	// Receiver is the sub-device between the bridge and the video node
	// ("csi2" on rp1-cfe); unicam has none.
	Receiver *SubDevice
	// Bridge is the HDMI receiver: "tc358743 11-000f".
	Bridge *SubDevice
}

// errNotInGraph means a media device's graph does not hold a video node.
var errNotInGraph = errors.New("hw: video node not in the media graph")

// FindPipeline finds the pipeline behind the capture node d: the media
// device is the one sysfs places on the same device as d; the receiver
// and bridge come from its topology, read through v. Where the topology
// cannot be read (no /dev/mediaN below the root, as on a fixture tree, or
// a kernel without it), the bridge is the sub-device sysfs names after a
// known HDMI receiver driver. A Pipeline is always returned; the error says
// what could not be read and is worth logging, not failing on.
func FindPipeline(f FS, v V4L2, d VideoDevice) (Pipeline, error) {
	var p Pipeline
	subs, serr := f.SubDevices()
	if Absent(serr) {
		serr = nil
	}
	medias, merr := f.MediaDevices()
	if Absent(merr) {
		merr = nil
	}
	if err := errors.Join(serr, merr); err != nil {
		return p, err
	}
	// The media device of d: on d's device, else any whose graph has d.
	// A device link sysfs lacks, or that leads out of the root, matches
	// none.
	parent, _ := f.resolve("sys/class/video4linux/" + path.Base(d.Node) + "/device")
	var own []MediaDevice
	for _, m := range medias {
		if parent != "" && m.parent == parent {
			own = append(own, m)
		}
	}
	candidates := own
	if len(own) == 0 {
		candidates = medias
	}
	var errs []error
	read := false // d's own graph could be read
	for _, m := range candidates {
		if p.Media == "" && len(own) > 0 {
			p.Media = m.Node // d's, even if its graph cannot be read
		}
		t, err := v.Topology(f.Path(strings.TrimPrefix(m.Node, "/")))
		if err != nil {
			if !Absent(err) && !errors.Is(err, ErrNotSupported) {
				errs = append(errs, fmt.Errorf("media topology of %s: %w", m.Node, err))
			}
			continue
		}
		read = read || len(own) > 0
		recv, bridge, err := t.bridgeOf(d.Dev)
		if errors.Is(err, errNotInGraph) {
			continue
		}
		p.Media = m.Node
		p.Receiver = subdevOf(t, recv, subs)
		p.Bridge = subdevOf(t, bridge, subs)
		return p, errors.Join(errs...)
	}
	if read {
		return p, errors.Join(errs...) // d's graph has no bridge
	}
	// No graph to read: the bridge by its name, the receiver unknown.
	for _, s := range subs {
		if slices.Contains(bridgeDrivers, s.Driver) || isBridgeName(s.Name) {
			p.Bridge = &s
			break
		}
	}
	return p, errors.Join(errs...)
}

// subdevOf returns the sub-device of entity id: its node from the
// topology's interface links, matched by device number with sysfs; nil for
// no entity (id 0).
func subdevOf(t Topology, id uint32, subs []SubDevice) *SubDevice {
	if id == 0 {
		return nil
	}
	var sd SubDevice
	for _, e := range t.Entities {
		if e.ID == id {
			sd.Name = e.Name
		}
	}
	if intf, ok := t.interfaceOf(id, MediaIntfV4LSubdev); ok {
		sd.Dev = fmt.Sprintf("%d:%d", intf.Major, intf.Minor)
		for _, s := range subs {
			if s.Dev == sd.Dev {
				sd.Node, sd.Driver = s.Node, s.Driver
				if sd.Name == "" {
					sd.Name = s.Name
				}
			}
		}
	}
	return &sd
}

// interfaceOf returns the interface of type typ linked to entity id.
func (t Topology) interfaceOf(id, typ uint32) (MediaInterface, bool) {
	for _, l := range t.Links {
		if l.Flags&MediaLnkFlLinkType != MediaLnkFlInterfaceLink || l.Sink != id {
			continue
		}
		for _, i := range t.Interfaces {
			if i.ID == l.Source && i.Type == typ {
				return i, true
			}
		}
	}
	return MediaInterface{}, false
}

// bridgeOf finds, upstream of the video node with device number dev
// ("81:0"), the bridge entity and the entity just downstream of it (the
// receiver; 0 when the bridge feeds the video node directly). The bridge is
// where the data comes from: an entity no data link leads into, whose
// function is a video interface bridge or a digital video decoder, or an
// unspecified sub-device named after a known bridge driver. (CSI-2
// receivers call themselves video interface bridges too, but data flows
// into them.) bridge is 0 when there is none: a camera sensor.
//
// Enabled links are followed first; rp1-cfe leaves its receiver-to-node
// links disabled until a streamer configures them, yet the bridge behind
// is the source.
func (t Topology) bridgeOf(dev string) (recv, bridge uint32, err error) {
	var video uint32
	for _, i := range t.Interfaces {
		if i.Type != MediaIntfV4LVideo || fmt.Sprintf("%d:%d", i.Major, i.Minor) != dev {
			continue
		}
		for _, l := range t.Links {
			if l.Flags&MediaLnkFlLinkType == MediaLnkFlInterfaceLink && l.Source == i.ID {
				video = l.Sink
			}
		}
	}
	if video == 0 {
		return 0, 0, errNotInGraph
	}
	padEntity := make(map[uint32]uint32, len(t.Pads))
	for _, p := range t.Pads {
		padEntity[p.ID] = p.Entity
	}
	entity := make(map[uint32]MediaEntity, len(t.Entities))
	for _, e := range t.Entities {
		entity[e.ID] = e
	}
	sinks := map[uint32]bool{} // entities with a sink pad
	for _, p := range t.Pads {
		if p.Flags&MediaPadFlSink != 0 {
			sinks[p.Entity] = true
		}
	}
	// Breadth first from the video node, against the data links: over
	// enabled links, then over any.
	for _, enabledOnly := range []bool{true, false} {
		down := map[uint32]uint32{video: 0} // entity -> the entity it feeds
		order := []uint32{video}
		fed := map[uint32]bool{} // entities a followed link leads into
		for i := 0; i < len(order); i++ {
			cur := order[i]
			for _, l := range t.Links {
				if l.Flags&MediaLnkFlLinkType != MediaLnkFlDataLink || padEntity[l.Sink] != cur ||
					(enabledOnly && l.Flags&MediaLnkFlEnabled == 0) {
					continue
				}
				fed[cur] = true
				src, ok := padEntity[l.Source]
				if _, seen := down[src]; !ok || seen {
					continue
				}
				down[src] = cur
				order = append(order, src)
			}
		}
		for _, e := range order[1:] {
			if fed[e] || !isBridge(entity[e], sinks[e]) {
				continue
			}
			if down[e] != video {
				recv = down[e]
			}
			return recv, e, nil
		}
	}
	return 0, 0, nil
}

// isBridge reports whether e, which nothing feeds, is an HDMI bridge: an
// entity named after a known bridge driver, a digital video decoder, or a
// video interface bridge without inputs (CSI-2 receivers call themselves
// video interface bridges too, and have sink pads).
func isBridge(e MediaEntity, hasSink bool) bool {
	switch {
	case isBridgeName(e.Name), e.Function == MediaEntFDVDecoder:
		return true
	case e.Function == MediaEntFVidIFBridge:
		return !hasSink
	}
	return false
}
