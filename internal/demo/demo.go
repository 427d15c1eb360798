// Package demo sets up kvmd serve --demo: a throwaway users file with a
// generated password, the bundled Raspberry Pi 4 tree as the filesystem
// root, a meta file, a demo journal, an empty 2FA secret file (2FA off,
// to be turned on from the web UI), a directory for the virtual media's
// images, and fakes for the things no fixture tree can hold: a GPIO chip
// (pins registered with periph, as its drivers
// register real ones), a V4L2 capture device (answering DV timings for a
// 1080p60 source), a streamer serving a generated picture of that size
// (streamertest, in place of ustreamer), the firmware's mailbox (no
// throttling, now or since boot), and a host computer for the keyboard
// and mouse (hid.go).
//
// It holds test fakes (periph's gpiotest, hw/v4l2test, hw/mailboxtest,
// streamer/streamertest), so only the demo build of kvmd imports it (go
// build -tags demo, as make run does); a test keeps it out of the release
// binary.
package demo

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
	"kvmd/hid"
	"kvmd/hw"
	"kvmd/hw/mailboxtest"
	"kvmd/hw/v4l2test"
	"kvmd/internal/fixture"
	"kvmd/internal/slogjournal"
	demojournal "kvmd/journal/demo"
	"kvmd/streamer"
	"kvmd/streamer/streamertest"
)

// Options are the operator's settings; an empty one gets the demo's own.
type Options struct {
	Users      string // users file
	Root       string // filesystem root the hardware is read under
	Meta       string // meta file
	JournalDir string // journal files for /api/log
	TOTPSecret string // 2FA secret file
	MSDDir     string // the virtual media's image storage
	// Listen is the first address served and TLS whether it speaks TLS,
	// for the hint printed with the generated password.
	Listen string
	TLS    bool
}

// Demo is a running demo: the settings to serve with, and the fakes.
type Demo struct {
	Users, Root, Meta, JournalDir string
	// TOTPSecret is the 2FA secret file: the operator's, or an empty one
	// (2FA off) in the demo's directory, so that a newcomer can turn 2FA
	// on and off from the web UI.
	TOTPSecret string
	// MSDDir is the virtual media's image storage: the operator's, or
	// one in the demo's directory with a blank flash image to try.
	MSDDir  string
	V4L2    hw.V4L2
	Mailbox hw.Mailbox
	// Streamer serves a generated picture (Picture) where ustreamer would
	// serve the capture's.
	Streamer streamer.Launcher
	// Journal is the demo journal, nil when it could not be started (then
	// /api/log answers 503 saying why).
	Journal *demojournal.Journal
	// HIDOpen is hid.Config.Open: the keyboard and mouse go to a stand-in
	// host that logs what it gets (hid.go).
	HIDOpen func(function string, writeOnly bool) (hid.File, error)
	hidHost *hidHost

	dir  string
	pins []gpio.PinIO
}

