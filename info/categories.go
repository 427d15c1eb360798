package info

import (
	"context"
	"encoding/json"
	"time"

	"kvmd/hw"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// nullable turns "" into null.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type platform struct {
	Type   string  `json:"type"`
	Base   *string `json:"base"`
	Serial *string `json:"serial"`
	Model  *string `json:"model"`
	Video  *string `json:"video"`
	Board  *string `json:"board"`
}

// platformOf is hw.platform: base and serial from the device tree, the
// rest from the board profile (PiKVM's platform file where there is one).
func (s *Source) platformOf(dt hw.DeviceTree) platform {
	return platform{
		Type:   s.profile.Type,
		Base:   nullable(dt.Model),
		Serial: nullable(dt.Serial),
		Model:  nullable(s.profile.Model),
		Video:  nullable(s.profile.Video),
		Board:  nullable(s.profile.Board),
	}
}

type kernel struct {
	System  *string `json:"system"`
	Release *string `json:"release"`
	Version *string `json:"version"`
	Machine *string `json:"machine"`
}

// system returns the system category with and without platform: the
// legacy layout moves platform into hw when hw is asked for.
func (s *Source) system() (full, bare []byte) {
	k, err := s.cfg.FS.Kernel()
	s.report("kernel", err)
	st := streamerState{Features: map[string]bool{}}
	if s.cfg.Streamer != nil {
		if version, features, err := s.cfg.Streamer.Program(context.Background()); err == nil {
			st.App, st.Version = s.cfg.StreamerApp, version
			if features != nil {
				st.Features = features
			}
		}
	}
	sys := map[string]any{
		"kvmd":     map[string]string{"version": s.cfg.Version},
		"streamer": st,
		"kernel":   kernel{nullable(k.System), nullable(k.Release), nullable(k.Version), nullable(k.Machine)},
	}
	bare = mustJSON(sys)
	sys["platform"] = json.RawMessage(s.platform)
	return mustJSON(sys), bare
}

// StreamerProgram asks the video streamer's program what it is: its
// --version and --features (streamer.Prober), or an error when it cannot
// be asked (not installed).
type StreamerProgram interface {
	Program(ctx context.Context) (version string, features map[string]bool, err error)
}

// streamerState is kvmd's system.streamer: the streamer's program name,
// its --version and its --features as name → enabled. kvmd always answers
// the object, with empty values when it cannot ask the streamer, and typed
// clients reject null.
type streamerState struct {
	App      string          `json:"app"`
	Version  string          `json:"version"`
	Features map[string]bool `json:"features"`
}

type authState struct {
	Enabled bool `json:"enabled"`
	TOTP    bool `json:"totp"`
}

func (s *Source) readAuth() authState { return authState{Enabled: true, TOTP: s.cfg.TwoFactor()} }

// fan is the state without a fan daemon: kvmd-fan is not part of this
// daemon, so nothing monitors a fan.
type fan struct {
	Monitored bool `json:"monitored"`
	State     any  `json:"state"`
}

type node struct {
	Host *string `json:"host"`
}

func (s *Source) readNode() node {
	h, err := s.cfg.FS.Hostname()
	s.report("hostname", err)
	return node{Host: nullable(h)}
}

// UptimeParts is an uptime in days, hours, minutes and seconds.
type UptimeParts struct {
	Days    int64 `json:"days"`
	Hours   int64 `json:"hours"`
	Minutes int64 `json:"minutes"`
	Seconds int64 `json:"seconds"`
}

// Uptime is the uptime category: how long the machine has been up, in
// whole seconds; null when proc/uptime cannot be read.
type Uptime struct {
	Total *int64       `json:"total"`
	Parts *UptimeParts `json:"parts"`
}

func (s *Source) readUptime() Uptime {
	d, err := s.cfg.FS.Uptime()
	s.report("uptime", err)
	if err != nil {
		return Uptime{}
	}
	total := int64(d / time.Second)
	return Uptime{Total: &total, Parts: &UptimeParts{
		Days: total / 86400, Hours: total % 86400 / 3600, Minutes: total % 3600 / 60, Seconds: total % 60,
	}}
}

