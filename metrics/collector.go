package metrics

import (
	"kvmd/auth"
	"kvmd/hw"
	"kvmd/info"
)

// collector turns the values of kvmd's sources into metrics at each
// scrape. A value that cannot be read leaves its sample out, as it is null
// in /api/info.
type collector struct {
	cfg Config
	d   descs
}

// descs are kvmd's families.
type descs struct {
	build                                *desc
	temp, cpu                            *desc
	memTotal, memAvail, memUsed          *desc
	throttling, throttlingSource         *desc
	usb, usbStatus                       *desc
	signal, width, height, rate          *desc
	hdmiStatus                           *desc
	gpio                                 *desc
	uptime                               *desc
	authAttempts, sessions, logFollowers *desc
	hidReports, hidDropped, hidOnline    *desc
}

func newCollector(cfg Config) *collector {
	d := func(name, help string, labels ...string) *desc {
		return newDesc(name, typeGauge, help, labels...)
	}
	c := func(name, help string, labels ...string) *desc {
		return newDesc(name, typeCounter, help, labels...)
	}
	return &collector{cfg: cfg, d: descs{
		build:    d("kvmd_build_info", "The daemon's version, as a label; the value is always 1.", "version"),
		temp:     d("kvmd_cpu_temperature_celsius", "CPU temperature."),
		cpu:      d("kvmd_cpu_usage_percent", "Busy share of the CPU since the previous reading (at most one a second), in percent."),
		memTotal: d("kvmd_memory_total_bytes", "Memory the kernel manages (MemTotal)."),
		memAvail: d("kvmd_memory_available_bytes", "Memory available to new programs without swapping (MemAvailable)."),
		memUsed:  d("kvmd_memory_used_percent", "Share of memory in use, (total - available) / total, in percent."),
		throttling: d("kvmd_throttling_flag",
			"The Raspberry Pi firmware's throttling flags (get_throttled): 1 when set now (when=now) "+
				"or at any time since boot (when=past). Flags the source cannot see are left out: "+
				"the hwmon alarm sees only undervoltage, and its past is since kvmd started.", "flag", "when"),
		throttlingSource: d("kvmd_throttling_source",
			"Where the throttling flags come from, as a label (always 1): mailbox (the firmware itself), "+
				"sysfs (its get_throttled attribute, older kernels), hwmon (the under-voltage alarm only).", "source"),
		usb: d("kvmd_usb_connected", "1 when a host has enumerated the USB gadget (its controller's state is configured)."),
		usbStatus: d("kvmd_usb_status",
			"1 for the USB gadget's status, 0 for the others: ok (a gadget is bound to a controller), "+
				"no_udc (no USB device controller: the dwc2 overlay is missing, or the board has none), "+
				"no_gadget (a controller, but no gadget bound).", "status"),
		signal: d("kvmd_hdmi_signal", "1 when a source drives the HDMI capture input; absent when the device cannot tell."),
		width:  d("kvmd_hdmi_width_pixels", "Width of the HDMI signal (of the capture format, for USB dongles)."),
		height: d("kvmd_hdmi_height_pixels", "Height of the HDMI signal (of the capture format, for USB dongles)."),
		rate:   d("kvmd_hdmi_refresh_rate_hertz", "Frame rate of the HDMI signal."),
		hdmiStatus: d("kvmd_hdmi_status",
			"The HDMI capture's status as a label (hw.video.status: ok, no_signal, no_lock, out_of_range, "+
				"no_detection, no_access, unknown); the value is always 1.", "status"),
		gpio: d("kvmd_gpio_level",
			"Logical level of the board's named GPIO pins (active-low applied): 1 when the pin's function is on.", "pin"),
		uptime: d("kvmd_system_uptime_seconds", "Time since the machine booted (proc/uptime), in whole seconds."),
		authAttempts: c("kvmd_auth_attempts_total",
			"Authentication attempts since the daemon started, by method (header, cookie, basic, peer, login) "+
				"and result (ok; failed: wrong credentials or session, 403; blocked: refused unchecked "+
				"while the address is rate-limited, 429; unavailable: the password could not be checked, "+
				"the authentication service being down or slow, 503).", "method", "result"),
		sessions:     d("kvmd_sessions_active", "Live login sessions (auth_token cookies)."),
		logFollowers: d("kvmd_log_followers_active", "Streams of /api/log?follow=1 open now."),
		hidReports: c("kvmd_hid_reports_total",
			"HID reports for the host, by device (keyboard, mouse) and result: written to the gadget's node, or "+
				"dropped (superseded in a full queue while the host did not read, or released when it went away).",
			"device", "result"),
		hidDropped: c("kvmd_hid_input_dropped_total",
			"Keyboard and mouse input messages (/api/ws) dropped, by reason: malformed (kvmd drops it too) or "+
				"forbidden (sent by a viewer).", "reason"),
		hidOnline: d("kvmd_hid_online",
			"1 while the host takes the device's reports (keyboard, mouse): 0 when a report timed out, failed or "+
				"has no node to go to.", "device"),
	}}
}

