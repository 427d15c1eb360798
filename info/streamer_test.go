package info

import (
	"encoding/json"
	"testing"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
)

// TestStreamerShape: system.streamer is kvmd's object (app, version,
// features) in every layout, with empty values when no streamer runs:
// typed clients reject null. kvmd builds it in
// kvmd/apps/kvmd/info/system.py (__get_streamer_info).
func TestStreamerShape(t *testing.T) {
	s := New(Config{FS: hw.New(unpack(t, "rpi4")), Version: "test", V4L2: &v4l2test.Fake{}})
	for _, legacy := range []bool{true, false} {
		for _, cats := range [][]string{{"system"}, {"hw", "system"}} {
			if !legacy && cats[0] == "hw" {
				continue
			}
			res := decode(t, s.Result(cats, legacy))
			got, _ := json.Marshal(get(res, "system", "streamer"))
			if want := `{"app":"","features":{},"version":""}`; string(got) != want {
				t.Errorf("legacy=%v %v: system.streamer = %s, want %s", legacy, cats, got, want)
			}
		}
	}
}