// Start sets up the demo, printing the generated credentials to stdout.
// Close undoes it.
func Start(o Options, stdout io.Writer, log *slog.Logger) (d *Demo, err error) {
	d = &Demo{Users: o.Users, Root: o.Root, Meta: o.Meta, JournalDir: o.JournalDir, TOTPSecret: o.TOTPSecret, MSDDir: o.MSDDir}
	d.dir, err = os.MkdirTemp("", "kvmd-demo-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.Users == "" {
		passwd := rand.Text()[:16]
		hash, err := auth.NewHash(passwd)
		if err != nil {
			return nil, err
		}
		d.Users = filepath.Join(d.dir, "htpasswd")
		// Through the credential store, like every write of the users
		// file.
		store, err := auth.OpenStore(d.Users, auth.StoreConfig{})
		if err != nil {
			return nil, err
		}
		if err := store.Edit(nil, func(e *auth.Edit) error { return e.AddUser("admin", hash, auth.RoleNone) }); err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "kvmd demo mode: user admin, password %s\n", passwd)
		if addr := o.Listen; addr != "" && !strings.HasPrefix(addr, "unix:") {
			scheme, k := "http", ""
			if o.TLS {
				scheme, k = "https", "-k "
			}
			fmt.Fprintf(stdout, "  open %s://%s/ in a browser, or\n", scheme, addr)
			fmt.Fprintf(stdout, "  try: curl %s-u admin:%s %s://%s/api/auth/check\n", k, passwd, scheme, addr)
			fmt.Fprintf(stdout, "       curl %s-u admin:%s '%s://%s/api/info?fields=hw'\n", k, passwd, scheme, addr)
		}
	}
	if d.TOTPSecret == "" {
		d.TOTPSecret = filepath.Join(d.dir, "totp.secret")
		if _, err := (auth.TOTPFile{Path: d.TOTPSecret}).Create(); err != nil {
			return nil, err
		}
	}
	if d.Root == "" {
		d.Root = filepath.Join(d.dir, "root")
		if err := fixture.Unpack(bytes.NewReader(board.DemoArchive), d.Root); err != nil {
			return nil, fmt.Errorf("demo: unpacking the board tree: %w", err)
		}
	}
	if d.Meta == "" {
		d.Meta = filepath.Join(d.dir, "meta.yaml")
		meta := "server:\n  host: \"@auto\"\nkvm:\n  name: kvmd demo\n  note: a Raspberry Pi 4 tree bundled with kvmd, not this machine\n"
		if err := os.WriteFile(d.Meta, []byte(meta), 0o600); err != nil {
			return nil, err
		}
	}

	if d.MSDDir == "" {
		// The virtual media's storage, with one image to try: a blank
		// flash drive of 4 MiB (sparse, it takes no space).
		d.MSDDir = filepath.Join(d.dir, "msd")
		if err := os.Mkdir(d.MSDDir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(d.MSDDir, "blank-flash.img"), nil, 0o600); err != nil {
			return nil, err
		}
		if err := os.Truncate(filepath.Join(d.MSDDir, "blank-flash.img"), 4<<20); err != nil {
			return nil, err
		}
	}

	if d.JournalDir == "" {
		d.JournalDir = filepath.Join(d.dir, "journal")
		d.Journal, err = demojournal.Start(d.JournalDir, time.Now())
		if err != nil {
			// The rest of the demo works; /api/log answers 503 saying why.
			log.Warn("demo: no demo journal", "err", err)
			d.Journal, err = nil, nil
		}
	}

	fs := hw.New(d.Root)
	facts, _ := board.Read(fs) // what cannot be read leaves no profile, no pins
	prof := board.Identify(facts)
	levels := map[string]gpio.Level{"atx_power_led": gpio.High, "atx_hdd_led": gpio.Low}
	var powerLED *gpiotest.Pin
	for _, p := range prof.Pins {
		if gpioreg.ByName(p.GPIO) != nil {
			continue // a real chip has it
		}
		fn := "In/Low"
		if strings.HasSuffix(p.Name, "_switch") {
			fn = "Out/Low"
		}
		pin := &gpiotest.Pin{N: p.GPIO, Fn: fn, L: levels[p.Name]}
		var reg gpio.PinIO = pin
		if button, ok := strings.CutSuffix(p.Name, "_switch"); ok {
			sw := &demoButton{Pin: pin, name: strings.TrimPrefix(button, "atx_"), log: log}
			if p.Name == "atx_power_switch" {
				sw.led = powerLED
			}
			reg = sw
		}
		if p.Name == "atx_power_led" {
			powerLED = pin
		}
		if err := gpioreg.Register(reg); err != nil {
			return nil, fmt.Errorf("demo: registering %s: %w", p.GPIO, err)
		}
		d.pins = append(d.pins, pin)
	}
	fake := &v4l2test.Fake{}
	if devs, err := fs.VideoDevices(); err == nil {
		dt, _ := fs.DeviceTree()
		if c, ok := hw.PickCapture(devs, dt.Model); ok {
			fake.Set(fs.Path(strings.TrimPrefix(c.Node, "/")), v4l2test.Device{
				Timings: hw.Timings{Width: 1920, Height: 1080, FPS: 60},
			})
		}
	}
	d.V4L2 = fake
	d.Streamer = &streamertest.Launcher{
		Program: streamer.Program{Version: "demo", Features: map[string]bool{}},
		Source:  Picture, Width: pictureWidth, Height: pictureHeight,
	}
	if os.Getenv("KVMD_DEMO_STAMP") == "1" {
		// make bench's latency: every picture drawn anew, with its
		// number and the time it was drawn in it (framestamp).
		l := d.Streamer.(*streamertest.Launcher)
		l.Source, l.Redraw = StampedPicture(), time.Nanosecond
	}
	// What vcgencmd get_throttled prints on a healthy board: throttled=0x0
	// (board/testdata/SOURCES.md, dog5).
	d.Mailbox = mailboxtest.New(0)
	d.hidHost = startHIDHost(d.Log(log).With("component", "demo-host"))
	d.HIDOpen = d.hidHost.Open
	return d, nil
}

// Log returns log, also writing every record to the demo journal as the
// service's own line, so that /api/log follows the daemon live.
func (d *Demo) Log(log *slog.Logger) *slog.Logger {
	if d.Journal == nil {
		return log
	}
	return slog.New(slogjournal.NewTee(func(e slogjournal.Entry) error {
		d.Journal.Append("kvmd.service", e.Message())
		return nil
	}, log.Handler()))
}

// Close stops the demo journal, unregisters the fake pins and removes the
// demo's files.
func (d *Demo) Close() {
	if d.hidHost != nil {
		d.hidHost.close()
	}
	if d.Journal != nil {
		d.Journal.Close()
	}
	for _, p := range d.pins {
		gpioreg.Unregister(p.Name())
	}
	os.RemoveAll(d.dir)
}

// demoButton is a button of the demo host, behind an ATX switch pin. It
// says in the log when it is pressed and released, so that a newcomer sees
// what a click did (and a test sees that the daemon let go of it). The
// power button, led set, turns the power LED on or off on each press (high,
// then low), as a short press of a real PC's button starts it or asks it
// to shut down.
type demoButton struct {
	*gpiotest.Pin
	name string
	led  *gpiotest.Pin
	log  *slog.Logger
}

func (b *demoButton) Out(l gpio.Level) error {
	was := b.Read()
	if err := b.Pin.Out(l); err != nil {
		return err
	}
	switch {
	case was == gpio.Low && l == gpio.High:
		b.log.Info("demo host: " + b.name + " button pressed")
	case was == gpio.High && l == gpio.Low:
		b.log.Info("demo host: " + b.name + " button released")
		if b.led != nil {
			b.led.Lock()
			b.led.L = !b.led.L
			b.led.Unlock()
		}
	}
	return nil
}
