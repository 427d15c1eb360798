package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/otg"
)

// parseOTGArgs parses args as kvmd otg start does, with a default
// settings file of the test's own that does not exist (the machine's
// /etc/kvmd/otg.yaml may).
func parseOTGArgs(t *testing.T, args ...string) (otgConfig, error) {
	t.Helper()
	fset := flag.NewFlagSet("kvmd otg start", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	return parseOTG(fset, args, filepath.Join(t.TempDir(), "otg.yaml"))
}

// TestParseOTG: the settings file under the flags, PiKVM's defaults
// without either, IDs as YAML integers or strings.
func TestParseOTG(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "otg.yaml")
	if err := os.WriteFile(file, []byte("udc: fe980000.usb\nvendor-id: 0x1209\nproduct-id: \"0xEDA3\"\nserial: ''\nmax-power: 100\nudc-wait: 5s\nrelative-mouse: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := parseOTGArgs(t, "--config", file, "--product", "Lab KVM", "--max-power", "200")
	if err != nil {
		t.Fatal(err)
	}
	want := defaultOTG()
	want.UDC, want.VendorID, want.ProductID, want.Serial, want.UDCWait = "fe980000.usb", 0x1209, 0xeda3, "", 5*time.Second
	want.Product, want.MaxPower, want.RelativeMouse = "Lab KVM", 200, false
	if c != want {
		t.Errorf("parseOTG = %+v\nwant %+v", c, want)
	}

	// No file at the default path: the defaults, which are PiKVM's.
	c, err = parseOTGArgs(t)
	if err != nil || c != defaultOTG() {
		t.Errorf("no settings file: %+v, %v", c, err)
	}
	c.User = "root" // this machine has no user kvmd
	s, err := c.settings()
	if err != nil || s.VendorID != 0x1d6b || s.ProductID != 0x0104 || s.Manufacturer != "PiKVM" || s.Serial != "CAFEBABE" || !s.RelativeMouse {
		t.Errorf("default settings %+v, %v", s, err)
	}

	for name, args := range map[string][]string{
		"a missing named file": {"--config", filepath.Join(dir, "none.yaml")},
		"a bad ID":             {"--vendor-id", "0x10000"},
		"an argument":          {"extra"},
	} {
		if _, err := parseOTGArgs(t, args...); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := os.WriteFile(file, []byte("vendor: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseOTGArgs(t, "--config", file); err == nil || !strings.Contains(err.Error(), "vendor") {
		t.Errorf("an unknown key: %v", err)
	}
	if _, err := (otgConfig{User: "no-such-user-kvmd-test", Manufacturer: "m", Product: "p"}).settings(); err == nil {
		t.Error("an unknown user: no error")
	}
}

// TestOTGCmd runs kvmd otg on a root without configfs and on one without
// a controller: each fails with its error, and status says what hw.usb
// would.
func TestOTGCmd(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"proc/self", "sys/kernel/config", "sys/class/udc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mounts := filepath.Join(root, "proc/self/mounts")
	if err := os.WriteFile(mounts, []byte("sysfs /sys sysfs rw 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	args := []string{"otg", "start", "--root", root, "--user", "root", "--config", os.DevNull}
	err := run(context.Background(), args, nil, &out, io.Discard)
	if !errors.Is(err, otg.ErrNoConfigfs) {
		t.Errorf("kvmd otg start without configfs: %v", err)
	}

	if err := os.WriteFile(mounts, []byte("configfs /sys/kernel/config configfs rw 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/kernel/config/usb_gadget"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), args, nil, &out, io.Discard)
	if !errors.Is(err, otg.ErrNoUDC) {
		t.Errorf("kvmd otg start without a controller: %v", err)
	}

	out.Reset()
	if err := run(context.Background(), []string{"otg", "status", "--root", root, "--config", os.DevNull}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var u struct{ Status string }
	if err := json.Unmarshal(out.Bytes(), &u); err != nil || u.Status != "no_udc" {
		t.Errorf("kvmd otg status: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"otg", "stop", "--root", root, "--config", os.DevNull}, nil, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "nothing to stop") {
		t.Errorf("kvmd otg stop without a gadget: %v\n%s", err, out.String())
	}
}
