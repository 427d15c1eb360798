package streamer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/streamer"
	"kvmd/streamer/streamertest"
	"kvmd/subsystem"
)

// recorder keeps the published events.
type recorder struct {
	mu     sync.Mutex
	events []struct {
		typ string
		ev  any
	}
}

func (r *recorder) publish(typ string, ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, struct {
		typ string
		ev  any
	}{typ, ev})
}

// watch records the events of s's "streamer" and "clients" subsystems
// until t ends.
func (r *recorder) watch(t *testing.T, s *streamer.Streamer) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, sub := range []subsystem.Subsystem{
		subsystem.Of[map[string]any](streamer.Subsystem{S: s}), subsystem.Of[streamer.Clients](streamer.ClientsSubsystem{S: s}),
	} {
		wg.Go(func() { subsystem.Watch(ctx, sub, r) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// Publish records an event.
func (r *recorder) Publish(typ string, ev any) { r.publish(typ, ev) }

// find returns the last event of typ whose JSON satisfies ok.
func (r *recorder) find(typ string, ok func(map[string]any) bool) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		e := r.events[i]
		if e.typ != typ {
			continue
		}
		b, _ := json.Marshal(e.ev)
		var m map[string]any
		json.Unmarshal(b, &m)
		if ok(m) {
			return m
		}
	}
	return nil
}

func jsonOf(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// bars draws eight vertical colour bars, as a test pattern does.
func bars(_ time.Time, w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	cols := []color.RGBA{{255, 255, 255, 255}, {255, 255, 0, 255}, {0, 255, 255, 255}, {0, 255, 0, 255},
		{255, 0, 255, 255}, {255, 0, 0, 255}, {0, 0, 255, 255}, {0, 0, 0, 255}}
	for x := range w {
		c := cols[x*len(cols)/w]
		for y := range h {
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

// TestState: the state has kvmd's keys and shapes; the streamer's own
// state comes through with applied from it; the daemon's reading of the
// capture decides "online"; a change is published as kvmd publishes it,
// only the keys that changed.
func TestState(t *testing.T) {
	var noSignal atomic.Bool
	video := func() *hw.Video {
		dev, on := "/dev/video0", true
		v := &hw.Video{Device: &dev, Status: hw.VideoOK, Signal: &on, Resolution: &hw.Resolution{Width: 1280, Height: 720}}
		if noSignal.Load() {
			off := false
			v.Status, v.Signal, v.Resolution = hw.VideoNoSignal, &off, nil
		}
		return v
	}
	rec := &recorder{}
	l := &streamertest.Launcher{Width: 1280, Height: 720, Source: bars}
	s := streamer.New(streamer.Config{
		Launcher: l, Dir: shortDir(t), StatePoll: 20 * time.Millisecond, ResetDelay: time.Millisecond,
		Video: streamertest.Video{Device: vivid, Read: video},
	})
	rec.watch(t, s)
	run(t, s)
	ctx := context.Background()

	st := jsonOf(s.State(ctx))
	if st["streamer"] != nil {
		t.Errorf("streamer %v before a client, want null", st["streamer"])
	}
	for _, k := range []string{"features", "limits", "params", "applied", "snapshot", "capture"} {
		if st[k] == nil {
			t.Errorf("no %s in %v", k, st)
		}
	}
	if f := st["features"].(map[string]any); f["quality"] != true || f["resolution"] != false || f["h264"] != false {
		t.Errorf("features %v", f)
	}
	if c := st["capture"].(map[string]any); c["status"] != "ok" || c["device"] != "/dev/video0" {
		t.Errorf("capture %v", c)
	}

	defer s.AddViewer()()
	eventually(t, 5*time.Second, "a clients event with the count", func() bool {
		return rec.find("clients", func(m map[string]any) bool { return m["count"] == 1.0 }) != nil
	})
	var ss map[string]any
	eventually(t, 5*time.Second, "the streamer's state", func() bool {
		st = jsonOf(s.State(ctx))
		ss, _ = st["streamer"].(map[string]any)
		return ss != nil
	})
	src := ss["source"].(map[string]any)
	if src["online"] != true || src["resolution"].(map[string]any)["width"] != 1280.0 {
		t.Errorf("source %v", src)
	}
	if a := st["applied"].(map[string]any); a["quality"] != 80.0 || a["desired_fps"] != 30.0 {
		t.Errorf("applied %v", a)
	}
	// The watcher published the streamer's arrival.
	eventually(t, 5*time.Second, "streamer event", func() bool {
		return rec.find("streamer", func(m map[string]any) bool { return m["streamer"] != nil }) != nil
	})

	// No signal: ustreamer 4.9 would say online; the daemon says not.
	noSignal.Store(true)
	eventually(t, 5*time.Second, "offline event", func() bool {
		return rec.find("streamer", func(m map[string]any) bool {
			s, _ := m["streamer"].(map[string]any)
			c, _ := m["capture"].(map[string]any)
			return s != nil && s["source"].(map[string]any)["online"] == false && c != nil && c["status"] == "no_signal"
		}) != nil
	})
	ev := rec.find("streamer", func(m map[string]any) bool { return m["capture"] != nil })
	if _, ok := ev["features"]; ok {
		t.Errorf("a partial event carries the features: %v", ev)
	}
	if _, err := s.Snapshot(ctx, false, false, false); !errors.Is(err, streamer.ErrOffline) {
		t.Errorf("snapshot without a signal: %v, want ErrOffline", err)
	}
	snap, err := s.Snapshot(ctx, false, false, true)
	if err != nil || snap.Online || snap.Header.Get("X-UStreamer-Online") != "false" {
		t.Errorf("allow_offline: %v %+v", err, snap)
	}
	noSignal.Store(false)

	// params: published with the limits, applied follows the restart.
	if err := s.SetParams(streamer.Change{"quality": "55"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "applied quality 55", func() bool {
		return rec.find("streamer", func(m map[string]any) bool {
			a, _ := m["applied"].(map[string]any)
			return a != nil && a["quality"] == 55.0 && m["limits"] != nil
		}) != nil
	})
}

// TestSnapshot: a picture of the signal, saved and loaded, deleted, and
// previews of it.
func TestSnapshot(t *testing.T) {
	rec := &recorder{}
	l := &streamertest.Launcher{Width: 1920, Height: 1080, Source: bars}
	s := streamer.New(streamer.Config{
		Launcher: l, Dir: shortDir(t), StatePoll: 20 * time.Millisecond,
		Video: streamertest.Video{Device: vivid},
	})
	rec.watch(t, s)
	run(t, s)
	ctx := context.Background()
	if _, err := s.Snapshot(ctx, false, true, false); !errors.Is(err, streamer.ErrNoSnapshot) {
		t.Errorf("load with nothing saved: %v", err)
	}
	snap, err := s.Snapshot(ctx, true, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Online || snap.Width != 1920 || snap.Height != 1080 || snap.Header.Get("X-Timestamp") == "" {
		t.Errorf("snapshot %+v", snap)
	}
	loaded, err := s.Snapshot(ctx, false, true, false)
	if err != nil || !bytes.Equal(loaded.Data, snap.Data) {
		t.Errorf("load: %v", err)
	}
	eventually(t, 5*time.Second, "saved snapshot event", func() bool {
		return rec.find("streamer", func(m map[string]any) bool {
			sn, _ := m["snapshot"].(map[string]any)
			sv, _ := sn["saved"].(map[string]any)
			return sv != nil && sv["width"] == 1920.0 && sv["online"] == true
		}) != nil
	})
	s.DeleteSnapshot()
	if _, err := s.Snapshot(ctx, false, true, false); !errors.Is(err, streamer.ErrNoSnapshot) {
		t.Errorf("load after delete: %v", err)
	}

	for _, tt := range []struct {
		w, h, q      int
		wantW, wantH int
	}{
		{0, 0, 80, 384, 216},         // a fifth, kvmd's default
		{640, 0, 80, 640, 360},       // width bound, height the picture's
		{640, 100, 50, 178, 100},     // the tighter bound decides
		{4000, 4000, 80, 1920, 1080}, // never enlarged: the picture itself
	} {
		data, err := s.Preview(snap, tt.w, tt.h, tt.q)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err != nil || cfg.Width != tt.wantW || cfg.Height != tt.wantH {
			t.Errorf("preview %dx%d: %dx%d %v, want %dx%d", tt.w, tt.h, cfg.Width, cfg.Height, err, tt.wantW, tt.wantH)
		}
	}
	// The preview is the picture, scaled: its left bar is white, its
	// right one black.
	data, _ := s.Preview(snap, 0, 0, 90)
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _, _ := img.At(5, 100).RGBA(); r>>8 < 200 {
		t.Errorf("left of the preview is not white: %v", img.At(5, 100))
	}
	if r, g, b, _ := img.At(380, 100).RGBA(); r>>8 > 50 || g>>8 > 50 || b>>8 > 50 {
		t.Errorf("right of the preview is not black: %v", img.At(380, 100))
	}
	if _, err := s.Preview(snap, -1, 0, 80); err == nil {
		t.Error("a negative width was taken")
	}
}
