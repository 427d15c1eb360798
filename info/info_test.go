package info

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
)

func unpack(t *testing.T, board string) string {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "board", "testdata", board+".ttar"), root); err != nil {
		t.Fatal(err)
	}
	return root
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil || res == nil {
		t.Fatalf("not a result object: %v\n%s", err, b)
	}
	return res
}

// get walks a decoded JSON value by keys.
func get(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func TestLayouts(t *testing.T) {
	s := New(Config{FS: hw.New(unpack(t, "rpi4")), Version: "test", V4L2: &v4l2test.Fake{}})
	for _, tt := range []struct {
		fields  string
		legacy  bool
		keys    []string
		sysPlat bool // system carries platform
	}{
		{"", true, []string{"auth", "extras", "fan", "hw", "meta", "node", "system", "uptime"}, false},
		{"system", true, []string{"system"}, true},
		{"system,hw", true, []string{"hw", "system"}, false},
		{"health", true, []string{"health"}, false},
		{"", false, []string{"auth", "extras", "fan", "gpio", "health", "meta", "node", "system", "uptime", "usb", "video"}, true},
	} {
		cats, err := ParseFields(tt.fields, tt.legacy)
		if err != nil {
			t.Fatal(err)
		}
		res := decode(t, s.Result(cats, tt.legacy))
		if strings.Join(sortedKeys(res), ",") != strings.Join(tt.keys, ",") {
			t.Errorf("fields=%q legacy=%v: keys %v, want %v", tt.fields, tt.legacy, sortedKeys(res), tt.keys)
		}
		if sys, ok := res["system"]; ok {
			if _, has := sys.(map[string]any)["platform"]; has != tt.sysPlat {
				t.Errorf("fields=%q legacy=%v: system.platform present %v, want %v", tt.fields, tt.legacy, has, tt.sysPlat)
			}
		}
	}
	res := decode(t, s.Result([]string{"health", "hw"}, true))
	h1, _ := json.Marshal(res["health"])
	h2, _ := json.Marshal(get(res, "hw", "health"))
	if string(h1) != string(h2) {
		t.Errorf("health by name differs from hw.health:\n%s\n%s", h1, h2)
	}
}

func sortedKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// TestChangingTree changes the machine under a running Source: every
// change shows within two seconds, and no request ever fails.
func TestChangingTree(t *testing.T) {
	root := unpack(t, "rpi4")
	fake := &v4l2test.Fake{}
	fs := hw.New(root)
	node := fs.Path("dev/video0")
	fake.Set(node, v4l2test.Device{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}})
	s := New(Config{FS: fs, V4L2: fake, Version: "test", TTL: 300 * time.Millisecond})
	cats, _ := ParseFields("hw,uptime,node", true)

	// Readers hammer the source throughout; none may see a broken reply.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				var res map[string]any
				if b := s.Result(cats, true); json.Unmarshal(b, &res) != nil || len(res) != len(cats) {
					bad.Store(string(b))
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
		if b := bad.Load(); b != nil {
			t.Errorf("a reply was broken: %s", b)
		}
	}()

	write := func(rel, data string) {
		t.Helper()
		if err := os.WriteFile(fs.Path(rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	temp := func() any { return get(decode(t, s.Result(cats, true)), "hw", "health", "temp", "cpu") }
	within := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 2 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	zone, _ := filepath.Glob(fs.Path("sys/class/thermal/thermal_zone0"))
	if len(zone) == 0 {
		t.Fatal("fixture has no thermal_zone0")
	}
	tempFile := "sys/class/thermal/thermal_zone0/temp"

	write(tempFile, "81500\n")
	within("temperature rises", func() bool { return temp() == 81.5 })

	write(tempFile, "garbage\n")
	within("garbage temperature is null", func() bool { return temp() == nil })

	write(tempFile, "40000\n")
	within("temperature back", func() bool { return temp() == 40.0 })

	os.Remove(fs.Path(tempFile))
	within("vanished temperature is null", func() bool { return temp() == nil })

	udc, _ := filepath.Glob(fs.Path("sys/class/udc/*/state"))
	if len(udc) != 1 {
		t.Fatalf("fixture UDCs: %v", udc)
	}
	rel, _ := filepath.Rel(root, udc[0])
	write(rel, "not attached\n")
	within("cable unplugged", func() bool {
		u := get(decode(t, s.Result(cats, true)), "hw", "usb")
		return get(u, "connected") == false && get(u, "state") == "not attached"
	})

	fake.Set(node, v4l2test.Device{Err: hw.ErrNoSignal})
	within("HDMI signal lost", func() bool {
		return get(decode(t, s.Result(cats, true)), "hw", "video", "signal") == false
	})

	write("proc/uptime", "100000.5 1.0\n")
	within("uptime", func() bool {
		return get(decode(t, s.Result(cats, true)), "uptime", "total") == 100000.0
	})

	write("proc/meminfo", "\x00\xff nonsense")
	within("broken meminfo is null", func() bool {
		return get(decode(t, s.Result(cats, true)), "hw", "health", "mem", "total") == nil
	})

	write("proc/sys/kernel/hostname", "kvm-rack-7\n")
	within("host name", func() bool {
		return get(decode(t, s.Result(cats, true)), "node", "host") == "kvm-rack-7"
	})
}

func TestMetaAndExtras(t *testing.T) {
	root := unpack(t, "rpi4")
	dir := t.TempDir()
	meta := filepath.Join(dir, "meta.yaml")
	os.WriteFile(meta, []byte("server:\n  host: \"@auto\"\nkvm: {name: rack 7}\n1: numeric key\n"), 0o644)
	extras := filepath.Join(dir, "extras")
	for name, manifest := range map[string]string{
		"ipmi":    "name: IPMI\ndaemon: kvmd-ipmi\nport: ipmi/server/port\nplace: 25\n",
		"web-vnc": "name: VNC\ndaemon: kvmd-vnc\n",
		"broken":  "name: [unterminated\n",
		".hidden": "name: hidden\n",
	} {
		os.MkdirAll(filepath.Join(extras, name), 0o755)
		os.WriteFile(filepath.Join(extras, name, "manifest.yaml"), []byte(manifest), 0o644)
	}
	// kvmd-vnc is enabled and running, kvmd-ipmi neither.
	fs := hw.New(root)
	os.MkdirAll(fs.Path("etc/systemd/system/multi-user.target.wants"), 0o755)
	os.Symlink("/usr/lib/systemd/system/kvmd-vnc.service", fs.Path("etc/systemd/system/multi-user.target.wants/kvmd-vnc.service"))
	os.MkdirAll(fs.Path("run/systemd/units"), 0o755)
	os.Symlink("8b4f", fs.Path("run/systemd/units/invocation:kvmd-vnc.service"))

	s := New(Config{FS: fs, MetaPath: meta, ExtrasDir: extras, V4L2: &v4l2test.Fake{}})
	res := decode(t, s.Result([]string{"extras", "meta"}, true))
	if h := get(res, "meta", "server", "host"); h != "raspberrypi" {
		t.Errorf("meta server.host = %v, want the tree's host name for @auto", h)
	}
	if v := get(res, "meta", "1"); v != "numeric key" {
		t.Errorf("meta numeric key: %v", v)
	}
	want := map[string][2]any{"ipmi": {false, false}, "web_vnc": {true, true}}
	for name, st := range want {
		if e, s := get(res, "extras", name, "enabled"), get(res, "extras", name, "started"); e != st[0] || s != st[1] {
			t.Errorf("extras %s: enabled %v started %v, want %v", name, e, s, st)
		}
	}
	if p := get(res, "extras", "ipmi", "port"); p != 0.0 {
		t.Errorf("extras port path: %v, want 0", p)
	}
	if get(res, "extras", "broken") != nil || get(res, "extras", ".hidden") != nil || get(res, "extras", "_hidden") != nil {
		t.Errorf("broken or hidden add-ons listed: %v", res["extras"])
	}

	// No meta file: null; not a mapping: {}.
	s = New(Config{FS: fs, MetaPath: filepath.Join(dir, "nope.yaml"), V4L2: &v4l2test.Fake{}})
	if res := decode(t, s.Result([]string{"meta"}, true)); res["meta"] != nil {
		t.Errorf("missing meta: %v, want null", res["meta"])
	}
}

func TestConcurrentFirstRequest(t *testing.T) {
	s := New(Config{FS: hw.New(unpack(t, "zero2w")), V4L2: &v4l2test.Fake{}})
	cats, _ := ParseFields("", true)
	var wg sync.WaitGroup
	out := make([]string, 50)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = string(s.Result(cats, true))
		}()
	}
	wg.Wait()
	for i := range out {
		if out[i] != out[0] {
			t.Fatalf("concurrent first requests disagree:\n%s\n%s", out[0], out[i])
		}
	}
}
