package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/auth"
	"kvmd/board"
	"kvmd/hw"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
	demojournal "kvmd/journal/demo"
)

// demo is what --demo sets up: a throwaway users file with a generated
// password, the bundled Raspberry Pi 4 tree as the filesystem root, a meta
// file, and fakes for the two things no fixture tree can hold: a GPIO chip
// (pins registered with periph, as its drivers register real ones) and a
// V4L2 capture device (answering DV timings for a 1080p60 source).
type demo struct {
	dir     string
	v4l2    hw.V4L2
	pins    []gpio.PinIO
	journal *demojournal.Journal
}

func setupDemo(cfg *Config, stdout io.Writer, log *slog.Logger) (d *demo, err error) {
	d = &demo{}
	d.dir, err = os.MkdirTemp("", "kvmd-demo-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if cfg.Users == "" {
		passwd := rand.Text()[:16]
		hash, err := auth.NewHash(passwd)
		if err != nil {
			return nil, err
		}
		cfg.Users = filepath.Join(d.dir, "htpasswd")
		if err := os.WriteFile(cfg.Users, []byte("admin:"+hash+"\n"), 0o600); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "kvmd demo mode: user admin, password %s\n", passwd)
		if addr := cfg.Listen[0]; !strings.HasPrefix(addr, "unix:") {
			scheme, k := "http", ""
			if cfg.TLSCert != "" {
				scheme, k = "https", "-k "
			}
			fmt.Fprintf(stdout, "  open %s://%s/ in a browser, or\n", scheme, addr)
			fmt.Fprintf(stdout, "  try: curl %s-u admin:%s %s://%s/api/auth/check\n", k, passwd, scheme, addr)
			fmt.Fprintf(stdout, "       curl %s-u admin:%s '%s://%s/api/info?fields=hw'\n", k, passwd, scheme, addr)
		}
	}
	if cfg.Root == "/" {
		cfg.Root = filepath.Join(d.dir, "root")
		if err := fixture.Unpack(bytes.NewReader(board.DemoArchive), cfg.Root); err != nil {
			return nil, fmt.Errorf("demo: unpacking the board tree: %w", err)
		}
	}
	if cfg.Meta == defaultMeta {
		cfg.Meta = filepath.Join(d.dir, "meta.yaml")
		meta := "server:\n  host: \"@auto\"\nkvm:\n  name: kvmd demo\n  note: a Raspberry Pi 4 tree bundled with kvmd, not this machine\n"
		if err := os.WriteFile(cfg.Meta, []byte(meta), 0o600); err != nil {
			return nil, err
		}
	}

	if cfg.JournalDir == "" {
		cfg.JournalDir = filepath.Join(d.dir, "journal")
		d.journal, err = demojournal.Start(cfg.JournalDir, time.Now())
		if err != nil {
			// The rest of the demo works; /api/log answers 503 saying why.
			log.Warn("demo: no demo journal", "err", err)
			err = nil
		}
	}

	fs := hw.New(cfg.Root)
	prof := board.Detect(must(fs.DeviceTree()))
	levels := map[string]gpio.Level{"atx_power_led": gpio.High, "atx_hdd_led": gpio.Low}
	for _, p := range prof.Pins {
		if gpioreg.ByName(p.GPIO) != nil {
			continue // a real chip has it
		}
		fn := "In/Low"
		if strings.HasSuffix(p.Name, "_switch") {
			fn = "Out/Low"
		}
		pin := &gpiotest.Pin{N: p.GPIO, Fn: fn, L: levels[p.Name]}
		if err := gpioreg.Register(pin); err != nil {
			return nil, fmt.Errorf("demo: registering %s: %w", p.GPIO, err)
		}
		d.pins = append(d.pins, pin)
	}
	fake := &v4l2test.Fake{}
	if devs, err := fs.VideoDevices(); err == nil {
		if c, ok := hw.PickCapture(devs); ok {
			fake.Set(fs.Path(strings.TrimPrefix(c.Node, "/")), v4l2test.Device{
				Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60},
			})
		}
	}
	d.v4l2 = fake
	return d, nil
}

func must[T any](v T, _ error) T { return v }

func (d *demo) close() {
	if d.journal != nil {
		d.journal.Close()
	}
	for _, p := range d.pins {
		gpioreg.Unregister(p.Name())
	}
	os.RemoveAll(d.dir)
}
