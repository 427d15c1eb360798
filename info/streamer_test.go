package info

import (
	"context"
	"encoding/json"
	"errors"
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

// TestStreamerProgram: with a streamer program, system.streamer says what
// it is, as kvmd asks ustreamer --version and --features; it is asked once.
func TestStreamerProgram(t *testing.T) {
	p := &prober{version: "4.9", features: map[string]bool{"WITH_OMX": false, "HAS_PDEATHSIG": true}}
	s := New(Config{FS: hw.New(unpack(t, "rpi4")), Version: "test", V4L2: &v4l2test.Fake{}, Streamer: p, StreamerApp: "ustreamer"})
	for range 2 {
		res := decode(t, s.Result([]string{"system"}, false))
		got, _ := json.Marshal(get(res, "system", "streamer"))
		if want := `{"app":"ustreamer","features":{"HAS_PDEATHSIG":true,"WITH_OMX":false},"version":"4.9"}`; string(got) != want {
			t.Errorf("system.streamer = %s, want %s", got, want)
		}
	}
	if p.asked != 1 {
		t.Errorf("the program was asked %d times, want once", p.asked)
	}
}

// TestStreamerNotInstalled: a program that cannot be asked gives the
// empty values, not its name.
func TestStreamerNotInstalled(t *testing.T) {
	p := &prober{err: errors.New("streamer: ustreamer is not installed")}
	s := New(Config{FS: hw.New(unpack(t, "rpi4")), Version: "test", V4L2: &v4l2test.Fake{}, Streamer: p, StreamerApp: "ustreamer"})
	got, _ := json.Marshal(get(decode(t, s.Result([]string{"system"}, false)), "system", "streamer"))
	if want := `{"app":"","features":{},"version":""}`; string(got) != want {
		t.Errorf("system.streamer = %s, want %s", got, want)
	}
}

// prober is a streamer program that answers its version and features, or
// err, and counts.
type prober struct {
	version  string
	features map[string]bool
	err      error
	asked    int
}

func (f *prober) Program(context.Context) (string, map[string]bool, error) {
	f.asked++
	return f.version, f.features, f.err
}