// Mem is the memory part of Health: used share in percent, and bytes.
type Mem struct {
	Percent   *float64 `json:"percent"`
	Total     *uint64  `json:"total"`
	Available *uint64  `json:"available"`
}

// NowPast is a throttling flag: set now, and set since boot.
type NowPast struct {
	Now  bool `json:"now"`
	Past bool `json:"past"`
}

// Throttling is the firmware's throttling state, in kvmd's shape
// (kvmd/apps/kvmd/info/health.py) plus Source; ParsedFlags is keyed
// undervoltage, freq_capped and throttled.
type Throttling struct {
	RawFlags    uint32             `json:"raw_flags"`
	ParsedFlags map[string]NowPast `json:"parsed_flags"`
	IgnorePast  bool               `json:"ignore_past"`
	// Source is the hw.Throttle* that answered: "mailbox" (every flag,
	// past since boot), "sysfs", or "hwmon" (under-voltage only; past
	// since the daemon started), so that a client can tell a measured
	// false from one the source cannot see.
	Source string `json:"source"`
}

// Health is the health category (hw.health): nil pointers are values
// that cannot be read on this machine.
type Health struct {
	Temp struct {
		CPU *float64 `json:"cpu"`
	} `json:"temp"`
	CPU struct {
		Percent *int `json:"percent"`
	} `json:"cpu"`
	Mem        Mem         `json:"mem"`
	Throttling *Throttling `json:"throttling"`
}

func (s *Source) readHealth() Health {
	var h Health
	zones, terr := s.cfg.FS.ThermalZones()
	if t, ok := hw.CPUTemp(zones); terr == nil && ok {
		h.Temp.CPU = &t
	}
	if p, ok := s.cpuPercent(); ok {
		h.CPU.Percent = &p
	}
	m, merr := s.cfg.FS.MemInfo()
	if merr == nil {
		pct := m.Percent()
		h.Mem = Mem{Percent: &pct, Total: &m.Total, Available: &m.Available}
	}
	th, therr := s.cfg.FS.Throttled(s.cfg.Mailbox)
	if th.Source != "" {
		th = s.past.Track(th)
		f := th.Flags()
		h.Throttling = &Throttling{
			IgnorePast: s.profile.IgnorePast,
			RawFlags:   th.Raw,
			ParsedFlags: map[string]NowPast{
				"undervoltage": {f.Undervoltage.Now, f.Undervoltage.Past},
				"freq_capped":  {f.FreqCapped.Now, f.FreqCapped.Past},
				"throttled":    {f.Throttled.Now, f.Throttled.Past},
			},
			Source: th.Source,
		}
	}
	s.report("health", terr, merr, therr)
	return h
}

// cpuPercent is the busy share of the CPU since the previous reading (at
// least a TTL ago), or since boot for the first one.
func (s *Source) cpuPercent() (int, bool) {
	cur, err := s.cfg.FS.CPUTimes()
	s.report("cpu", err)
	if err != nil {
		return 0, false
	}
	s.cpuMu.Lock()
	defer s.cpuMu.Unlock()
	prev := s.prevCPU
	s.prevCPU = &cur
	if prev != nil {
		if p, ok := hw.CPUPercent(*prev, cur); ok {
			return p, true
		}
	}
	return cur.SinceBoot()
}

func (s *Source) readGPIO() map[string]hw.PinState {
	return hw.ReadPins(s.profile.Pins)
}

// readUSB is the gadget's state, or why there is none (hw.USB's Status
// and Reason); null only when what is there cannot be read.
func (s *Source) readUSB() *hw.USB {
	u, err := s.cfg.FS.USB()
	s.report("usb", err)
	if err != nil {
		return nil
	}
	return &u
}

func (s *Source) readVideo() *hw.Video {
	v, err := hw.ReadVideo(s.cfg.FS, s.cfg.V4L2)
	s.report("video", err)
	if hw.Absent(err) {
		return nil // no capture device at all
	}
	return &v // a query error still leaves a usable answer (status unknown)
}
