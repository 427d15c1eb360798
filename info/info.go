// Package info builds the categories of GET /api/info from the machine
// (package hw, through a filesystem root), the board profile (package
// board) and the operator's files (meta, extras).
//
// Facts that cannot change while the daemon runs (board, serial, kernel,
// version) are read once. Values that change are read at most once per TTL
// and kept as ready JSON, so a request costs a few copies however many
// clients ask, and no process is ever spawned for one.
package info

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/board"
	"kvmd/hw"
)

// Config is what a Source reads from.
type Config struct {
	FS hw.FS
	// V4L2 queries the capture device; nil means the real ioctls.
	V4L2 hw.V4L2
	// Mailbox asks the VideoCore firmware (throttling flags); nil means
	// none, as on a fixture root, whose firmware is not this machine's:
	// the caller wires hw.VCIO only when FS is rooted at "/".
	Mailbox hw.Mailbox
	// MetaPath is the operator's YAML description; ExtrasDir holds one
	// directory per add-on with a manifest.yaml. Empty: null and {}.
	MetaPath  string
	ExtrasDir string
	Version   string
	// TwoFactor tells whether 2FA is on, for the auth category.
	TwoFactor func() bool
	Log       *slog.Logger
	// Streamer, when set, is asked what the video streamer's program is
	// (its --version and --features, kvmd's system.streamer), once, at the
	// first request for the system category; StreamerApp is the
	// program's name. Nil, or a program that cannot be asked (not
	// installed): empty values.
	Streamer    StreamerProgram
	StreamerApp string
	// TTL bounds the age of changing values (default 1 s).
	TTL time.Duration
	Now func() time.Time
}

// Source answers /api/info.
type Source struct {
	cfg     Config
	profile board.Profile

	systemOnce             sync.Once
	systemFull, systemBare []byte // with and without platform
	platform               []byte

	// The changing categories, each cached with its own type; jsonOf
	// finds their JSON by name.
	auth   *cached[authState]
	extras *cached[map[string]any]
	fan    *cached[fan]
	gpio   *cached[map[string]hw.PinState]
	health *cached[Health]
	meta   *cached[map[string]any]
	node   *cached[node]
	uptime *cached[Uptime]
	usb    *cached[*hw.USB]
	video  *cached[*hw.Video]
	jsonOf map[string]func() []byte

	// gen counts the builds of the changing categories: a result made
	// when it was n holds what every category held then.
	gen atomic.Uint64
	// results are the answers made, by the set of categories asked
	// (catMask), for a repeat while no category is rebuilt: /api/info is
	// asked by every page and client, and a category at most once per TTL.
	resMu   sync.RWMutex
	results map[uint32]*result

	cpuMu   sync.Mutex
	prevCPU *hw.CPUTimes
	past    hw.PastTracker

	errMu sync.Mutex
	errs  map[string]string
}

// New reads the static facts and returns a Source.
func New(cfg Config) *Source {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.V4L2 == nil {
		cfg.V4L2 = hw.DeviceV4L2{}
	}
	if cfg.TwoFactor == nil {
		cfg.TwoFactor = func() bool { return false }
	}
	s := &Source{cfg: cfg, errs: map[string]string{}}

	facts, err := board.Read(cfg.FS)
	s.report("board", err)
	s.profile = board.Identify(facts)
	s.platform = mustJSON(s.platformOf(facts.DeviceTree))

	ttl, now := cfg.TTL, cfg.Now
	s.auth = newCached(ttl, now, s.readAuth)
	s.extras = newCached(2*ttl, now, s.readExtras)
	s.fan = newCached(0, now, func() fan { return fan{} })
	s.gpio = newCached(ttl, now, s.readGPIO)
	s.health = newCached(ttl, now, s.readHealth)
	s.meta = newCached(2*ttl, now, s.readMeta)
	s.node = newCached(ttl, now, s.readNode)
	s.uptime = newCached(ttl, now, s.readUptime)
	s.usb = newCached(ttl, now, s.readUSB)
	s.video = newCached(ttl, now, s.readVideo)
	for _, built := range []*func(){&s.auth.built, &s.extras.built, &s.fan.built, &s.gpio.built, &s.health.built, &s.meta.built,
		&s.node.built, &s.uptime.built, &s.usb.built, &s.video.built} {
		*built = func() { s.gen.Add(1) }
	}
	s.results = map[uint32]*result{}
	s.jsonOf = map[string]func() []byte{
		"auth": s.auth.get, "extras": s.extras.get, "fan": s.fan.get, "gpio": s.gpio.get, "health": s.health.get,
		"meta": s.meta.get, "node": s.node.get, "uptime": s.uptime.get, "usb": s.usb.get, "video": s.video.get,
	}
	return s
}

// Profile returns the detected board profile.
func (s *Source) Profile() board.Profile { return s.profile }

