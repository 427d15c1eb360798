package hw

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// TestMediaLayout checks the media controller structures against the
// kernel's sizes and offsets (include/uapi/linux/media.h, printed with
// sizeof/offsetof by a C program built against linux-libc-dev 6.1); the
// structures are packed and pointer-free, so the numbers hold on every
// architecture: run it with GOARCH=arm and arm64 too (under qemu-user).
func TestMediaLayout(t *testing.T) {
	var topo mediaV2Topology
	var ent mediaV2Entity
	var intf mediaV2Interface
	var pad mediaV2Pad
	var link mediaV2Link
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(struct media_v2_topology)", unsafe.Sizeof(topo), 72},
		{"offsetof(topology, ptr_entities)", unsafe.Offsetof(topo.PtrEntities), 16},
		{"offsetof(topology, ptr_interfaces)", unsafe.Offsetof(topo.PtrInterfaces), 32},
		{"offsetof(topology, ptr_pads)", unsafe.Offsetof(topo.PtrPads), 48},
		{"offsetof(topology, num_links)", unsafe.Offsetof(topo.NumLinks), 56},
		{"offsetof(topology, ptr_links)", unsafe.Offsetof(topo.PtrLinks), 64},
		{"sizeof(struct media_v2_entity)", unsafe.Sizeof(ent), 96},
		{"offsetof(entity, function)", unsafe.Offsetof(ent.Function), 68},
		{"sizeof(struct media_v2_interface)", unsafe.Sizeof(intf), 112},
		{"offsetof(interface, devnode)", unsafe.Offsetof(intf.Major), 48},
		{"sizeof(struct media_v2_pad)", unsafe.Sizeof(pad), 32},
		{"offsetof(pad, entity_id)", unsafe.Offsetof(pad.EntityID), 4},
		{"sizeof(struct media_v2_link)", unsafe.Sizeof(link), 40},
		{"offsetof(link, sink_id)", unsafe.Offsetof(link.SinkID), 8},
		{"offsetof(link, flags)", unsafe.Offsetof(link.Flags), 12},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		got, want uint
	}{
		{"MEDIA_IOC_G_TOPOLOGY", mediaIOCGTopology, 0xc0487c04},
		// v4l2-subdev.h: _IOR('V', 99, struct v4l2_dv_timings), the
		// number of VIDIOC_QUERY_DV_TIMINGS.
		{"VIDIOC_SUBDEV_QUERY_DV_TIMINGS", vidiocSubdevQueryDVTimings, 0x80845663},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestTopologyOf(t *testing.T) {
	var e mediaV2Entity
	e.ID, e.Function = 16, MediaEntFVidIFBridge
	copy(e.Name[:], "tc358743 11-000f")
	var full mediaV2Entity // a name filling all 64 bytes has no NUL
	for i := range full.Name {
		full.Name[i] = 'x'
	}
	got := topologyOf([]mediaV2Entity{e, full},
		[]mediaV2Interface{{ID: 3<<24 | 64, IntfType: MediaIntfV4LSubdev, Major: 81, Minor: 10}},
		[]mediaV2Pad{{ID: 1<<24 | 17, EntityID: 16, Flags: MediaPadFlSource}},
		[]mediaV2Link{{ID: 2<<24 | 65, SourceID: 3<<24 | 64, SinkID: 16, Flags: MediaLnkFlInterfaceLink}})
	if got.Entities[0] != (MediaEntity{ID: 16, Name: "tc358743 11-000f", Function: MediaEntFVidIFBridge}) ||
		len(got.Entities[1].Name) != 64 ||
		got.Interfaces[0] != (MediaInterface{ID: 3<<24 | 64, Type: MediaIntfV4LSubdev, Major: 81, Minor: 10}) ||
		got.Pads[0] != (MediaPad{ID: 1<<24 | 17, Entity: 16, Flags: MediaPadFlSource}) ||
		got.Links[0] != (MediaLink{ID: 2<<24 | 65, Source: 3<<24 | 64, Sink: 16, Flags: MediaLnkFlInterfaceLink}) {
		t.Errorf("topologyOf() = %+v", got)
	}
}

// TestDeviceTopology runs the real ioctl on what a test machine has.
func TestDeviceTopology(t *testing.T) {
	dir := t.TempDir()
	var v DeviceV4L2
	if _, err := v.Topology(filepath.Join(dir, "dev/media0")); !Absent(err) {
		t.Errorf("Topology(missing) error %v, want fs.ErrNotExist", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{plain, "/dev/null"} {
		if _, err := os.Stat(dev); err != nil {
			continue
		}
		if got, err := v.Topology(dev); !errors.Is(err, ErrNotSupported) {
			t.Errorf("Topology(%s) = %+v, %v; want ErrNotSupported", dev, got, err)
		}
	}
}
