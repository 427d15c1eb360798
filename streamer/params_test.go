package streamer

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"kvmd/hw"
)

func TestParseParams(t *testing.T) {
	for _, tt := range []struct {
		name string
		f    func(string) (any, error)
		in   string
		want any
		ok   bool
	}{
		{"quality", q, "80", 80, true},
		{"quality hex, as kvmd's valid_number", q, "0x10", 16, true},
		{"quality spaces", q, " 5 ", 5, true},
		{"quality 0", q, "0", nil, false},
		{"quality 101", q, "101", nil, false},
		{"quality float", q, "5.5", nil, false},
		{"quality empty", q, "", nil, false},
		{"fps 0: as fast as the source", fps, "0", 0, true},
		{"fps 120", fps, "120", 120, true},
		{"fps 121", fps, "121", nil, false},
		{"fps negative", fps, "-1", nil, false},
		{"resolution", res, "1280x720", "1280x720", true},
		{"resolution canonical", res, " 0800x600", "800x600", true},
		{"resolution no x", res, "1280", nil, false},
		{"resolution zero", res, "0x600", nil, false},
		{"resolution three parts", res, "1x2x3", nil, false},
		{"resolution upper X", res, "1280X720", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok %v", err, tt.ok)
			}
			var pe *ParamError
			if err != nil && !errors.As(err, &pe) {
				t.Errorf("err %T %v, want a *ParamError", err, err)
			}
			if tt.ok && got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func q(s string) (any, error)   { return ParseQuality(s) }
func fps(s string) (any, error) { return ParseFPS(s) }
func res(s string) (any, error) { return ParseResolution(s) }

func TestApply(t *testing.T) {
	base := Params{Quality: 80, DesiredFPS: 30, Resolution: "1920x1080", H264Bitrate: 5000, H264GOP: 60}
	lim := Limits{DesiredFPSMin: 0, DesiredFPSMax: 90, Resolutions: DongleResolutions}
	csi, usb := FeaturesOf(hw.CaptureCSI), FeaturesOf(hw.CaptureUSB)
	csiH := csi
	csiH.H264 = true
	with := func(f func(*Params)) Params { p := base; f(&p); return p }
	for _, tt := range []struct {
		name string
		f    Features
		ch   Change
		want Params
		err  error
	}{
		{"nothing", csi, Change{}, base, nil},
		{"empty values are not given (kvmd)", csi, Change{"quality": "", "resolution": ""}, base, nil},
		{"quality", csi, Change{"quality": "50"}, with(func(p *Params) { p.Quality = 50 }), nil},
		{"fps", csi, Change{"desired_fps": "10"}, with(func(p *Params) { p.DesiredFPS = 10 }), nil},
		{"fps above the limit", csi, Change{"desired_fps": "100"}, base, &ParamError{}},
		{"quality of a dongle", usb, Change{"quality": "50"}, base, ErrQualityNotSupported},
		{"resolution of a bridge", csi, Change{"resolution": "1280x720"}, base, ErrResolutionNotSupported},
		{"resolution of a dongle", usb, Change{"resolution": "1280x720"}, with(func(p *Params) { p.Resolution = "1280x720" }), nil},
		{"resolution not offered", usb, Change{"resolution": "1281x720"}, base, &ParamError{}},
		{"h264 without an encoder", csi, Change{"h264_bitrate": "5000"}, base, ErrH264NotSupported},
		{"h264 gop without an encoder", usb, Change{"h264_gop": "10"}, base, ErrH264NotSupported},
		{"h264 bitrate", csiH, Change{"h264_bitrate": "2000"}, with(func(p *Params) { p.H264Bitrate = 2000 }), nil},
		{"h264 both", csiH, Change{"h264_bitrate": "25", "h264_gop": "0"}, with(func(p *Params) { p.H264Bitrate, p.H264GOP = 25, 0 }), nil},
		{"h264 bitrate below kvmd's 25", csiH, Change{"h264_bitrate": "24"}, base, &ParamError{}},
		{"h264 bitrate above kvmd's 20000", csiH, Change{"h264_bitrate": "20001"}, base, &ParamError{}},
		{"h264 gop above kvmd's 60", csiH, Change{"h264_gop": "61"}, base, &ParamError{}},
		{"h264 gop not a number", csiH, Change{"h264_gop": "ten"}, base, &ParamError{}},
		{"support is checked before the value (kvmd)", usb, Change{"quality": "x"}, base, ErrQualityNotSupported},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := base.apply(tt.ch, tt.f, lim)
			var pe *ParamError
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("err %v", err)
			case errors.As(tt.err, &pe) && !errors.As(err, &pe):
				t.Fatalf("err %v, want a *ParamError", err)
			case tt.err != nil && !errors.As(tt.err, &pe) && !errors.Is(err, tt.err):
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err != nil {
				got = base // nothing changes on an error
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestParamsJSON: the params and limits show only the capture's features,
// as kvmd's Params does.
// TestFPSOneRange: every desired_fps out of the limits is refused with
// the same range in its message, the limits' (it said 0 to 120 for 150
// and 0 to 90 for 100).
func TestFPSOneRange(t *testing.T) {
	lim := Limits{DesiredFPSMin: 0, DesiredFPSMax: 90}
	for _, v := range []string{"100", "150", "-1", "0x100"} {
		_, err := Params{Quality: 80, DesiredFPS: 30}.apply(Change{"desired_fps": v}, FeaturesOf(hw.CaptureCSI), lim)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Why != "not from 0 to 90" {
			t.Errorf("desired_fps=%s: %v, want \"not from 0 to 90\"", v, err)
		}
	}
}

func TestParamsJSON(t *testing.T) {
	p := Params{Quality: 80, DesiredFPS: 30, Resolution: "1920x1080", H264Bitrate: 5000, H264GOP: 60}
	l := Limits{DesiredFPSMin: 0, DesiredFPSMax: 90, Resolutions: []string{"1920x1080", "640x480"}}
	for _, tt := range []struct {
		kind           string
		h264           bool
		params, limits map[string]any
	}{
		{hw.CaptureCSI, false, map[string]any{"quality": 80, "desired_fps": 30},
			map[string]any{"desired_fps": map[string]int{"min": 0, "max": 90}}},
		{hw.CaptureUSB, false, map[string]any{"resolution": "1920x1080", "desired_fps": 30},
			map[string]any{"desired_fps": map[string]int{"min": 0, "max": 90}, "available_resolutions": []string{"1920x1080", "640x480"}}},
		// kvmd's shapes with H.264 (kvmd/apps/kvmd/streamer/params.py).
		{hw.CaptureCSI, true, map[string]any{"quality": 80, "desired_fps": 30, "h264_bitrate": 5000, "h264_gop": 60},
			map[string]any{"desired_fps": map[string]int{"min": 0, "max": 90},
				"h264_bitrate": map[string]int{"min": 25, "max": 20000}, "h264_gop": map[string]int{"min": 0, "max": 60}}},
	} {
		f := FeaturesOf(tt.kind)
		f.H264 = tt.h264
		if got := p.json(f); !reflect.DeepEqual(got, tt.params) {
			t.Errorf("%s h264 %v params %v, want %v", tt.kind, tt.h264, got, tt.params)
		}
		if got := l.json(f); !reflect.DeepEqual(got, tt.limits) {
			t.Errorf("%s h264 %v limits %v, want %v", tt.kind, tt.h264, got, tt.limits)
		}
	}
}

// FuzzApply: any set_params values give new params within the limits or
// a typed error with the params unchanged, never a panic.
func FuzzApply(f *testing.F) {
	for _, s := range []string{"80", "0x10", " 5 ", "-1", "1280x720", "0x600", "x", "99999999999999999999", "1x2x3"} {
		f.Add(s, s, s)
	}
	base := Params{Quality: 80, DesiredFPS: 30, Resolution: "1920x1080"}
	lim := Limits{DesiredFPSMin: 0, DesiredFPSMax: 90, Resolutions: DongleResolutions}
	f.Fuzz(func(t *testing.T, q, fps, res string) {
		for _, kind := range []string{hw.CaptureCSI, hw.CaptureUSB} {
			p, err := base.apply(Change{"quality": q, "desired_fps": fps, "resolution": res}, FeaturesOf(kind), lim)
			if err != nil {
				var pe *ParamError
				if !errors.As(err, &pe) && !errors.Is(err, ErrQualityNotSupported) && !errors.Is(err, ErrResolutionNotSupported) {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if p.Quality < 1 || p.Quality > 100 || p.DesiredFPS < lim.DesiredFPSMin || p.DesiredFPS > lim.DesiredFPSMax {
				t.Fatalf("params out of range: %+v", p)
			}
			if !slices.Contains(lim.Resolutions, p.Resolution) {
				t.Fatalf("resolution %q not offered", p.Resolution)
			}
		}
	})
}
