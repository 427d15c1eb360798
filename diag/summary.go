package diag

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"kvmd/hw"
)

// HotCPU is the temperature above which summary.txt warns: the firmware
// starts capping the Pi 4's clock at 80 °C (soft limit 60 °C on a Pi 3+
// is configurable; 80 °C is where every model throttles).
const HotCPU = 80.0

func (b *Bundle) setFacts(fn func(*facts)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(&b.facts)
}

// Findings are the problems summary.txt names, from the probes' facts:
// the same readers /api/info uses, the journal, the clock.
func (b *Bundle) Findings() []string {
	b.mu.Lock()
	f := b.facts
	b.mu.Unlock()
	var out []string
	if h := f.hw; h != nil {
		if t := h.Health.Throttling; t != nil {
			p := t.ParsedFlags
			switch uv := p["undervoltage"]; {
			case uv.Now:
				out = append(out, "under-voltage now: the power supply cannot keep up (use the official supply and a short, thick cable)")
			case uv.Past && !t.IgnorePast:
				out = append(out, "under-voltage since boot: the power supply dipped at least once (source: "+t.Source+")")
			}
			if th := p["throttled"]; th.Now {
				out = append(out, "CPU throttled now")
			} else if th.Past && !t.IgnorePast {
				out = append(out, "CPU throttled since boot")
			}
			if fc := p["freq_capped"]; fc.Now {
				out = append(out, "CPU frequency capped now")
			} else if fc.Past && !t.IgnorePast {
				out = append(out, "CPU frequency capped since boot")
			}
		}
		if c := h.Health.Temp.CPU; c != nil && *c > HotCPU {
			out = append(out, fmt.Sprintf("temperature above %.0f °C: CPU at %.1f °C", HotCPU, *c))
		}
		if m := h.Health.Mem.Percent; m != nil && *m >= 90 {
			out = append(out, fmt.Sprintf("memory %.0f%% used", *m))
		}
		switch v := h.Video; {
		case v == nil:
			out = append(out, "no video capture device found")
		case v.Status == hw.VideoNoSignal:
			out = append(out, "no HDMI signal: the host is off or asleep, or the cable is loose")
		case v.Status != hw.VideoOK:
			out = append(out, "video capture: "+v.Status)
		}
		switch u := h.USB; {
		case u == nil:
			out = append(out, "USB gadget state could not be read")
		case u.Status != hw.USBOK:
			reason := u.Status
			if u.Reason != nil {
				reason = *u.Reason
			}
			out = append(out, "USB gadget not working: "+reason)
		case !u.Connected:
			state := "unknown"
			if u.State != nil {
				state = *u.State
			}
			out = append(out, "USB host not connected (controller state: "+state+"): keyboard and mouse do not reach the host")
		}
	}
	if n := f.failedLogins; n != nil && *n > 0 {
		out = append(out, fmt.Sprintf("%d failed logins in the last hour", *n))
	}
	if s := f.clockSynced; s != nil && !*s {
		out = append(out, "clock not synchronised: 2FA codes and TLS certificates depend on the time (check NTP)")
	}
	for _, d := range f.fullDisks {
		out = append(out, "disk almost full: "+d)
	}
	return out
}

// summary is summary.txt: for the person who opens the bundle first.
func (b *Bundle) summary(_ context.Context, outs []output) []byte {
	var w bytes.Buffer
	host, _ := b.cfg.FS.Hostname()
	fmt.Fprintf(&w, "kvmd support bundle\n\n")
	fmt.Fprintf(&w, "Made:    %s\n", b.now.Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&w, "Host:    %s\n", host)
	fmt.Fprintf(&w, "Version: kvmd %s\n", b.cfg.Version)
	if m, err := b.cfg.FS.ReadString("proc/device-tree/model"); err == nil {
		fmt.Fprintf(&w, "Board:   %s\n", m)
	}
	if d, err := b.cfg.FS.Uptime(); err == nil {
		fmt.Fprintf(&w, "Uptime:  %v\n", d.Round(time.Second))
	}
	if b.cfg.FS.Root() != "/" {
		fmt.Fprintf(&w, "Root:    %s (a fixture tree, not this machine)\n", b.cfg.FS.Root())
	}
	redaction := "secrets removed; user names and addresses kept"
	if b.cfg.Redactor.Identities() {
		redaction = "secrets removed; user names, addresses and the host name replaced by placeholders (user-1, addr-1, host-1)"
	}
	fmt.Fprintf(&w, "Redacted: %s\n", redaction)

	w.WriteString("\nFindings\n--------\n")
	findings := b.Findings()
	if len(findings) == 0 {
		w.WriteString("No problem found in what was read.\n")
	}
	for _, f := range findings {
		fmt.Fprintf(&w, "- %s\n", f)
	}
	var failed []output
	for _, o := range outs {
		if o.Err != nil {
			failed = append(failed, o)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&w, "- %d of %d probes failed or were cut (below); what they would have shown is missing\n", len(failed), len(outs))
	}

	w.WriteString("\nFiles\n-----\n")
	for _, o := range outs {
		status := "ok"
		switch {
		case o.Skipped != "":
			status = "skipped: " + o.Skipped
		case o.Err != nil:
			status = "FAILED: " + strings.ReplaceAll(o.Err.Error(), "\n", "; ")
		}
		fmt.Fprintf(&w, "%-28s %7s  %s\n", o.Name, o.Took.Round(time.Millisecond), status)
	}
	return w.Bytes()
}