// all returns kvmd's families.
func (c *collector) all() []*desc {
	return []*desc{c.d.build, c.d.temp, c.d.cpu, c.d.memTotal, c.d.memAvail, c.d.memUsed,
		c.d.throttling, c.d.throttlingSource, c.d.usb, c.d.usbStatus, c.d.signal, c.d.width, c.d.height, c.d.rate,
		c.d.hdmiStatus, c.d.gpio, c.d.uptime,
		c.d.authAttempts, c.d.sessions, c.d.logFollowers, c.d.hidReports, c.d.hidDropped, c.d.hidOnline}
}

// collect adds the samples of kvmd's families to e.
func (c *collector) collect(e *exposition) {
	gauge := e.add
	gauge(c.d.build, 1, c.cfg.Version)
	if c.cfg.Hardware != nil {
		c.hardware(c.cfg.Hardware(), gauge)
	}
	if c.cfg.AuthCounts != nil {
		for _, n := range c.cfg.AuthCounts() {
			e.add(c.d.authAttempts, float64(n.N), methodLabel(n.Method), n.Result.String())
		}
	}
	if c.cfg.Sessions != nil {
		gauge(c.d.sessions, float64(c.cfg.Sessions()))
	}
	if c.cfg.LogFollowers != nil {
		gauge(c.d.logFollowers, float64(c.cfg.LogFollowers()))
	}
	if c.cfg.HID != nil {
		n := c.cfg.HID()
		counter := func(d *desc, v uint64, labels ...string) {
			e.add(d, float64(v), labels...)
		}
		counter(c.d.hidReports, n.KeyboardWritten, "keyboard", "written")
		counter(c.d.hidReports, n.KeyboardDropped, "keyboard", "dropped")
		counter(c.d.hidReports, n.MouseWritten, "mouse", "written")
		counter(c.d.hidReports, n.MouseDropped, "mouse", "dropped")
		for _, r := range []string{"malformed", "forbidden"} {
			counter(c.d.hidDropped, n.Dropped[r], r)
		}
	}
	if c.cfg.HIDState != nil {
		st := c.cfg.HIDState()
		gauge(c.d.hidOnline, bit(st.Keyboard.Online), "keyboard")
		gauge(c.d.hidOnline, bit(st.Mouse.Online), "mouse")
	}
}

// methodLabel names a method as the metrics do: header for the X-KVMD-User
// headers (xhdr in kvmd's logs).
func methodLabel(m auth.Method) string {
	if m == auth.MethodHeader {
		return "header"
	}
	return string(m)
}

// throttlingFlags are the firmware's flags, in the order of their bits.
var throttlingFlags = []string{"undervoltage", "freq_capped", "throttled"}

// usbStatuses are hw.USB's statuses.
var usbStatuses = []string{hw.USBOK, hw.USBNoUDC, hw.USBNoGadget}

// sees reports whether a throttling source can see flag: the hwmon alarm
// is under-voltage only, so its false for the others is no measurement.
func sees(source, flag string) bool {
	return source != hw.ThrottleHwmon || flag == "undervoltage"
}

func bit(on bool) float64 {
	if on {
		return 1
	}
	return 0
}

func (c *collector) hardware(h info.Hardware, gauge func(*desc, float64, ...string)) {
	d := c.d
	if t := h.Health.Temp.CPU; t != nil {
		gauge(d.temp, *t)
	}
	if p := h.Health.CPU.Percent; p != nil {
		gauge(d.cpu, float64(*p))
	}
	if m := h.Health.Mem; m.Total != nil && m.Available != nil && m.Percent != nil {
		gauge(d.memTotal, float64(*m.Total))
		gauge(d.memAvail, float64(*m.Available))
		gauge(d.memUsed, *m.Percent)
	}
	if th := h.Health.Throttling; th != nil {
		for _, name := range throttlingFlags {
			if !sees(th.Source, name) {
				continue
			}
			f := th.ParsedFlags[name]
			gauge(d.throttling, bit(f.Now), name, "now")
			gauge(d.throttling, bit(f.Past), name, "past")
		}
		gauge(d.throttlingSource, 1, th.Source)
	}
	if h.USB != nil {
		gauge(d.usb, bit(h.USB.Connected))
		for _, st := range usbStatuses {
			gauge(d.usbStatus, bit(h.USB.Status == st), st)
		}
	}
	if v := h.Video; v != nil {
		gauge(d.hdmiStatus, 1, v.Status)
		if v.Signal != nil {
			gauge(d.signal, bit(*v.Signal))
		}
		if v.Resolution != nil {
			gauge(d.width, float64(v.Resolution.Width))
			gauge(d.height, float64(v.Resolution.Height))
		}
		if v.FPS != nil {
			gauge(d.rate, *v.FPS)
		}
	}
	for name, p := range h.GPIO {
		if p.Level != nil {
			gauge(d.gpio, bit(*p.Level), name)
		}
	}
	if t := h.Uptime.Total; t != nil {
		gauge(d.uptime, float64(*t))
	}
}
