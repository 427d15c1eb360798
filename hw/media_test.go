package hw

import "testing"

// graph builds a topology from entities and data links {source, sink,
// flags} by entity ID, each entity with one sink pad (ID 100+e) and one
// source pad (200+e) but bridges other than csi2 with their source pad
// only (as tc358743 registers itself), and video
// node interface 81:0 on entity 1.
func graph(ents []MediaEntity, links [][3]uint32) Topology {
	t := Topology{Entities: ents}
	for _, e := range ents {
		if e.Name == "csi2" || e.Function != MediaEntFVidIFBridge {
			t.Pads = append(t.Pads, MediaPad{ID: 100 + e.ID, Entity: e.ID, Flags: MediaPadFlSink})
		}
		t.Pads = append(t.Pads, MediaPad{ID: 200 + e.ID, Entity: e.ID, Flags: MediaPadFlSource})
	}
	t.Interfaces = []MediaInterface{{ID: 900, Type: MediaIntfV4LVideo, Major: 81, Minor: 0}}
	t.Links = []MediaLink{{ID: 901, Source: 900, Sink: 1, Flags: MediaLnkFlInterfaceLink}}
	for i, l := range links {
		t.Links = append(t.Links, MediaLink{ID: 1000 + uint32(i), Source: 200 + l[0], Sink: 100 + l[1], Flags: l[2]})
	}
	return t
}

func TestBridgeOf(t *testing.T) {
	video := MediaEntity{ID: 1, Name: "video", Function: MediaEntFIOV4L}
	csi2 := MediaEntity{ID: 2, Name: "csi2", Function: MediaEntFVidIFBridge}
	tc := MediaEntity{ID: 3, Name: "tc358743 10-000f", Function: MediaEntFVidIFBridge}
	tcOld := MediaEntity{ID: 3, Name: "tc358743 10-000f", Function: MediaEntFSubdevOther}
	lt := MediaEntity{ID: 6, Name: "lt6911 1-002b", Function: MediaEntFVidIFBridge} // a bridge this code does not know by name
	sensor := MediaEntity{ID: 4, Name: "imx219 10-0010", Function: MediaEntFCamSensor}
	adv := MediaEntity{ID: 5, Name: "adv7611 1-004c", Function: MediaEntFDVDecoder}
	const en = MediaLnkFlEnabled
	for _, tt := range []struct {
		name         string
		t            Topology
		recv, bridge uint32
		notInGraph   bool
	}{
		{"bridge through a receiver", graph([]MediaEntity{video, csi2, tc}, [][3]uint32{{3, 2, en}, {2, 1, en}}), 2, 3, false},
		{"receiver link disabled", graph([]MediaEntity{video, csi2, tc}, [][3]uint32{{3, 2, en}, {2, 1, 0}}), 2, 3, false},
		{"bridge feeds the node", graph([]MediaEntity{video, tc}, [][3]uint32{{3, 1, en}}), 0, 3, false},
		{"bridge of unspecified function, by name", graph([]MediaEntity{video, tcOld}, [][3]uint32{{3, 1, en}}), 0, 3, false},
		{"dv decoder", graph([]MediaEntity{video, csi2, adv}, [][3]uint32{{5, 2, en}, {2, 1, en}}), 2, 5, false},
		{"camera sensor", graph([]MediaEntity{video, csi2, sensor}, [][3]uint32{{4, 2, en}, {2, 1, en}}), 0, 0, false},
		{"bridge without inputs, by function", graph([]MediaEntity{video, csi2, lt}, [][3]uint32{{6, 2, en}, {2, 1, en}}), 2, 6, false},
		{"receiver alone", graph([]MediaEntity{video, csi2}, [][3]uint32{{2, 1, en}}), 0, 0, false},
		{"enabled path first", graph([]MediaEntity{video, csi2, tc, adv},
			[][3]uint32{{5, 1, 0}, {3, 2, en}, {2, 1, en}}), 2, 3, false},
		{"a cycle ends", graph([]MediaEntity{video, csi2, tc},
			[][3]uint32{{3, 2, en}, {2, 1, en}, {1, 2, 0}}), 2, 3, false},
		{"not in the graph", Topology{Entities: []MediaEntity{video}}, 0, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			recv, bridge, err := tt.t.bridgeOf("81:0")
			if recv != tt.recv || bridge != tt.bridge || (err != nil) != tt.notInGraph {
				t.Errorf("bridgeOf() = %d, %d, %v; want %d, %d, not in graph %v",
					recv, bridge, err, tt.recv, tt.bridge, tt.notInGraph)
			}
		})
	}
}

func TestNodeNumber(t *testing.T) {
	for _, tt := range []struct {
		name, prefix string
		n            int
		ok           bool
	}{
		{"v4l-subdev2", "v4l-subdev", 2, true},
		{"media10", "media", 10, true},
		{"media", "media", 0, false},
		{"media01", "media", 1, false},
		{"v4l-subdev-1", "v4l-subdev", -1, false},
		{"video0", "media", 0, false},
	} {
		if n, ok := nodeNumber(tt.name, tt.prefix); n != tt.n || ok != tt.ok {
			t.Errorf("nodeNumber(%q, %q) = %d, %v; want %d, %v", tt.name, tt.prefix, n, ok, tt.n, tt.ok)
		}
	}
}

func TestResolveStaysInRoot(t *testing.T) {
	f := hwTree(t, map[string]string{"sys/a/b": "x"}, map[string]string{
		"sys/in":  "a/b",
		"sys/out": "../../../../../../etc",
	})
	if got, err := f.resolve("sys/in"); err != nil || got != "sys/a/b" {
		t.Errorf("resolve(in) = %q, %v; want sys/a/b", got, err)
	}
	if got, err := f.resolve("sys/out"); err == nil {
		t.Errorf("resolve(out) = %q, nil; want an error", got)
	}
}
