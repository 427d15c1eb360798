package diag

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/board"
	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/info"
	"kvmd/internal/fixture"
	"kvmd/journal/journaltest"
)

const (
	thisBoot = "6b766d64746573740000000000000002"
	prevBoot = "6b766d64746573740000000000000001"
)

// env is a device made of the demo board's tree (a real Raspberry Pi 4
// capture, board/testdata) and a journal of two boots written by
// systemd-journal-remote.
type env struct {
	root, journal string
	now           time.Time
	v4l2          *v4l2test.Fake
}

func newEnv(t *testing.T, entries ...journaltest.Entry) *env {
	t.Helper()
	e := &env{root: filepath.Join(t.TempDir(), "root"), journal: t.TempDir(), now: time.Now()}
	if err := fixture.Unpack(bytes.NewReader(board.DemoArchive), e.root); err != nil {
		t.Fatal(err)
	}
	base := []journaltest.Entry{
		{Time: e.now.Add(-30 * time.Hour), Boot: prevBoot, Unit: "kvmd.service", Message: "kvmd listening version=v0.9 previous-boot-line"},
		{Time: e.now.Add(-29 * time.Hour), Boot: prevBoot, Unit: "kvmd.service", Message: "shutting down"},
		{Time: e.now.Add(-2 * time.Hour), Boot: thisBoot, Fields: map[string]string{"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel"},
			Message: "hwmon hwmon1: Undervoltage detected!"},
		{Time: e.now.Add(-2 * time.Hour), Boot: thisBoot, Unit: "kvmd.service", Message: "kvmd listening version=v1.0 this-boot-line"},
		{Time: e.now.Add(-90 * time.Minute), Boot: thisBoot, Unit: "kvmd.service", Message: `auth failed user=admin method=xhdr addr=192.168.1.77 reason="wrong user or password"`},
		{Time: e.now.Add(-20 * time.Minute), Boot: thisBoot, Unit: "kvmd.service", Message: `auth failed user=admin method=xhdr addr=192.168.1.77 reason="wrong user or password"`},
		{Time: e.now.Add(-19 * time.Minute), Boot: thisBoot, Unit: "kvmd.service", Message: `auth failures held back user=admin addr=192.168.1.77 count=4 last_method=xhdr last_reason="wrong user or password" interval=10s`},
		{Time: e.now.Add(-10 * time.Minute), Boot: thisBoot, Unit: "sshd.service", Message: "auth failed user=root (not the service's)"},
	}
	journaltest.Write(t, e.journal, "system", append(base, entries...))
	e.v4l2 = &v4l2test.Fake{}
	e.v4l2.Set(filepath.Join(e.root, "dev/video0"), v4l2test.Device{Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60}})
	return e
}

func (e *env) config(r *Redactor) Config {
	fs := hw.New(e.root)
	return Config{
		FS:      fs,
		Info:    info.New(info.Config{FS: fs, V4L2: e.v4l2, Version: "v-test"}),
		V4L2:    e.v4l2,
		Journal: Journal{Dir: e.journal, Units: []string{"kvmd.service", "kvmd-*.service"}},
		Version: "v-test", Settings: []byte("listen:\n    - 127.0.0.1:8080\n"),
		Redactor: r, Now: func() time.Time { return e.now },
	}
}

// unzip opens a bundle as any zip reader would, and returns its files in
// order.
func unzip(t *testing.T, data []byte) ([]string, map[string]string) {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("the bundle is not a zip archive: %v", err)
	}
	var names []string
	files := map[string]string{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		names = append(names, f.Name)
		files[f.Name] = string(b)
	}
	return names, files
}

