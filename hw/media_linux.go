package hw

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"kvmd/internal/ioctl"
)

// The media controller UAPI (include/uapi/linux/media.h). The structures
// are packed in C; their members are laid out so that no padding arises
// on any architecture, and Go lays them out the same (the layout test
// checks sizes and offsets).

// mediaV2Topology is struct media_v2_topology: the pointers are __u64 on
// every architecture.
type mediaV2Topology struct {
	TopologyVersion uint64
	NumEntities     uint32
	_               uint32
	PtrEntities     uint64
	NumInterfaces   uint32
	_               uint32
	PtrInterfaces   uint64
	NumPads         uint32
	_               uint32
	PtrPads         uint64
	NumLinks        uint32
	_               uint32
	PtrLinks        uint64
}

// mediaV2Entity is struct media_v2_entity.
type mediaV2Entity struct {
	ID       uint32
	Name     [64]byte
	Function uint32
	Flags    uint32
	_        [5]uint32
}

// mediaV2Interface is struct media_v2_interface, its union read as the
// devnode member.
type mediaV2Interface struct {
	ID       uint32
	IntfType uint32
	Flags    uint32
	_        [9]uint32
	Major    uint32
	Minor    uint32
	_        [14]uint32
}

// mediaV2Pad is struct media_v2_pad.
type mediaV2Pad struct {
	ID       uint32
	EntityID uint32
	Flags    uint32
	Index    uint32
	_        [4]uint32
}

// mediaV2Link is struct media_v2_link.
type mediaV2Link struct {
	ID       uint32
	SourceID uint32
	SinkID   uint32
	Flags    uint32
	_        [6]uint32
}

// mediaIOCGTopology is MEDIA_IOC_G_TOPOLOGY, _IOWR('|', 0x04, struct
// media_v2_topology).
const mediaIOCGTopology = (iocRead|iocWrite)<<30 | uint(unsafe.Sizeof(mediaV2Topology{}))<<16 | '|'<<8 | 0x04

// maxGraphObjects bounds each array of a topology: a Pi's graphs have a
// few dozen objects, and a bound keeps a confused driver from asking for
// unbounded memory.
const maxGraphObjects = 4096

// Topology reads the graph of the media device media: one ioctl for the
// counts, one to fill the arrays, again if the graph changed between them.
func (DeviceV4L2) Topology(media string) (Topology, error) {
	fd, err := unix.Open(media, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Topology{}, fmt.Errorf("media topology: %w", pathError("open", media, err))
	}
	defer unix.Close(fd)
	for range 3 {
		var t mediaV2Topology
		if err := ioctl.Do(fd, mediaIOCGTopology, unsafe.Pointer(&t)); err != nil {
			return Topology{}, mediaError(media, err)
		}
		if t.NumEntities > maxGraphObjects || t.NumInterfaces > maxGraphObjects ||
			t.NumPads > maxGraphObjects || t.NumLinks > maxGraphObjects {
			return Topology{}, fmt.Errorf("media topology of %s: more than %d objects", media, maxGraphObjects)
		}
		version := t.TopologyVersion
		ents := make([]mediaV2Entity, t.NumEntities+1) // +1: never a nil array
		intfs := make([]mediaV2Interface, t.NumInterfaces+1)
		pads := make([]mediaV2Pad, t.NumPads+1)
		links := make([]mediaV2Link, t.NumLinks+1)
		t.PtrEntities = uint64(uintptr(unsafe.Pointer(&ents[0])))
		t.PtrInterfaces = uint64(uintptr(unsafe.Pointer(&intfs[0])))
		t.PtrPads = uint64(uintptr(unsafe.Pointer(&pads[0])))
		t.PtrLinks = uint64(uintptr(unsafe.Pointer(&links[0])))
		err := ioctl.Do(fd, mediaIOCGTopology, unsafe.Pointer(&t))
		runtime.KeepAlive(ents)
		runtime.KeepAlive(intfs)
		runtime.KeepAlive(pads)
		runtime.KeepAlive(links)
		switch {
		case errors.Is(err, unix.ENOSPC):
			continue // the graph grew between the two calls
		case err != nil:
			return Topology{}, mediaError(media, err)
		case t.TopologyVersion != version:
			continue
		}
		return topologyOf(ents[:t.NumEntities], intfs[:t.NumInterfaces], pads[:t.NumPads], links[:t.NumLinks]), nil
	}
	return Topology{}, fmt.Errorf("media topology of %s: keeps changing", media)
}

// mediaError maps the errnos of a media ioctl: a node that is not a media
// device, or qemu-user that does not translate the request, cannot tell.
func mediaError(media string, err error) error {
	for _, e := range []unix.Errno{unix.ENOTTY, unix.EINVAL, unix.ENOSYS} {
		if errors.Is(err, e) {
			return fmt.Errorf("media topology of %s: %w", media, ErrNotSupported)
		}
	}
	return fmt.Errorf("media topology: %w", err)
}

func topologyOf(ents []mediaV2Entity, intfs []mediaV2Interface, pads []mediaV2Pad, links []mediaV2Link) Topology {
	var t Topology
	for _, e := range ents {
		name := e.Name[:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		t.Entities = append(t.Entities, MediaEntity{ID: e.ID, Name: string(name), Function: e.Function})
	}
	for _, i := range intfs {
		t.Interfaces = append(t.Interfaces, MediaInterface{ID: i.ID, Type: i.IntfType, Major: i.Major, Minor: i.Minor})
	}
	for _, p := range pads {
		t.Pads = append(t.Pads, MediaPad{ID: p.ID, Entity: p.EntityID, Flags: p.Flags})
	}
	for _, l := range links {
		t.Links = append(t.Links, MediaLink{ID: l.ID, Source: l.SourceID, Sink: l.SinkID, Flags: l.Flags})
	}
	return t
}
