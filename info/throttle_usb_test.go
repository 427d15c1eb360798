package info

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/hw/mailboxtest"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
)

// hwTree unpacks one of hw's small trees (hw/testdata/SOURCES.md).
func hwTree(t *testing.T, name string) hw.FS {
	t.Helper()
	root := t.TempDir()
	if err := fixture.UnpackFile(filepath.Join("..", "hw", "testdata", name+".ttar"), root); err != nil {
		t.Fatal(err)
	}
	return hw.New(root)
}

// throttlingJSON is hw.health.throttling as a client sees it.
func throttlingJSON(t *testing.T, s *Source) string {
	t.Helper()
	b, err := json.Marshal(get(decode(t, s.Result([]string{"hw"}, true)), "hw", "health", "throttling"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestThrottlingJSON(t *testing.T) {
	// A Pi 4 on 6.12 that browned out at boot: the firmware says so
	// through the mailbox, whatever the hwmon alarm says now.
	s := New(Config{FS: hwTree(t, "pi4-6.12-no-get_throttled"), Mailbox: mailboxtest.New(0x50000), V4L2: &v4l2test.Fake{}})
	want := `{"ignore_past":false,"parsed_flags":{"freq_capped":{"now":false,"past":false},` +
		`"throttled":{"now":false,"past":true},"undervoltage":{"now":false,"past":true}},"raw_flags":327680,"source":"mailbox"}`
	if got := throttlingJSON(t, s); got != want {
		t.Errorf("6.12 with the mailbox:\n got %s\nwant %s", got, want)
	}
	// kvmd's keys first, ours after them.
	h := string(s.Result([]string{"health"}, false))
	if !strings.Contains(h, `"throttling":{"raw_flags":327680,"parsed_flags":{"freq_capped":{"now":false,"past":false},`+
		`"throttled":{"now":false,"past":true},"undervoltage":{"now":false,"past":true}},"ignore_past":false,"source":"mailbox"}`) {
		t.Errorf("throttling JSON layout: %s", h)
	}

	// The same tree on a fixture root (no mailbox): the hwmon alarm,
	// which has seen nothing.
	s = New(Config{FS: hwTree(t, "pi4-6.12-no-get_throttled"), V4L2: &v4l2test.Fake{}})
	if got := throttlingJSON(t, s); !strings.Contains(got, `"raw_flags":0`) || !strings.Contains(got, `"source":"hwmon"`) {
		t.Errorf("6.12 without the mailbox: %s, want hwmon with nothing set", got)
	}

	// No source at all: null, as kvmd says without vcgencmd.
	for _, mb := range []hw.Mailbox{nil, func() hw.Mailbox {
		f := mailboxtest.New(0)
		f.SetErr(fmt.Errorf("open /dev/vcio: %w", fs.ErrNotExist))
		return f
	}()} {
		s = New(Config{FS: hwTree(t, "pi4-mainline-no-throttling"), Mailbox: mb, V4L2: &v4l2test.Fake{}})
		if got := throttlingJSON(t, s); got != "null" {
			t.Errorf("no source (mailbox %v): %s, want null", mb, got)
		}
	}
}

// TestThrottlingHwmonPast: with only the hwmon alarm, under-voltage now is
// the alarm, and past is whether the daemon has seen it since it started.
func TestThrottlingHwmonPast(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := hwTree(t, "pi3-hwmon-undervoltage")
	s := New(Config{FS: f, V4L2: &v4l2test.Fake{}, Now: func() time.Time { return now }})
	flags := func() (NowPast, *Throttling) {
		th := s.Hardware().Health.Throttling
		if th == nil {
			t.Fatal("throttling null with the hwmon alarm present")
		}
		return th.ParsedFlags["undervoltage"], th
	}
	uv, th := flags()
	if uv != (NowPast{Now: true, Past: true}) || th.Source != hw.ThrottleHwmon || th.RawFlags != 0x10001 {
		t.Errorf("alarm 1: %+v, source %s, raw %#x; want now and past, hwmon, 0x10001", uv, th.Source, th.RawFlags)
	}
	// Flags the alarm cannot see stay false, and the source says so.
	if th.ParsedFlags["throttled"] != (NowPast{}) || th.ParsedFlags["freq_capped"] != (NowPast{}) {
		t.Errorf("flags the alarm cannot see: %+v", th.ParsedFlags)
	}

	alarm := f.Path("sys/devices/platform/soc/soc:firmware/raspberrypi-hwmon/hwmon/hwmon0/in0_lcrit_alarm")
	writeFile(t, alarm, "0\n")
	now = now.Add(2 * time.Second)
	if uv, _ := flags(); uv != (NowPast{Now: false, Past: true}) {
		t.Errorf("alarm cleared: %+v, want past only", uv)
	}

	// A daemon started after the event has not seen it.
	s = New(Config{FS: f, V4L2: &v4l2test.Fake{}, Now: func() time.Time { return now }})
	if uv, _ := flags(); uv != (NowPast{}) {
		t.Errorf("new daemon, alarm clear: %+v, want neither", uv)
	}
}

// TestThrottlingMailboxCached: the firmware is asked at most once per TTL
// however many requests come.
func TestThrottlingMailboxCached(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	mb := mailboxtest.New(0)
	s := New(Config{FS: hwTree(t, "pi4-6.12-no-get_throttled"), Mailbox: mb, V4L2: &v4l2test.Fake{},
		Now: func() time.Time { return now }})
	for range 50 {
		s.Result([]string{"hw"}, true)
	}
	if n := len(mb.Requests()); n != 1 {
		t.Errorf("%d mailbox requests for 50 requests within the TTL, want 1", n)
	}
	mb.SetFlags(0x5)
	now = now.Add(2 * time.Second)
	if got := throttlingJSON(t, s); !strings.Contains(got, `"raw_flags":327685`) {
		t.Errorf("after the TTL: %s, want 0x50005", got)
	}
}

func TestUSBFaultsJSON(t *testing.T) {
	for _, tt := range []struct{ tree, status, reason string }{
		{"pi4-no-udc", "no_udc", "dtoverlay=dwc2"},
		{"pi4-no-gadget", "no_gadget", "fe980000.usb"},
	} {
		s := New(Config{FS: hwTree(t, tt.tree), V4L2: &v4l2test.Fake{}})
		u := get(decode(t, s.Result([]string{"usb"}, false)), "usb")
		m, ok := u.(map[string]any)
		if !ok {
			t.Fatalf("%s: usb = %v, want an object", tt.tree, u)
		}
		for _, k := range []string{"udc", "state", "gadget"} {
			if v, has := m[k]; !has || v != nil {
				t.Errorf("%s: %s = %v (present %v), want null", tt.tree, k, v, has)
			}
		}
		if m["connected"] != false || m["status"] != tt.status || !strings.Contains(fmt.Sprint(m["reason"]), tt.reason) {
			t.Errorf("%s: usb = %v, want not connected, status %s, a reason naming %s", tt.tree, m, tt.status, tt.reason)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