func TestBundle(t *testing.T) {
	e := newEnv(t)
	var progress []string
	cfg := e.config(nil)
	cfg.Progress = func(r Result) { progress = append(progress, r.Name) }
	counts := &authCounts{n: 5}
	cfg.Auth = counts
	b := New(cfg)
	var out bytes.Buffer
	if err := b.Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if dst := os.Getenv("DIAG_KEEP"); dst != "" {
		os.WriteFile(dst, out.Bytes(), 0o600) // to look at by hand
	}
	names, files := unzip(t, out.Bytes())
	if len(names) == 0 || names[0] != "summary.txt" {
		t.Fatalf("files %q: summary.txt is not first", names)
	}
	for _, want := range []string{"info.json", "journal/this-boot.txt", "journal/previous-boot.txt", "kernel.txt", "usb.txt",
		"video.txt", "gpio.txt", "throttling.txt", "network.txt", "systemd.txt", "disk-memory.txt", "versions.txt", "config.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no %s in %q", want, names)
		}
	}
	if len(progress) != len(b.probes()) {
		t.Errorf("progress heard of %d probes, want %d", len(progress), len(b.probes()))
	}
	sum := files["summary.txt"]
	for _, want := range []string{
		// The authenticator's count, not the journal's lines.
		"5 failed logins in the last hour",
		"Board:   Raspberry Pi 4 Model B Rev 1.1",
		"systemd.txt", "skipped: the filesystem root is not this machine's",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, sum)
		}
	}
	// The demo tree's gadget is configured and the fake answers 1080p60:
	// neither is a finding.
	for _, not := range []string{"USB host not connected", "no HDMI signal", "FAILED"} {
		if strings.Contains(sum, not) {
			t.Errorf("summary.txt says %q:\n%s", not, sum)
		}
	}
	if this := files["journal/this-boot.txt"]; !strings.Contains(this, "this-boot-line") || strings.Contains(this, "previous-boot-line") || strings.Contains(this, "not the service's") {
		t.Errorf("journal/this-boot.txt:\n%s", this)
	}
	if prev := files["journal/previous-boot.txt"]; !strings.Contains(prev, "previous-boot-line") || strings.Contains(prev, "this-boot-line") {
		t.Errorf("journal/previous-boot.txt:\n%s", prev)
	}
	if k := files["kernel.txt"]; !strings.Contains(k, "Undervoltage detected!") || strings.Contains(k, "this-boot-line") {
		t.Errorf("kernel.txt:\n%s", k)
	}
	if th := files["throttling.txt"]; !strings.Contains(th, "Undervoltage detected!") || !strings.Contains(th, `"source": "sysfs"`) {
		t.Errorf("throttling.txt lacks the kernel's history or the source:\n%s", th)
	}
	// A configuration's link is shown with its target as written.
	if u := files["usb.txt"]; !strings.Contains(u, "/sys/kernel/config/usb_gadget/kvmd/idVendor: 0x1d6b") || !strings.Contains(u, "state: configured") ||
		!strings.Contains(u, "/sys/kernel/config/usb_gadget/kvmd/configs/c.1/hid.usb0 -> ../../../../usb_gadget/kvmd/functions/hid.usb0\n") {
		t.Errorf("usb.txt:\n%s", u)
	}
	if v := files["video.txt"]; !strings.Contains(v, `"width": 1920`) {
		t.Errorf("video.txt lacks the timings:\n%s", v)
	}
	if i := files["info.json"]; !strings.Contains(i, `"host": "raspberrypi"`) {
		t.Errorf("info.json:\n%s", i)
	}
	if got, want := b.FileName(), "kvmd-diag-raspberrypi-"+e.now.UTC().Format("20060102T150405Z")+".zip"; got != want {
		t.Errorf("FileName() = %q, want %q", got, want)
	}
	if want := e.now.UTC().Add(-time.Hour); !counts.since.Equal(want) {
		t.Errorf("asked for the failures since %v, want %v", counts.since, want)
	}
	if a := files["journal/auth-last-hour.txt"]; !strings.Contains(a, "5 failed authentication attempts since") {
		t.Errorf("journal/auth-last-hour.txt:\n%s", a)
	}
}

// authCounts is the daemon's authenticator, for FailuresSince.
type authCounts struct {
	n     int
	since time.Time
}

func (a *authCounts) FailuresSince(t time.Time) int { a.since = t; return a.n }

// TestFailedLoginsAreCounted: the journal's "auth failed" lines are not
// counted (they are auth's wording, free to change): without the
// daemon's count the bundle says it has none, and finds nothing.
func TestFailedLoginsAreCounted(t *testing.T) {
	e := newEnv(t)
	var out bytes.Buffer
	if err := New(e.config(nil)).Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	_, files := unzip(t, out.Bytes())
	if strings.Contains(files["summary.txt"], "failed logins") {
		t.Errorf("summary.txt counts failed logins without the daemon's count:\n%s", files["summary.txt"])
	}
	if a := files["journal/auth-last-hour.txt"]; !strings.Contains(a, "not counted here") {
		t.Errorf("journal/auth-last-hour.txt:\n%s", a)
	}
}