// Hardware is the changing state of the machine behind the categories
// health, gpio, usb, video and uptime, as values rather than JSON (for the
// Prometheus export). The values are shared with other readers: never
// change them.
type Hardware struct {
	Health Health
	// GPIO is the board's named pins; a pin's Level is nil when it cannot
	// be read without disturbing it.
	GPIO map[string]hw.PinState
	// USB is nil when the gadget could not be read (a fault, logged);
	// Video is nil without a capture device.
	USB    *hw.USB
	Video  *hw.Video
	Uptime Uptime
}

// Hardware returns the values /api/info would show now, from the same
// caches: reading them costs what a request for those categories costs,
// and a value refreshed for one serves the other.
func (s *Source) Hardware() Hardware {
	return Hardware{
		Health: s.health.value(), GPIO: s.gpio.value(), USB: s.usb.value(), Video: s.video.value(), Uptime: s.uptime.value(),
	}
}

// Video returns the capture's reading from the video category's cache
// (nil without a capture device), as Hardware has it: the streamer's
// truth for the signal (streamer.Machine).
func (s *Source) Video() *hw.Video { return s.video.value() }

// result is an answer of Result, made at generation gen.
type result struct {
	gen uint64
	b   []byte
}

// maxResults bounds Source.results: a client asking every combination of
// categories must not make the cache grow without end.
const maxResults = 32

// Result returns the result of /api/info for categories (from
// ParseFields), as JSON: an object with a key per category. The HTTP
// server puts it in its envelope. The bytes are shared with the other
// callers until a category changes: never change them.
//
// Each category's value is refreshed at most once per TTL, as before;
// between refreshes the same categories give the same bytes, made once.
func (s *Source) Result(categories []string, legacy bool) []byte {
	mask, ok := catMask(categories, legacy)
	if !ok {
		return s.assemble(categories, legacy)
	}
	// Refresh what is stale (each get does), then look at the
	// generation: a result of this one holds every category as it is.
	for _, c := range categories {
		if c == "hw" {
			s.gpio.get()
			s.health.get()
			s.usb.get()
			s.video.get()
		} else if get := s.jsonOf[c]; get != nil {
			get()
		}
	}
	gen := s.gen.Load()
	s.resMu.RLock()
	r := s.results[mask]
	s.resMu.RUnlock()
	if r != nil && r.gen == gen {
		return r.b
	}
	b := s.assemble(categories, legacy)
	s.resMu.Lock()
	if len(s.results) >= maxResults {
		clear(s.results)
	}
	s.results[mask] = &result{gen: gen, b: b}
	s.resMu.Unlock()
	return b
}

// catBits numbers the categories for catMask.
var catBits = func() map[string]uint32 {
	m := map[string]uint32{}
	for i, c := range legacyAll {
		m[c] = 1 << i
	}
	for _, c := range newAll {
		if _, ok := m[c]; !ok {
			m[c] = 1 << len(m)
		}
	}
	return m
}()

// legacyBit marks a mask of the legacy layout.
const legacyBit = 1 << 31

// catMask is the set of categories as a bit mask, with legacy. It reports
// false for a list that is not sorted and distinct (as ParseFields gives
// them; the order is the answer's), or names one it does not know.
func catMask(categories []string, legacy bool) (uint32, bool) {
	var m uint32
	if legacy {
		m = legacyBit
	}
	for i, c := range categories {
		bit, ok := catBits[c]
		if !ok || i > 0 && categories[i-1] >= c {
			return 0, false
		}
		m |= bit
	}
	return m, true
}

// assemble makes the result of Result.
func (s *Source) assemble(categories []string, legacy bool) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range categories {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(c)
		b.WriteString(`":`)
		switch c {
		case "system":
			s.systemOnce.Do(func() { s.systemFull, s.systemBare = s.system() })
			if legacy && slices.Contains(categories, "hw") {
				b.Write(s.systemBare)
			} else {
				b.Write(s.systemFull)
			}
		case "hw":
			b.WriteString(`{"gpio":`)
			b.Write(s.gpio.get())
			b.WriteString(`,"health":`)
			b.Write(s.health.get())
			b.WriteString(`,"platform":`)
			b.Write(s.platform)
			b.WriteString(`,"usb":`)
			b.Write(s.usb.get())
			b.WriteString(`,"video":`)
			b.Write(s.video.get())
			b.WriteByte('}')
		default:
			if get := s.jsonOf[c]; get != nil {
				b.Write(get())
			} else {
				b.WriteString("null")
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// report logs a category's read errors once each time they change, and
// once when they clear: a broken sensor is not a log line per request.
func (s *Source) report(what string, errs ...error) {
	var msgs []string
	for _, e := range errs {
		if e != nil && !hw.Absent(e) {
			msgs = append(msgs, e.Error())
		}
	}
	msg := strings.Join(msgs, "; ")
	s.errMu.Lock()
	prev := s.errs[what]
	s.errs[what] = msg
	s.errMu.Unlock()
	switch {
	case msg == prev:
	case msg == "":
		s.cfg.Log.Info("info: readable again", "what", what)
	default:
		s.cfg.Log.Warn("info: cannot read", "what", what, "err", errors.New(msg))
	}
}
