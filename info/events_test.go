package info

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/hw"
	"kvmd/hw/v4l2test"
)

// listeners is one listener while on.
type listeners struct{ on *atomic.Bool }

func (l listeners) Len() int {
	if l.on.Load() {
		return 1
	}
	return 0
}

// TestWatch: uptime every tick, health and node only when they change,
// each as {"<field>": state}; nothing while nobody listens.
func TestWatch(t *testing.T) {
	root := unpack(t, "rpi4")
	s := New(Config{FS: hw.New(root), V4L2: &v4l2test.Fake{}, TTL: time.Millisecond})
	var mu sync.Mutex
	var got []string
	var listening atomic.Bool
	listening.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Subsystem{S: s, Listeners: listeners{&listening}, Every: 20 * time.Millisecond}.Watch(ctx, func(ev json.RawMessage) {
			var m map[string]json.RawMessage
			if json.Unmarshal(ev, &m) != nil || len(m) != 1 {
				t.Errorf("event %s, want one field", ev)
			}
			mu.Lock()
			defer mu.Unlock()
			for f := range m {
				got = append(got, f)
			}
		})
	}()
	defer func() { cancel(); <-done }()
	events := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(got, " ")
	}
	reset := func() {
		mu.Lock()
		got = nil
		mu.Unlock()
	}
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); !ok(events()); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: events %q", what, events())
			}
		}
	}
	// The fixture's files stay as they are: uptime only.
	waitFor("uptime", func(e string) bool { return strings.Count(e, "uptime") >= 3 })
	if e := events(); strings.Contains(e, "node") {
		t.Errorf("events %q without a change", e)
	}
	os.WriteFile(root+"/sys/class/thermal/thermal_zone0/temp", []byte("81500\n"), 0o644)
	waitFor("health after the temperature rose", func(e string) bool { return strings.Contains(e, "health") })
	os.WriteFile(root+"/proc/sys/kernel/hostname", []byte("kvm-rack-7\n"), 0o644)
	waitFor("node after the host name changed", func(e string) bool { return strings.Contains(e, "node") })

	listening.Store(false)
	time.Sleep(60 * time.Millisecond)
	reset()
	time.Sleep(100 * time.Millisecond)
	if e := events(); e != "" {
		t.Errorf("events %q while nobody listens", e)
	}
}

// TestGreeting: a new client hears one event per sub-manager, in kvmd's
// order, each {"<field>": state}.
func TestGreeting(t *testing.T) {
	s := New(Config{FS: hw.New(unpack(t, "rpi4")), V4L2: &v4l2test.Fake{}})
	var got []string
	for _, ev := range (Subsystem{S: s}).Greeting(context.Background()) {
		var m map[string]json.RawMessage
		if json.Unmarshal(ev, &m) != nil || len(m) != 1 {
			t.Fatalf("event %s, want one field", ev)
		}
		for f := range m {
			got = append(got, f)
		}
	}
	if want := "system auth meta extras health uptime node fan"; strings.Join(got, " ") != want {
		t.Errorf("greeting %q, want %q", strings.Join(got, " "), want)
	}
}