// TestFindings turns a tree with no USB host and a hot CPU into findings.
func TestFindings(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.root, "sys/devices/platform/soc/fe980000.usb/udc/fe980000.usb/state"), []byte("not attached\n"), 0o644)
	os.WriteFile(filepath.Join(e.root, "sys/devices/virtual/thermal/thermal_zone0/temp"), []byte("85312\n"), 0o644)
	e.v4l2.Set(filepath.Join(e.root, "dev/video0"), v4l2test.Device{Err: hw.ErrNoSignal})
	// Bits 16 and 18: under-voltage and throttling since boot, not now
	// (what vcgencmd get_throttled prints as 0x50000).
	os.WriteFile(filepath.Join(e.root, "sys/devices/platform/soc/soc:firmware/get_throttled"), []byte("50000\n"), 0o644)
	var out bytes.Buffer
	if err := New(e.config(nil)).Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	_, files := unzip(t, out.Bytes())
	for _, want := range []string{"USB host not connected (controller state: not attached)", "temperature above 80 °C: CPU at 85.3 °C", "no HDMI signal",
		"under-voltage since boot: the power supply dipped at least once (source: sysfs)", "CPU throttled since boot"} {
		if !strings.Contains(files["summary.txt"], want) {
			t.Errorf("summary.txt lacks %q:\n%s", want, files["summary.txt"])
		}
	}
}

// TestHangingProbes: journalctl that never answers, and a FIFO where the
// gadget's UDC file should be (opening it blocks, as a wedged driver's
// attribute can), are cut at the probe timeout; the bundle is complete
// and says so.
func TestHangingProbes(t *testing.T) {
	e := newEnv(t)
	slow := filepath.Join(t.TempDir(), "journalctl")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	udc := filepath.Join(e.root, "sys/kernel/config/usb_gadget/kvmd/UDC")
	os.Remove(udc)
	if err := syscall.Mkfifo(udc, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Release the readers the cut probes left blocked on the FIFO.
		for range 4 {
			if f, err := os.OpenFile(udc, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
	cfg := e.config(nil)
	cfg.Journal.Journalctl = slow
	cfg.ProbeTimeout = 300 * time.Millisecond
	cfg.Timeout = 5 * time.Second
	start := time.Now()
	var out bytes.Buffer
	if err := New(cfg).Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the bundle took %v with probes that hang; each should be cut at 300ms", took)
	}
	names, files := unzip(t, out.Bytes())
	sum := files["summary.txt"]
	for _, p := range []string{"journal/this-boot.txt", "journal/previous-boot.txt", "kernel.txt", "usb.txt", "info.json"} {
		line := ""
		for l := range strings.SplitSeq(sum, "\n") {
			if strings.HasPrefix(l, p+" ") {
				line = l
			}
		}
		if !strings.Contains(line, "FAILED: cut at its 300ms timeout") {
			t.Errorf("summary.txt's line for %s is %q, want it cut at the timeout:\n%s", p, line, sum)
		}
		if !strings.Contains(files[p], "failed after") {
			t.Errorf("%s does not say its probe failed:\n%s", p, files[p])
		}
	}
	// The probes that do not hang still answered.
	if !strings.Contains(files["versions.txt"], "kvmd: v-test") || !strings.Contains(files["video.txt"], `"width": 1920`) {
		t.Errorf("the other probes gave nothing: %q", names)
	}
}

// TestOverallLimit: with every probe hanging longer than the bundle's
// limit, the bundle ends at the limit, and the probes that did not get
// to run say so.
func TestOverallLimit(t *testing.T) {
	e := newEnv(t)
	slow := filepath.Join(t.TempDir(), "journalctl")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(nil)
	cfg.Journal.Journalctl = slow
	cfg.ProbeTimeout, cfg.Timeout = 2*time.Second, 500*time.Millisecond
	start := time.Now()
	var out bytes.Buffer
	if err := New(cfg).Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the bundle took %v, its limit is 500ms", took)
	}
	_, files := unzip(t, out.Bytes())
	if sum := files["summary.txt"]; !strings.Contains(sum, "the bundle's 500ms limit was reached") {
		t.Errorf("summary.txt does not say the limit cut probes:\n%s", sum)
	}
}
